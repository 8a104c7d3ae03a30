/*-------------------------------------------------------------------------
 *
 * catalog.c
 *	  The OIDs and names of the extension's own objects, per backend.
 *
 * Every entry point finds the extension through the schema of the function
 * that was called, so nothing depends on the caller's search_path.
 *
 * One mechanism keeps this cache true: the types are looked up again after
 * any change to a type (DROP and CREATE EXTENSION give pay_status new
 * OIDs), the tables after any relcache invalidation of the ledger, its
 * primary key or the journal (ALTER TABLE in any session, CREATE TRIGGER,
 * VACUUM).  Each lookup bumps the generation, by which the write layer
 * knows to prepare its plans and judge the tables again (write_sql.c,
 * write_direct_policy.c).  Columns are found by name and checked by type,
 * so a column dropped, added or re-created elsewhere is never written in
 * the wrong place; one that is missing or of another type is refused with
 * an error naming it.  Callers look the tables up after they hold a lock on
 * the table they read, so an invalidation that the lock brings in is seen.
 * A change of any constraint (a domain's CHECK among them) or of the
 * ledger's trigger functions counts as a change of the tables, since it
 * may change whether rows can go straight into them.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/relation.h"
#include "access/table.h"
#include "access/transam.h"
#include "catalog/pg_am.h"
#include "catalog/pg_class.h"
#include "catalog/pg_constraint.h"
#include "catalog/pg_enum.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include "catalog.h"
#include "compat.h"

/* A column the C code reads or writes, and the type it expects. */
typedef struct ColumnSpec
{
	const char *name;
	Oid			type;			/* of the column or its domain's base;
								 * InvalidOid for pay_status */
	bool		optional;		/* absent in an older version's table */
} ColumnSpec;

static const ColumnSpec ledger_columns[LEDGER_COLUMNS] = {
	[LEDGER_BIZNO] = {"bizno", TEXTOID},
	[LEDGER_PREFIX] = {"prefix", TEXTOID},
	[LEDGER_BIZ_ID] = {"biz_id", TEXTOID},
	[LEDGER_STATUS] = {"status", InvalidOid},
	[LEDGER_AMOUNT] = {"amount", NUMERICOID},
	[LEDGER_CURRENCY] = {"currency", TEXTOID},
	[LEDGER_ATTEMPT] = {"attempt", INT4OID},
	[LEDGER_CHANNEL_REF] = {"channel_ref", TEXTOID},
	[LEDGER_LAST_ERROR] = {"last_error", TEXTOID},
	[LEDGER_CREATED_AT] = {"created_at", TIMESTAMPTZOID},
	[LEDGER_UPDATED_AT] = {"updated_at", TIMESTAMPTZOID},
	[LEDGER_PROCESSING_SINCE] = {"processing_since", TIMESTAMPTZOID},
	[LEDGER_NOTE] = {"note", TEXTOID, true},
	[LEDGER_RESPONSE] = {"response", JSONBOID, true},
	[LEDGER_PARENT] = {"parent", TEXTOID, true},
	[LEDGER_REFUND_KEY] = {"refund_key", TEXTOID, true},
	[LEDGER_KIND] = {"kind", TEXTOID, true},
	[LEDGER_EXPIRES_IN] = {"expires_in", INTERVALOID, true},
	[LEDGER_EXPIRES_AT] = {"expires_at", TIMESTAMPTZOID, true},
};

static const ColumnSpec journal_columns[JOURNAL_COLUMNS] = {
	[JOURNAL_SEQ] = {"seq", INT8OID},
	[JOURNAL_BIZNO] = {"bizno", TEXTOID},
	[JOURNAL_ATTEMPT] = {"attempt", INT4OID},
	[JOURNAL_FROM] = {"from_status", InvalidOid},
	[JOURNAL_TO] = {"to_status", InvalidOid},
	[JOURNAL_AMOUNT] = {"amount", NUMERICOID},
	[JOURNAL_CURRENCY] = {"currency", TEXTOID},
	[JOURNAL_AT] = {"at", TIMESTAMPTZOID},
	[JOURNAL_TXID] = {"txid", XID8OID},
	[JOURNAL_ACTOR] = {"actor", TEXTOID},
	[JOURNAL_NOTE] = {"note", TEXTOID},
	[JOURNAL_CHANNEL_REF] = {"channel_ref", TEXTOID, true},
	[JOURNAL_RESPONSE_DIGEST] = {"response_digest", INT8OID, true},
};

static PayCatalog catalog;
static bool types_valid = false;
static bool tables_valid = false;
static bool callbacks_registered = false;
/* counts the invalidations that hit us, to detect one during a lookup */
static uint64 invalidations = 0;
/* the type cache hash values of pay_status and pay_action */
static uint32 status_type_hash = 0;
static uint32 action_type_hash = 0;
/* the syscache hash values of the ledger's own trigger functions */
static uint32 trigger_function_hashes[3];

/* A type changed (hashvalue 0: all of them), or a schema was renamed. */
static void
ForgetTypes(Datum arg, int cacheid, uint32 hashvalue)
{
	if (cacheid == NAMESPACEOID || hashvalue == 0 ||
		hashvalue == status_type_hash || hashvalue == action_type_hash)
	{
		types_valid = false;
		invalidations++;
	}
}

/*
 * An enum label changed, by DDL or by a catalog update: which one is not
 * worth telling (its hash is the label's), and labels change rarely, so
 * the types are looked up again.  A label renamed under the state machine
 * must not go on being read by its old name.
 */
static void
ForgetLabels(Datum arg, int cacheid, uint32 hashvalue)
{
	types_valid = false;
	invalidations++;
}

static void
ForgetTables(Datum arg, Oid relid)
{
	if (relid == InvalidOid || relid == catalog.ledger || relid == catalog.ledger_pkey ||
		relid == catalog.journal || relid == catalog.journal_sequence ||
		relid == catalog.archive_keys || relid == catalog.archive_keys_pkey ||
		relid == catalog.ledger_archive)
	{
		tables_valid = false;
		invalidations++;
	}
}

/*
 * One of the ledger's own trigger functions changed: ALTER EXTENSION UPDATE
 * points it at another entry point of the library, which direct writes,
 * firing the triggers themselves, must call from then on.
 */
static void
ForgetTriggerFunctions(Datum arg, int cacheid, uint32 hashvalue)
{
	for (size_t i = 0; i < lengthof(trigger_function_hashes); i++)
		if (hashvalue == 0 || hashvalue == trigger_function_hashes[i])
		{
			tables_valid = false;
			invalidations++;
			return;
		}
}

/* A constraint changed: a table's, or a domain's the ledger may use. */
static void
ForgetConstraints(Datum arg, int cacheid, uint32 hashvalue)
{
	tables_valid = false;
	invalidations++;
}

static void
RaiseMissing(const char *kind, const char *name)
{
	ereport(ERROR,
			(errcode(ERRCODE_UNDEFINED_OBJECT),
			 errmsg("%s \"%s\" of idempotent_pay is missing", kind, name),
			 errhint("Reinstall the extension, or restore the object from a dump.")));
}

static Oid
LookupType(Oid namespace, const char *name)
{
	Oid			type = GetSysCacheOid2(TYPENAMENSP, Anum_pg_type_oid,
									   CStringGetDatum(name),
									   ObjectIdGetDatum(namespace));

	if (!OidIsValid(type))
		RaiseMissing("type", name);
	return type;
}

static Oid
LookupLabel(Oid type, const char *label)
{
	HeapTuple	tuple = SearchSysCache2(ENUMTYPOIDNAME, ObjectIdGetDatum(type),
										CStringGetDatum(label));
	Oid			oid;

	if (!HeapTupleIsValid(tuple))
		RaiseMissing("enum label", label);
	oid = ((Form_pg_enum) GETSTRUCT(tuple))->oid;
	ReleaseSysCache(tuple);
	return oid;
}

static Oid
LookupRelation(Oid namespace, const char *name)
{
	Oid			relid = get_relname_relid(name, namespace);

	if (!OidIsValid(relid))
		RaiseMissing("relation", name);
	return relid;
}

/*
 * The numbers of the columns specs names in rel, each checked for its
 * type; an optional column that is absent gets InvalidAttrNumber.
 */
static void
LookupColumns(Relation rel, const ColumnSpec *specs, int ncolumns, AttrNumber *attnums)
{
	TupleDesc	tupdesc = RelationGetDescr(rel);

	for (int i = 0; i < ncolumns; i++)
	{
		Oid			expected = OidIsValid(specs[i].type) ? specs[i].type : catalog.status_type;
		Form_pg_attribute attr = NULL;

		for (int a = 0; a < tupdesc->natts && attr == NULL; a++)
		{
			Form_pg_attribute candidate = TupleDescAttr(tupdesc, a);

			if (!candidate->attisdropped &&
				strcmp(NameStr(candidate->attname), specs[i].name) == 0)
				attr = candidate;
		}
		if (attr == NULL && specs[i].optional)
		{
			attnums[i] = InvalidAttrNumber;
			continue;
		}
		if (attr == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_COLUMN),
					 errmsg("column \"%s\" of relation \"%s\" is missing",
							specs[i].name, RelationGetRelationName(rel)),
					 errdetail("idempotent_pay writes it with every payment; without it a value would be lost."),
					 errhint("Add the column back as %s.", format_type_be(expected))));
		if (getBaseType(attr->atttypid) != expected)
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("column \"%s\" of relation \"%s\" is of type %s, not %s",
							specs[i].name, RelationGetRelationName(rel),
							format_type_be(attr->atttypid), format_type_be(expected)),
					 errdetail("idempotent_pay reads and writes it as %s.",
							   format_type_be(expected)),
					 errhint("Change the column back to %s.", format_type_be(expected))));
		attnums[i] = attr->attnum;
	}
}

/*
 * The ledger's primary key, which the API probes by bizno: a B-tree on
 * bizno alone.
 */
static Oid
LookupLedgerKey(Relation ledger)
{
	Oid			pkey = PayRelationGetPrimaryKeyIndex(ledger);
	Relation	index;
	bool		usable;

	if (OidIsValid(pkey))
	{
		index = index_open(pkey, AccessShareLock);
		usable = index->rd_rel->relam == BTREE_AM_OID &&
			index->rd_index->indnatts == 1 &&
			index->rd_index->indkey.values[0] == catalog.ledger_attnums[LEDGER_BIZNO];
		index_close(index, AccessShareLock);
		if (usable)
			return pkey;
	}
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("relation \"pay_ledger\" has no primary key on bizno"),
			 errdetail("One row per bizNo is what stops a second charge."),
			 errhint("ALTER TABLE pay_ledger ADD PRIMARY KEY (bizno).")));
	pg_unreachable();
}

static Oid
LookupTriggerFunction(Oid namespace, const char *name)
{
	Oid			function = GetSysCacheOid3(PROCNAMEARGSNSP, Anum_pg_proc_oid,
										   CStringGetDatum(name),
										   PointerGetDatum(buildoidvector(NULL, 0)),
										   ObjectIdGetDatum(namespace));

	if (!OidIsValid(function))
		RaiseMissing("function", name);
	return function;
}

static void
LookupTypes(FunctionCallInfo fcinfo)
{
	Oid			namespace = get_func_namespace(fcinfo->flinfo->fn_oid);

	/* the name again every time: ALTER SCHEMA ... RENAME keeps the OID */
	if (catalog.schema != NULL)
		pfree((char *) catalog.schema);
	catalog.schema = MemoryContextStrdup(CacheMemoryContext,
										 quote_identifier(get_namespace_name(namespace)));
	catalog.namespace = namespace;

	catalog.status_type = LookupType(namespace, "pay_status");
	status_type_hash = GetSysCacheHashValue1(TYPEOID, ObjectIdGetDatum(catalog.status_type));
	for (int status = 0; status < PAY_STATUS_COUNT; status++)
		catalog.status_labels[status] =
			LookupLabel(catalog.status_type, PayStatusName(status));

	catalog.action_type = LookupType(namespace, "pay_action");
	action_type_hash = GetSysCacheHashValue1(TYPEOID, ObjectIdGetDatum(catalog.action_type));
	for (int action = 0; action < PAY_ACTION_COUNT; action++)
		catalog.action_labels[action] =
			LookupLabel(catalog.action_type, PayActionName(action));
}

static void
LookupTables(void)
{
	Relation	ledger;
	Relation	journal;

	catalog.guard_function = LookupTriggerFunction(catalog.namespace, "pay_guard");
	catalog.bookkeeping_function = LookupTriggerFunction(catalog.namespace,
														 "pay_ledger_bookkeeping");
	catalog.journal_function = LookupTriggerFunction(catalog.namespace, "pay_ledger_journal");
	trigger_function_hashes[0] = GetSysCacheHashValue1(PROCOID, ObjectIdGetDatum(catalog.guard_function));
	trigger_function_hashes[1] = GetSysCacheHashValue1(PROCOID, ObjectIdGetDatum(catalog.bookkeeping_function));
	trigger_function_hashes[2] = GetSysCacheHashValue1(PROCOID, ObjectIdGetDatum(catalog.journal_function));
	catalog.ledger = LookupRelation(catalog.namespace, "pay_ledger");
	ledger = table_open(catalog.ledger, AccessShareLock);
	LookupColumns(ledger, ledger_columns, LEDGER_COLUMNS, catalog.ledger_attnums);
	catalog.ledger_pkey = LookupLedgerKey(ledger);
	table_close(ledger, NoLock);

	catalog.journal = LookupRelation(catalog.namespace, "pay_journal");
	catalog.journal_sequence = LookupRelation(catalog.namespace, "pay_journal_seq_seq");
	journal = table_open(catalog.journal, AccessShareLock);
	LookupColumns(journal, journal_columns, JOURNAL_COLUMNS, catalog.journal_attnums);
	table_close(journal, NoLock);

	/* absent until the update to 1.3 */
	catalog.archive_keys = get_relname_relid("pay_archive_keys", catalog.namespace);
	catalog.archive_keys_pkey = get_relname_relid("pay_archive_keys_pkey", catalog.namespace);
	catalog.ledger_archive = get_relname_relid("pay_ledger_archive", catalog.namespace);
	if (!OidIsValid(catalog.archive_keys_pkey) || !OidIsValid(catalog.ledger_archive))
		catalog.archive_keys = InvalidOid;
}

/*
 * The catalog of the extension whose function fcinfo calls: its schema and
 * types.  The tables are not looked at.
 */
const PayCatalog *
PayCatalogGet(FunctionCallInfo fcinfo)
{
	if (types_valid)
		return &catalog;

	if (!callbacks_registered)
	{
		CacheRegisterSyscacheCallback(TYPEOID, ForgetTypes, (Datum) 0);
		CacheRegisterSyscacheCallback(ENUMOID, ForgetLabels, (Datum) 0);
		CacheRegisterSyscacheCallback(NAMESPACEOID, ForgetTypes, (Datum) 0);
		CacheRegisterRelcacheCallback(ForgetTables, (Datum) 0);
		CacheRegisterSyscacheCallback(CONSTROID, ForgetConstraints, (Datum) 0);
		CacheRegisterSyscacheCallback(PROCOID, ForgetTriggerFunctions, (Datum) 0);
		callbacks_registered = true;
	}

	/* an error leaves the flag false; an invalidation meanwhile, a retry */
	while (!types_valid)
	{
		uint64		before = invalidations;

		LookupTypes(fcinfo);
		catalog.generation++;
		types_valid = invalidations == before;
	}
	return &catalog;
}

/*
 * The catalog with the ledger's and the journal's columns.  Call it after
 * locking the table whose columns are read.
 */
const PayCatalog *
PayCatalogGetTables(FunctionCallInfo fcinfo)
{
	PayCatalogGet(fcinfo);
	while (!tables_valid)
	{
		uint64		before = invalidations;

		LookupTables();
		catalog.generation++;
		tables_valid = invalidations == before;
	}
	return &catalog;
}

/*
 * Pin search_path to the extension's schema and pg_temp until
 * AtEOXact_GUC(true, the level returned) -- or the abort of an error --
 * restores the caller's: what the API runs as SQL, and whatever that fires
 * (a DBA's trigger or default on the ledger, run as the extension owner),
 * never resolves a name on the caller's path; nor does what a direct write
 * evaluates when it is not PAY_EXPRESSION_PLAIN.
 */
int
PayPinSearchPath(const PayCatalog *catalog)
{
	int			nest_level = NewGUCNestLevel();

	(void) set_config_option("search_path", psprintf("%s, pg_temp", catalog->schema),
							 PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	return nest_level;
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
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
			 errmsg("\"%s\" is not a state of the payment state machine",
					DatumGetCString(DirectFunctionCall1(enum_out, ObjectIdGetDatum(label)))),
			 errhint("pay_status has the labels INIT, PROCESSING, SUCCESS and FAILED; a label added to it is no state.")));
	pg_unreachable();
}

/* The type a column of the ledger is read and written as. */
Oid
PayLedgerColumnType(const PayCatalog *cat, LedgerColumn column)
{
	return OidIsValid(ledger_columns[column].type) ? ledger_columns[column].type :
		cat->status_type;
}

/* The name of a column of the journal, and the type it is filled with. */
const char *
PayJournalColumnName(JournalColumn column)
{
	return journal_columns[column].name;
}

Oid
PayJournalColumnType(const PayCatalog *cat, JournalColumn column)
{
	return OidIsValid(journal_columns[column].type) ? journal_columns[column].type :
		cat->status_type;
}

/*
 * Whether the ledger has refunds: the columns of 1.2 a refund is written
 * in (parent, refund_key, and the note and response every write of 1.2
 * sets).  An installation not yet updated has none.
 */
bool
PayLedgerHasRefunds(const PayCatalog *cat)
{
	return cat->ledger_attnums[LEDGER_PARENT] != InvalidAttrNumber &&
		cat->ledger_attnums[LEDGER_REFUND_KEY] != InvalidAttrNumber &&
		cat->ledger_attnums[LEDGER_NOTE] != InvalidAttrNumber &&
		cat->ledger_attnums[LEDGER_RESPONSE] != InvalidAttrNumber;
}
