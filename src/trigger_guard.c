/*-------------------------------------------------------------------------
 *
 * trigger_guard.c
 *	  pay_guard(): the trigger that enforces the state machine on a table;
 *	  and pay_allowed().
 *
 * Installed BEFORE INSERT OR UPDATE OR DELETE FOR EACH ROW and BEFORE
 * TRUNCATE FOR EACH STATEMENT, ENABLE ALWAYS, with the arguments
 *
 *	  pay_guard(status_column [, frozen_column ...])
 *
 * on the ledger and on user tables: INSERT starts in INIT or PROCESSING,
 * UPDATE follows the transition table of machine.c (a write that leaves the
 * status alone is not a transition), frozen columns keep their values while
 * PROCESSING or SUCCESS, PROCESSING and SUCCESS rows are not deleted, and
 * TRUNCATE is refused.  With no arguments the table is append-only (the
 * journal, the archive): UPDATE, DELETE and TRUNCATE are refused.  The one
 * way out of the ledger for a SUCCESS payment, and out of the journal for
 * any row, is into the archive: a row the same transaction inserted there
 * (pay_archive, or a replica applying its transaction) may be deleted.
 *
 * An INSERT may carry any state where rows arrive whose history was checked
 * where they were made: under session_replication_role = replica (a logical
 * replica's apply), and in a restore of pg_dump's output (PayRestoring).
 * UPDATE and DELETE are guarded there too.
 *
 * The column numbers are resolved from the trigger's arguments and the
 * relation's descriptor once per statement and kept in fn_extra: no catalog
 * or SPI lookup per row.
 *
 * pay_allowed exposes the transition table to SQL.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/rel.h"

#include "catalog.h"
#include "compat.h"
#include "machine.h"
#include "reason.h"
#include "trigger_common.h"
#include "triggers.h"
#include "write.h"

typedef struct GuardConfig
{
	bool		append_only;
	AttrNumber	status_attnum;
	bool		status_is_enum; /* pay_status, else text or varchar */
	int			nfrozen;
	AttrNumber *frozen_attnums;
	const PayCatalog *catalog;
} GuardConfig;

PG_FUNCTION_INFO_V1(pay_guard);
PG_FUNCTION_INFO_V1(pay_allowed);

static GuardConfig *
BuildGuardConfig(FunctionCallInfo fcinfo, TriggerData *trigdata)
{
	Relation	rel = trigdata->tg_relation;
	Trigger    *trigger = trigdata->tg_trigger;
	GuardConfig *config;
	Oid			status_type;

	config = MemoryContextAllocZero(fcinfo->flinfo->fn_mcxt, sizeof(GuardConfig));
	config->catalog = PayCatalogGet(fcinfo);
	config->append_only = trigger->tgnargs == 0;
	if (config->append_only)
		return config;

	config->status_attnum = PayColumnNumber(rel, trigger->tgargs[0]);
	status_type = TupleDescAttr(RelationGetDescr(rel),
								config->status_attnum - 1)->atttypid;
	if (status_type == config->catalog->status_type)
		config->status_is_enum = true;
	else if (status_type != TEXTOID && status_type != VARCHAROID)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("status column \"%s\" of relation \"%s\" is of type %s",
						trigger->tgargs[0], RelationGetRelationName(rel),
						format_type_be(status_type)),
				 errhint("A guarded status column is of type pay_status, text or varchar.")));

	config->nfrozen = trigger->tgnargs - 1;
	config->frozen_attnums = MemoryContextAlloc(fcinfo->flinfo->fn_mcxt,
												sizeof(AttrNumber) * Max(config->nfrozen, 1));
	for (int i = 0; i < config->nfrozen; i++)
		config->frozen_attnums[i] = PayColumnNumber(rel, trigger->tgargs[i + 1]);
	return config;
}

/*
 * The state in the status column of tuple; NULL or a label that is not a
 * state is refused.
 */
static PayStatus
StatusOfRow(GuardConfig *config, Relation rel, HeapTuple tuple)
{
	bool		isnull;
	Datum		value = heap_getattr(tuple, config->status_attnum,
									 RelationGetDescr(rel), &isnull);
	PayStatus	status;
	text	   *label;

	if (isnull)
		ereport(ERROR,
				(errmsg("payment status of %s must not be null",
						PayRowKeyDescription(rel, tuple)),
				 errtable(rel),
				 PayReason(PAY_REASON_STATUS_NULL)));

	if (config->status_is_enum)
		return PayStatusFromLabel(config->catalog, DatumGetObjectId(value));

	label = DatumGetTextPP(value);
	if (!PayStatusFromText(VARDATA_ANY(label), VARSIZE_ANY_EXHDR(label), &status))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
				 errmsg("invalid payment status \"%s\" in %s", text_to_cstring(label),
						PayRowKeyDescription(rel, tuple)),
				 errhint("A payment status is INIT, PROCESSING, SUCCESS or FAILED.")));
	return status;
}

static void
RaiseGuardRefusal(Relation rel, PayReasonId reason, const char *message, const char *detail)
{
	ereport(ERROR,
			(errmsg("%s on table \"%s\"", message, RelationGetRelationName(rel)),
			 errdetail("%s", detail),
			 errtable(rel),
			 PayReason(reason)));
}

static void
CheckFrozenColumns(GuardConfig *config, Relation rel, HeapTuple oldtuple,
				   HeapTuple newtuple, PayStatus status)
{
	for (int i = 0; i < config->nfrozen; i++)
	{
		AttrNumber	attnum = config->frozen_attnums[i];
		Form_pg_attribute attr = TupleDescAttr(RelationGetDescr(rel), attnum - 1);

		if (PayColumnUnchanged(rel, oldtuple, newtuple, attnum))
			continue;

		RaiseGuardRefusal(rel, PAY_REASON_FROZEN_COLUMN,
						  psprintf("column \"%s\" is frozen", NameStr(attr->attname)),
						  psprintf("%s is %s: \"%s\" is frozen while PROCESSING or SUCCESS.",
								   PayRowKeyDescription(rel, oldtuple),
								   PayStatusName(status), NameStr(attr->attname)));
	}
}

/*
 * Whether tuple, being deleted from the ledger or the journal, is a row this
 * transaction moved into the archive (write_archive.c): the one way a
 * settled payment and its history leave.  A user's guarded table has no
 * archive.
 */
static bool
MovedIntoArchive(FunctionCallInfo fcinfo, Relation rel, HeapTuple tuple)
{
	const PayCatalog *catalog = PayCatalogGetTables(fcinfo);
	Oid			relid = RelationGetRelid(rel);
	bool		isnull;
	Datum		key;

	if (relid == catalog->ledger)
	{
		key = heap_getattr(tuple, catalog->ledger_attnums[LEDGER_BIZNO], RelationGetDescr(rel),
						   &isnull);
		return !isnull && PayArchiveWasMoved(PAY_MOVED_LEDGER_ROW, PayArchiveKeyHash(key));
	}
	if (relid == catalog->journal)
	{
		key = heap_getattr(tuple, catalog->journal_attnums[JOURNAL_SEQ], RelationGetDescr(rel),
						   &isnull);
		return !isnull && PayArchiveWasMoved(PAY_MOVED_JOURNAL_ROW, (uint64) DatumGetInt64(key));
	}
	return false;
}

/*
 * pay_guard() returns trigger
 */
Datum
pay_guard(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	GuardConfig *config;
	Relation	rel;
	TriggerEvent event;

	PayCheckTriggerProtocol(fcinfo, "pay_guard()", TRIGGER_EVENT_BEFORE,
							PAY_ON_INSERT | PAY_ON_UPDATE | PAY_ON_DELETE,
							true);

	rel = trigdata->tg_relation;
	event = trigdata->tg_event;
	config = fcinfo->flinfo->fn_extra;
	if (config == NULL)
		fcinfo->flinfo->fn_extra = config = BuildGuardConfig(fcinfo, trigdata);

	if (TRIGGER_FIRED_BY_TRUNCATE(event))
		RaiseGuardRefusal(rel, config->append_only ? PAY_REASON_APPEND_ONLY : PAY_REASON_PROTECTED_ROW,
						  "TRUNCATE is refused",
						  config->append_only ? "The table is append-only." :
						  "Payment rows are never removed wholesale.");

	if (config->append_only)
	{
		if (TRIGGER_FIRED_BY_INSERT(event))
			return PointerGetDatum(trigdata->tg_trigtuple);
		if (TRIGGER_FIRED_BY_DELETE(event) && MovedIntoArchive(fcinfo, rel, trigdata->tg_trigtuple))
			return PointerGetDatum(trigdata->tg_trigtuple);
		RaiseGuardRefusal(rel, PAY_REASON_APPEND_ONLY,
						  TRIGGER_FIRED_BY_UPDATE(event) ? "UPDATE is refused" : "DELETE is refused",
						  "The table is append-only.");
	}

	if (TRIGGER_FIRED_BY_INSERT(event))
	{
		HeapTuple	tuple = trigdata->tg_trigtuple;
		PayStatus	to = StatusOfRow(config, rel, tuple);

		if (SessionReplicationRole != SESSION_REPLICATION_ROLE_REPLICA && !PayRestoring() &&
			PayTransitionVerdict(PAY_NEW_ROW, to) != PAY_LEGAL)
			PayRaiseIllegalTransition(rel, PayRowKeyDescription(rel, tuple),
									  PAY_NEW_ROW, to);
		return PointerGetDatum(tuple);
	}

	if (TRIGGER_FIRED_BY_UPDATE(event))
	{
		HeapTuple	oldtuple = trigdata->tg_trigtuple;
		HeapTuple	newtuple = trigdata->tg_newtuple;
		PayStatus	from = StatusOfRow(config, rel, oldtuple);
		PayStatus	to = StatusOfRow(config, rel, newtuple);

		if (from != to && PayTransitionVerdict(from, to) != PAY_LEGAL)
			PayRaiseIllegalTransition(rel, PayRowKeyDescription(rel, oldtuple),
									  from, to);
		if (PayStatusIsFrozen(from))
			CheckFrozenColumns(config, rel, oldtuple, newtuple, from);
		return PointerGetDatum(newtuple);
	}

	/* DELETE */
	{
		HeapTuple	tuple = trigdata->tg_trigtuple;
		PayStatus	status = StatusOfRow(config, rel, tuple);

		if (status == PAY_SUCCESS && MovedIntoArchive(fcinfo, rel, tuple))
			return PointerGetDatum(tuple);
		if (PayStatusIsFrozen(status))
			RaiseGuardRefusal(rel, PAY_REASON_PROTECTED_ROW, "DELETE is refused",
							  psprintf("%s is %s; only INIT and FAILED payments may be deleted.",
									   PayRowKeyDescription(rel, tuple),
									   PayStatusName(status)));
		return PointerGetDatum(tuple);
	}
}

/*
 * pay_allowed(from pay_status, to pay_status) returns boolean
 *
 * Whether from -> to is a legal transition; a NULL from is a new row.
 * Writing the same state again is a no-op, not a transition: false.
 */
Datum
pay_allowed(PG_FUNCTION_ARGS)
{
	const PayCatalog *catalog;
	int			from;
	PayStatus	to;

	if (PG_ARGISNULL(1))
		PG_RETURN_NULL();

	catalog = PayCatalogGet(fcinfo);
	from = PG_ARGISNULL(0) ? PAY_NEW_ROW :
		(int) PayStatusFromLabel(catalog, PG_GETARG_OID(0));
	to = PayStatusFromLabel(catalog, PG_GETARG_OID(1));

	PG_RETURN_BOOL(PayTransitionVerdict(from, to) == PAY_LEGAL);
}
