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
 * journal, the archive): UPDATE, DELETE and TRUNCATE are refused.  The
 * journal and pay_maintenance_log, the record of what the extension did,
 * take an INSERT (since 1.4, whose guards fire on it) only of the row the
 * extension's own C code is writing (PayTakeOwnRowPermit), of a logical
 * replica's apply, or of a restore (PayRestoring): a superuser's row there
 * would forge a second charge, which raises a payment's refund limit, or a
 * maintenance entry.  The one
 * way out of the ledger for a SUCCESS payment, and out of the journal for
 * any row, is into the archive: a row the same transaction inserted there
 * (pay_archive, or a replica applying its transaction) may be deleted.
 *
 * An INSERT may carry any state where rows arrive whose history was checked
 * where they were made: under session_replication_role = replica (a logical
 * replica's apply), and in a restore of pg_dump's output (PayRestoring).
 * UPDATE and DELETE are guarded there too.
 *
 * On the ledger the guard also holds the rules that keep a payment's
 * identity and its settled answer, because it is the ledger's one trigger
 * that fires in every session mode (the bookkeeping trigger does not fire
 * under replica): bizno, prefix, biz_id, created_at, a refund's parent and
 * refund_key never change; attempt changes only by entering PROCESSING,
 * by one; a SUCCESS keeps its response and, since 1.3 (pay_guard_1_3), its
 * bank reference, which it enters SUCCESS with.  Amount and currency are
 * frozen by the arguments, as on any guarded table.  A new ledger row of an
 * archived payment is refused in every mode, a restore's included: the
 * one row that would charge an archived payment again.  The ledger's rows
 * are deformed once per version of a row, into arrays the guard keeps for
 * the statement.
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
#include "replication/logicalworker.h"
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
	bool		written_by_extension;	/* the journal or pay_maintenance_log */
	AttrNumber	status_attnum;
	bool		status_is_enum; /* pay_status, else text or varchar */
	int			nfrozen;
	AttrNumber *frozen_attnums;
	const PayCatalog *catalog;

	/* the ledger, held to its own rules too, on rows deformed into these */
	bool		ledger;
	bool		rules_1_3;		/* bound as pay_guard_1_3 */
	int			natts;			/* of the arrays of old_row and new_row */
	PayLedgerValues old_row;
	PayLedgerValues new_row;
} GuardConfig;

PG_FUNCTION_INFO_V1(pay_guard);
PG_FUNCTION_INFO_V1(pay_guard_1_3);
PG_FUNCTION_INFO_V1(pay_allowed);

/*
 * The guard's arrays for the two versions of a ledger row, sized to the
 * relation's columns: allocated once, and again only when an ALTER TABLE
 * changed the number of columns while the guard was kept (a direct write
 * keeps its trigger functions across statements).
 */
static void
SizeLedgerRows(FunctionCallInfo fcinfo, GuardConfig *config, Relation rel)
{
	int			natts = RelationGetDescr(rel)->natts;
	MemoryContext mcxt = fcinfo->flinfo->fn_mcxt;

	if (config->natts == natts)
		return;
	config->old_row.values = MemoryContextAlloc(mcxt, natts * sizeof(Datum));
	config->old_row.nulls = MemoryContextAlloc(mcxt, natts * sizeof(bool));
	config->new_row.values = MemoryContextAlloc(mcxt, natts * sizeof(Datum));
	config->new_row.nulls = MemoryContextAlloc(mcxt, natts * sizeof(bool));
	config->natts = natts;
}

static GuardConfig *
BuildGuardConfig(FunctionCallInfo fcinfo, TriggerData *trigdata, bool rules_1_3)
{
	Relation	rel = trigdata->tg_relation;
	Trigger    *trigger = trigdata->tg_trigger;
	GuardConfig *config;
	Oid			status_type;

	config = MemoryContextAllocZero(fcinfo->flinfo->fn_mcxt, sizeof(GuardConfig));
	config->catalog = PayCatalogGet(fcinfo);
	config->append_only = trigger->tgnargs == 0;
	config->rules_1_3 = rules_1_3;
	if (config->append_only)
	{
		/*
		 * By name, in the extension's schema (whose tables are never
		 * renamed): the journal's columns need not be looked up, which a
		 * DBA repairing them in maintenance, recorded in the log, may be
		 * about to restore.
		 */
		config->written_by_extension = RelationGetNamespace(rel) == config->catalog->namespace &&
			(strcmp(RelationGetRelationName(rel), "pay_journal") == 0 ||
			 strcmp(RelationGetRelationName(rel), "pay_maintenance_log") == 0);
		return config;
	}

	/* the ledger's column numbers come with the catalog's tables */
	if (RelationGetRelid(rel) == PayCatalogGetTables(fcinfo)->ledger)
	{
		config->catalog = PayCatalogGetTables(fcinfo);
		config->ledger = true;
	}

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
 * The state in the status column of tuple, whose value is given; NULL or a
 * label that is not a state is refused.
 */
static PayStatus
StatusOfValue(GuardConfig *config, Relation rel, HeapTuple tuple, Datum value, bool isnull)
{
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
				 errmsg("invalid payment status \"%s\" in %s", PayQuoteText(label),
						PayRowKeyDescription(rel, tuple)),
				 errhint("A payment status is INIT, PROCESSING, SUCCESS or FAILED.")));
	return status;
}

/* StatusOfValue of a row read with heap_getattr. */
static PayStatus
StatusOfRow(GuardConfig *config, Relation rel, HeapTuple tuple)
{
	bool		isnull;
	Datum		value = heap_getattr(tuple, config->status_attnum,
									 RelationGetDescr(rel), &isnull);

	return StatusOfValue(config, rel, tuple, value, isnull);
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

/*
 * The frozen columns of the arguments keep their values in a PROCESSING or
 * SUCCESS row; on the ledger they are read from the rows the guard
 * deformed.
 */
static void
CheckFrozenColumns(GuardConfig *config, Relation rel, HeapTuple oldtuple,
				   HeapTuple newtuple, PayStatus status)
{
	for (int i = 0; i < config->nfrozen; i++)
	{
		AttrNumber	attnum = config->frozen_attnums[i];
		Form_pg_attribute attr = TupleDescAttr(RelationGetDescr(rel), attnum - 1);

		if (config->ledger ?
			PayLedgerValueUnchanged(rel, &config->old_row, &config->new_row, attnum) :
			PayColumnUnchanged(rel, oldtuple, newtuple, attnum))
			continue;

		RaiseGuardRefusal(rel, PAY_REASON_FROZEN_COLUMN,
						  psprintf("column \"%s\" is frozen", NameStr(attr->attname)),
						  psprintf("%s is %s: \"%s\" is frozen while PROCESSING or SUCCESS.",
								   PayRowKeyDescription(rel, oldtuple),
								   PayStatusName(status), NameStr(attr->attname)));
	}
}

/* Refuse a change of a ledger column that never changes once written. */
static void
CheckLedgerUnchanged(Relation rel, const PayLedgerValues *old, const PayLedgerValues *new,
					 AttrNumber attnum)
{
	Form_pg_attribute attr;

	if (attnum == InvalidAttrNumber || PayLedgerValueUnchanged(rel, old, new, attnum))
		return;
	attr = TupleDescAttr(RelationGetDescr(rel), attnum - 1);
	ereport(ERROR,
			(errmsg("column \"%s\" of table \"pay_ledger\" never changes",
					NameStr(attr->attname)),
			 errdetail("%s: \"%s\" is fixed when the payment is recorded.",
					   PayRowKeyDescription(rel, old->tuple), NameStr(attr->attname)),
			 errtable(rel),
			 PayReason(PAY_REASON_IMMUTABLE_COLUMN)));
}

/*
 * The rules of an UPDATE of the ledger that hold in every session mode: a
 * payment's identity, its count of attempts and a success's answer are
 * what every retry is judged and answered by, so neither a superuser in
 * replica mode nor a replica's apply may change them (a publisher never
 * does).  The bookkeeping trigger, before the guard, has derived attempt
 * for a write in origin mode: there the count always holds.
 */
static void
CheckLedgerUpdate(GuardConfig *config, Relation rel, PayStatus from, PayStatus to)
{
	const AttrNumber *col = config->catalog->ledger_attnums;
	const PayLedgerValues *old = &config->old_row;
	const PayLedgerValues *new = &config->new_row;
	int32		old_attempt;
	int32		new_attempt;
	int32		entered;

	CheckLedgerUnchanged(rel, old, new, col[LEDGER_BIZNO]);
	CheckLedgerUnchanged(rel, old, new, col[LEDGER_PREFIX]);
	CheckLedgerUnchanged(rel, old, new, col[LEDGER_BIZ_ID]);
	CheckLedgerUnchanged(rel, old, new, col[LEDGER_CREATED_AT]);
	CheckLedgerUnchanged(rel, old, new, col[LEDGER_PARENT]);
	CheckLedgerUnchanged(rel, old, new, col[LEDGER_REFUND_KEY]);

	old_attempt = DatumGetInt32(PayRequiredValue(rel, old, col[LEDGER_ATTEMPT]));
	new_attempt = DatumGetInt32(PayRequiredValue(rel, new, col[LEDGER_ATTEMPT]));
	entered = from != PAY_PROCESSING && to == PAY_PROCESSING ? 1 : 0;
	if ((int64) new_attempt != (int64) old_attempt + entered)
		ereport(ERROR,
				(errmsg("column \"attempt\" of table \"pay_ledger\" counts the entries into PROCESSING"),
				 errdetail("%s: attempt %d -> %d, %s.", PayRowKeyDescription(rel, old->tuple),
						   old_attempt, new_attempt,
						   entered ? "entering PROCESSING adds one" :
						   "a write that does not enter PROCESSING keeps it"),
				 errtable(rel),
				 PayReason(PAY_REASON_ATTEMPT_COUNT)));

	if (from == PAY_SUCCESS && col[LEDGER_RESPONSE] != InvalidAttrNumber &&
		!PayLedgerValueUnchanged(rel, old, new, col[LEDGER_RESPONSE]))
		ereport(ERROR,
				(errmsg("the response of a successful payment never changes"),
				 errdetail("%s is SUCCESS: its first response is the one every retry replays.",
						   PayRowKeyDescription(rel, old->tuple)),
				 errtable(rel),
				 PayReason(PAY_REASON_FROZEN_ANSWER)));
	if (!config->rules_1_3)
		return;
	if (from == PAY_SUCCESS &&
		!PayLedgerValueUnchanged(rel, old, new, col[LEDGER_CHANNEL_REF]))
		ereport(ERROR,
				(errmsg("the bank's reference of a successful payment never changes"),
				 errdetail("%s is SUCCESS: its channel_ref names the charge every retry is answered with.",
						   PayRowKeyDescription(rel, old->tuple)),
				 errtable(rel),
				 PayReason(PAY_REASON_FROZEN_ANSWER)));
	/* an illegal step was refused before */
	if (to == PAY_SUCCESS && from != PAY_SUCCESS &&
		PayLedgerValueIsNull(new, col[LEDGER_CHANNEL_REF]))
		ereport(ERROR,
				(errmsg("a payment enters SUCCESS only with the bank's reference"),
				 errdetail("%s has no channel_ref.", PayRowKeyDescription(rel, new->tuple)),
				 errtable(rel),
				 PayReason(PAY_REASON_SUCCESS_REFERENCE)));
}

/*
 * A new row of an archived payment -- its key, or the business action of
 * a bizNo of pay_bizno, a refund's being its payment's -- would charge it
 * again: refused (55000), whoever inserts it and in every session mode.
 * A restore brings no such row: pg_dump's snapshot holds a payment either
 * in the ledger or in the hashes, never in both.
 */
static void
RefuseArchived(GuardConfig *config, Relation rel, HeapTuple tuple)
{
	bool		isnull;
	Datum		bizno = heap_getattr(tuple, config->catalog->ledger_attnums[LEDGER_BIZNO],
									 RelationGetDescr(rel), &isnull);

	/* NOT NULL refuses a row without one */
	if (!isnull && PayArchiveHoldsNewRow(config->catalog, bizno))
		ereport(ERROR,
				(errmsg("payment %s was archived", TextDatumGetCString(bizno)),
				 errdetail("The archive holds this bizNo or its business action; a new row would charge it again."),
				 PayReason(PAY_REASON_ARCHIVED)));
}

/*
 * Whether tuple, being deleted from the ledger or the journal, is a row this
 * transaction moved into the archive (write_archive.c): the one way a
 * settled payment and its history leave.  A ledger row leaves only once
 * pay_archive_keys holds its payment's hash, as pay_archive writes it before
 * it deletes: rows copied by hand into a partition one then drops would
 * otherwise take a payment out of every record, and its retry would be
 * charged again.  A user's guarded table has no archive.
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
		return !isnull && PayArchiveWasMoved(PAY_MOVED_LEDGER_ROW, PayArchiveKeyHash(key)) &&
			PayArchiveHolds(catalog, key);
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
 * pay_guard() returns trigger, as the SQL of 1.0 to 1.2 binds it;
 * pay_guard_1_3 adds 1.3's rules for a success's bank reference.
 */
static Datum
Guard(FunctionCallInfo fcinfo, bool rules_1_3)
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
		fcinfo->flinfo->fn_extra = config = BuildGuardConfig(fcinfo, trigdata, rules_1_3);

	if (TRIGGER_FIRED_BY_TRUNCATE(event))
		RaiseGuardRefusal(rel, config->append_only ? PAY_REASON_APPEND_ONLY : PAY_REASON_PROTECTED_ROW,
						  "TRUNCATE is refused",
						  config->append_only ? "The table is append-only." :
						  "Payment rows are never removed wholesale.");

	if (config->append_only)
	{
		if (TRIGGER_FIRED_BY_INSERT(event))
		{
			/* a row replicated or restored was the extension's where it was made */
			if (config->written_by_extension && !PayTakeOwnRowPermit() &&
				!IsLogicalWorker() && !PayRestoring())
				RaiseGuardRefusal(rel, PAY_REASON_WRITTEN_BY_EXTENSION, "INSERT is refused",
								  "The table records what idempotent_pay did: its rows are written by the extension alone.");
			return PointerGetDatum(trigdata->tg_trigtuple);
		}
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
		if (config->ledger)
			RefuseArchived(config, rel, tuple);
		return PointerGetDatum(tuple);
	}

	if (TRIGGER_FIRED_BY_UPDATE(event))
	{
		HeapTuple	oldtuple = trigdata->tg_trigtuple;
		HeapTuple	newtuple = trigdata->tg_newtuple;
		PayStatus	from;
		PayStatus	to;

		if (config->ledger)
		{
			SizeLedgerRows(fcinfo, config, rel);
			PayDeformLedgerRowInto(rel, oldtuple, &config->old_row);
			PayDeformLedgerRowInto(rel, newtuple, &config->new_row);
			from = StatusOfValue(config, rel, oldtuple,
								 config->old_row.values[config->status_attnum - 1],
								 config->old_row.nulls[config->status_attnum - 1]);
			to = StatusOfValue(config, rel, newtuple,
							   config->new_row.values[config->status_attnum - 1],
							   config->new_row.nulls[config->status_attnum - 1]);
		}
		else
		{
			from = StatusOfRow(config, rel, oldtuple);
			to = StatusOfRow(config, rel, newtuple);
		}

		if (from != to && PayTransitionVerdict(from, to) != PAY_LEGAL)
			PayRaiseIllegalTransition(rel, PayRowKeyDescription(rel, oldtuple),
									  from, to);
		if (PayStatusIsFrozen(from))
			CheckFrozenColumns(config, rel, oldtuple, newtuple, from);
		if (config->ledger)
			CheckLedgerUpdate(config, rel, from, to);
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

Datum
pay_guard(PG_FUNCTION_ARGS)
{
	return Guard(fcinfo, false);
}

Datum
pay_guard_1_3(PG_FUNCTION_ARGS)
{
	return Guard(fcinfo, true);
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
