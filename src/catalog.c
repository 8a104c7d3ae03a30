/*-------------------------------------------------------------------------
 *
 * catalog.c
 *	  The OIDs and names of the extension's own objects, per backend.
 *
 * Every entry point finds the extension through the schema of the function
 * that was called, so nothing depends on the caller's search_path.  The
 * cache is rebuilt after any change to a type (DROP and CREATE EXTENSION in
 * one session give pay_status new OIDs); that is rare DDL, never per row.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_enum.h"
#include "catalog/pg_type.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/syscache.h"

#include "catalog.h"

static PayCatalog catalog;
static bool catalog_valid = false;
static bool callback_registered = false;

static const char *const action_names[PAY_ACTION_COUNT] = {
	"PROCEED", "ALREADY_SUCCEEDED", "IN_PROGRESS", "NEEDS_RESET"
};

static const char *const ledger_column_names[LEDGER_COLUMNS] = {
	"bizno", "prefix", "biz_id", "status", "amount", "currency", "attempt",
	"created_at", "updated_at", "processing_since"
};

static const char *const journal_column_names[JOURNAL_COLUMNS] = {
	"seq", "bizno", "attempt", "from_status", "to_status", "amount", "currency",
	"at", "txid", "actor", "note"
};

static void
ForgetCatalog(Datum arg, int cacheid, uint32 hashvalue)
{
	catalog_valid = false;
}

static Oid
LookupType(Oid namespace, const char *name)
{
	Oid			type = GetSysCacheOid2(TYPENAMENSP, Anum_pg_type_oid,
									   CStringGetDatum(name),
									   ObjectIdGetDatum(namespace));

	if (!OidIsValid(type))
		elog(ERROR, "type %s of idempotent_pay is missing", name);
	return type;
}

static Oid
LookupLabel(Oid type, const char *label)
{
	HeapTuple	tuple = SearchSysCache2(ENUMTYPOIDNAME, ObjectIdGetDatum(type),
										CStringGetDatum(label));
	Oid			oid;

	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "label %s of an idempotent_pay enum is missing", label);
	oid = ((Form_pg_enum) GETSTRUCT(tuple))->oid;
	ReleaseSysCache(tuple);
	return oid;
}

static Oid
LookupRelation(Oid namespace, const char *name)
{
	Oid			relid = get_relname_relid(name, namespace);

	if (!OidIsValid(relid))
		elog(ERROR, "relation %s of idempotent_pay is missing", name);
	return relid;
}

static void
LookupColumns(Oid relid, const char *const *names, int ncolumns, AttrNumber *attnums)
{
	for (int i = 0; i < ncolumns; i++)
	{
		attnums[i] = get_attnum(relid, names[i]);
		if (attnums[i] == InvalidAttrNumber)
			elog(ERROR, "column %s of %s is missing", names[i], get_rel_name(relid));
	}
}

/*
 * The catalog of the extension whose function fcinfo calls.
 */
const PayCatalog *
PayCatalogGet(FunctionCallInfo fcinfo)
{
	Oid			namespace;

	if (catalog_valid)
		return &catalog;

	if (!callback_registered)
	{
		CacheRegisterSyscacheCallback(TYPEOID, ForgetCatalog, (Datum) 0);
		callback_registered = true;
	}

	namespace = get_func_namespace(fcinfo->flinfo->fn_oid);
	if (catalog.schema == NULL || catalog.namespace != namespace)
	{
		char	   *name = get_namespace_name(namespace);

		if (catalog.schema != NULL)
			pfree((char *) catalog.schema);
		catalog.schema = MemoryContextStrdup(CacheMemoryContext,
											 quote_identifier(name));
		catalog.namespace = namespace;
	}

	catalog.status_type = LookupType(namespace, "pay_status");
	for (int status = 0; status < PAY_STATUS_COUNT; status++)
		catalog.status_labels[status] =
			LookupLabel(catalog.status_type, PayStatusName(status));

	catalog.action_type = LookupType(namespace, "pay_action");
	for (int action = 0; action < PAY_ACTION_COUNT; action++)
		catalog.action_labels[action] =
			LookupLabel(catalog.action_type, action_names[action]);

	catalog.ledger = LookupRelation(namespace, "pay_ledger");
	LookupColumns(catalog.ledger, ledger_column_names, LEDGER_COLUMNS,
				  catalog.ledger_attnums);
	catalog.journal = LookupRelation(namespace, "pay_journal");
	catalog.journal_sequence = LookupRelation(namespace, "pay_journal_seq_seq");
	LookupColumns(catalog.journal, journal_column_names, JOURNAL_COLUMNS,
				  catalog.journal_attnums);

	catalog_valid = true;
	return &catalog;
}

/*
 * The state of a pay_status label OID.
 */
PayStatus
PayStatusFromLabel(const PayCatalog *cat, Oid label)
{
	for (int status = 0; status < PAY_STATUS_COUNT; status++)
		if (cat->status_labels[status] == label)
			return (PayStatus) status;
	elog(ERROR, "%u is not a label of pay_status", label);
	pg_unreachable();
}
