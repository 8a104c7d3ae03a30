/*-------------------------------------------------------------------------
 *
 * lifecycle.c
 *	  The extension's life in a database: DROP EXTENSION idempotent_pay,
 *	  with or without CASCADE, DROP SCHEMA ... CASCADE of its schema and
 *	  DROP OWNED BY the ledger's owner are refused while the ledger holds a
 *	  payment.
 *
 * The ledger is the memory that stops a second charge: dropping it re-opens
 * every old order to PROCEED.  pay_refuse_drop() is an event trigger on
 * ddl_command_start (ENABLE ALWAYS), so it sees the DROP before anything is
 * dropped; it locks the ledger as the DROP would, then looks for payments,
 * so none committed meanwhile is missed.  DROP DATABASE and single-user
 * mode fire no event trigger.  doc/operations.md shows the deliberate way out:
 * archive, empty the tables as a superuser, then drop.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_class.h"
#include "commands/event_trigger.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"

#include "lifecycle.h"

#define EXTENSION_NAME "idempotent_pay"

PG_FUNCTION_INFO_V1(pay_refuse_drop);

/*
 * Whether parsetree drops the ledger: the extension, its schema with
 * everything in it, or everything its owner owns.
 */
static bool
DropsTheLedger(Node *parsetree, Oid namespace, Oid ledger_owner)
{
	ListCell   *cell;

	if (IsA(parsetree, DropOwnedStmt))
	{
		foreach(cell, ((DropOwnedStmt *) parsetree)->roles)
			if (get_rolespec_oid(lfirst(cell), true) == ledger_owner)
				return true;
		return false;
	}
	if (IsA(parsetree, DropStmt))
	{
		DropStmt   *stmt = (DropStmt *) parsetree;
		const char *schema = get_namespace_name(namespace);

		if (stmt->removeType != OBJECT_EXTENSION &&
			!(stmt->removeType == OBJECT_SCHEMA && stmt->behavior == DROP_CASCADE))
			return false;
		foreach(cell, stmt->objects)
		{
			const char *name = strVal(lfirst(cell));

			if (strcmp(name, stmt->removeType == OBJECT_EXTENSION ? EXTENSION_NAME : schema) == 0)
				return true;
		}
	}
	return false;
}

static Oid
RelationOwner(Oid relid)
{
	HeapTuple	tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	Oid			owner;

	if (!HeapTupleIsValid(tuple))
		return InvalidOid;
	owner = ((Form_pg_class) GETSTRUCT(tuple))->relowner;
	ReleaseSysCache(tuple);
	return owner;
}

/*
 * The payments in the ledger, seen with a fresh snapshot under the lock
 * the DROP would take, counted as the ledger's owner (whoever drops may
 * not read it, and no row security hides a row from its owner).
 */
static int64
CountAsOwner(Oid owner, const char *query)
{
	bool		isnull;
	int64		count;
	Oid			saved_user;
	int			saved_context;

	GetUserIdAndSecContext(&saved_user, &saved_context);
	SetUserIdAndSecContext(owner, saved_context | SECURITY_LOCAL_USERID_CHANGE |
						   SECURITY_RESTRICTED_OPERATION);
	SPI_connect();
	if (SPI_execute(query, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not count what the drop would lose");
	count = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc,
										1, &isnull));
	SPI_finish();
	SetUserIdAndSecContext(saved_user, saved_context);
	return isnull ? 0 : count;
}

static const char *
QualifiedName(Oid relid)
{
	return psprintf("%s.%s", quote_identifier(get_namespace_name(get_rel_namespace(relid))),
					quote_identifier(get_rel_name(relid)));
}

static int64
CountPayments(Oid ledger, Oid owner)
{
	LockRelationOid(ledger, AccessExclusiveLock);
	return CountAsOwner(owner, psprintf("SELECT pg_catalog.count(*) FROM %s",
										QualifiedName(ledger)));
}

/*
 * The hashes pay_archive_keys keeps of archived payments' keys and business
 * actions (since 1.3): dropping them would let a late retry of any archived
 * payment be charged again.
 */
static int64
CountArchivedKeys(Oid namespace, Oid owner)
{
	Oid			keys = get_relname_relid("pay_archive_keys", namespace);

	if (!OidIsValid(keys))
		return 0;
	LockRelationOid(keys, AccessExclusiveLock);
	/* a row that is not a packed list of hashes counts as one */
	return CountAsOwner(owner, psprintf("SELECT pg_catalog.sum(COALESCE(pg_catalog.cardinality("
										"%s.pay_archive_key_unpack(lo, hashes)), 1))::bigint FROM %s",
										quote_identifier(get_namespace_name(namespace)),
										QualifiedName(keys)));
}

/*
 * pay_refuse_drop() returns event_trigger
 */
Datum
pay_refuse_drop(PG_FUNCTION_ARGS)
{
	EventTriggerData *trigdata = (EventTriggerData *) fcinfo->context;
	Oid			namespace;
	Oid			ledger;
	Oid			owner;
	int64		payments;

	if (!CALLED_AS_EVENT_TRIGGER(fcinfo) || strcmp(trigdata->event, "ddl_command_start") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_EVENT_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("pay_refuse_drop() must be fired as an event trigger on ddl_command_start")));

	/* a ledger already gone, as in a damaged install, is no reason to refuse */
	namespace = get_func_namespace(fcinfo->flinfo->fn_oid);
	ledger = get_relname_relid("pay_ledger", namespace);
	if (!OidIsValid(ledger))
		PG_RETURN_VOID();
	owner = RelationOwner(ledger);
	if (!DropsTheLedger(trigdata->parsetree, namespace, owner))
		PG_RETURN_VOID();

	payments = CountPayments(ledger, owner);
	if (payments > 0)
		ereport(ERROR,
				(errcode(ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST),
				 errmsg("cannot drop idempotent_pay: pay_ledger holds " INT64_FORMAT " payment%s",
						payments, payments == 1 ? "" : "s"),
				 errdetail("Dropping the extension drops the ledger and the journal, the record that stops a second charge of every one of them."),
				 errhint("Archive them first (\\copy pay_ledger TO 'pay_ledger.csv' CSV HEADER, the same for pay_journal), "
						 "then empty both tables as a superuser as doc/operations.md shows, and drop again.")));
	payments = CountArchivedKeys(namespace, owner);
	if (payments > 0)
		ereport(ERROR,
				(errcode(ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST),
				 errmsg("cannot drop idempotent_pay: pay_archive_keys keeps " INT64_FORMAT " hash%s of archived payments",
						payments, payments == 1 ? "" : "es"),
				 errdetail("They are what refuses a late retry of an archived payment; without them it would be charged again."),
				 errhint("Empty pay_archive_keys as a superuser as doc/operations.md shows, and drop again.")));
	PG_RETURN_VOID();
}
