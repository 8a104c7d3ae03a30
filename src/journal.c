/*-------------------------------------------------------------------------
 *
 * journal.c
 *	  The ledger's own triggers: the columns it derives, and the journal.
 *
 * pay_ledger_bookkeeping() (BEFORE INSERT OR UPDATE) keeps the columns no
 * writer may choose: prefix and biz_id come from the bizNo, attempt counts
 * the entries into PROCESSING, processing_since, created_at and updated_at
 * are stamped, and bizno, prefix, biz_id and created_at never change.
 *
 * pay_ledger_journal() (AFTER INSERT, and AFTER UPDATE of status, amount
 * or currency) appends one journal row per transition and per amount
 * change, whoever wrote the ledger row -- the API or a raw statement -- so
 * the latest journal entry of a bizNo always names its status.  It inserts
 * into the heap and every index of pay_journal directly, as logical
 * replication's apply does, without planning a statement per row: the
 * journal is the extension's own table, with no INSERT triggers, and every
 * column is filled here.
 *
 * When idempotent_pay.notify_channel is set, every transition is also
 * announced with NOTIFY, which PostgreSQL delivers at commit, so listeners
 * hear only of transitions that happened.
 *
 * Neither fires under session_replication_role = replica: a replica or a
 * restore receives the derived columns and the journal as they were.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/transam.h"
#include "access/xact.h"
#include "commands/async.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "commands/sequence.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/timestamp.h"
#include "utils/xid8.h"

#include "bizno_format.h"
#include "catalog.h"
#include "guard.h"
#include "idempotent_pay.h"
#include "journal.h"
#include "machine.h"

/* Column numbers of pay_ledger, found by name once per statement. */
typedef struct LedgerColumns
{
	const PayCatalog *catalog;
	AttrNumber	bizno;
	AttrNumber	prefix;
	AttrNumber	biz_id;
	AttrNumber	status;
	AttrNumber	amount;
	AttrNumber	currency;
	AttrNumber	attempt;
	AttrNumber	created_at;
	AttrNumber	updated_at;
	AttrNumber	processing_since;
} LedgerColumns;

/* The note the API gives the journal rows of its next statement. */
static const char *journal_note = NULL;
static bool xact_callback_registered = false;

/* Where journal rows go: pay_journal's columns, found once per backend. */
typedef enum JournalColumn
{
	JOURNAL_SEQ,
	JOURNAL_BIZNO,
	JOURNAL_ATTEMPT,
	JOURNAL_FROM,
	JOURNAL_TO,
	JOURNAL_AMOUNT,
	JOURNAL_CURRENCY,
	JOURNAL_AT,
	JOURNAL_TXID,
	JOURNAL_ACTOR,
	JOURNAL_NOTE,
	JOURNAL_COLUMNS
} JournalColumn;

static const char *const journal_column_names[JOURNAL_COLUMNS] = {
	"seq", "bizno", "attempt", "from_status", "to_status", "amount", "currency",
	"at", "txid", "actor", "note"
};

typedef struct JournalTarget
{
	Oid			status_type;	/* the pay_status it was found for */
	Oid			relid;
	Oid			sequence;		/* pay_journal_seq_seq */
	AttrNumber	attnums[JOURNAL_COLUMNS];
} JournalTarget;

static JournalTarget journal_target = {InvalidOid};

/* The name of the role last journaled as actor. */
static Oid	actor_role = InvalidOid;
static char actor_name[NAMEDATALEN];

PG_FUNCTION_INFO_V1(pay_ledger_bookkeeping);
PG_FUNCTION_INFO_V1(pay_ledger_journal);

static void
ForgetNoteAtXactEnd(XactEvent event, void *arg)
{
	journal_note = NULL;
}

static void
ForgetNoteAtSubXactAbort(SubXactEvent event, SubTransactionId subxid,
						 SubTransactionId parent_subxid, void *arg)
{
	if (event == SUBXACT_EVENT_ABORT_SUB)
		journal_note = NULL;
}

/*
 * Give the journal rows of the next ledger write this note (NULL for none).
 * Forgotten when the transaction ends or a subtransaction aborts, so a
 * failed call leaves nothing for a later statement to pick up.
 */
void
PayJournalSetNote(const char *note)
{
	if (!xact_callback_registered)
	{
		RegisterXactCallback(ForgetNoteAtXactEnd, NULL);
		RegisterSubXactCallback(ForgetNoteAtSubXactAbort, NULL);
		xact_callback_registered = true;
	}
	journal_note = note;
}

static AttrNumber
LedgerColumn(TupleDesc tupdesc, const char *name)
{
	for (int i = 0; i < tupdesc->natts; i++)
	{
		Form_pg_attribute attr = TupleDescAttr(tupdesc, i);

		if (!attr->attisdropped && strcmp(NameStr(attr->attname), name) == 0)
			return attr->attnum;
	}
	elog(ERROR, "column %s of pay_ledger is missing", name);
	pg_unreachable();
}

static LedgerColumns *
GetLedgerColumns(FunctionCallInfo fcinfo, Relation rel)
{
	LedgerColumns *cols = fcinfo->flinfo->fn_extra;
	TupleDesc	tupdesc = RelationGetDescr(rel);

	if (cols != NULL)
		return cols;

	cols = MemoryContextAlloc(fcinfo->flinfo->fn_mcxt, sizeof(LedgerColumns));
	cols->catalog = PayCatalogGet(fcinfo);
	cols->bizno = LedgerColumn(tupdesc, "bizno");
	cols->prefix = LedgerColumn(tupdesc, "prefix");
	cols->biz_id = LedgerColumn(tupdesc, "biz_id");
	cols->status = LedgerColumn(tupdesc, "status");
	cols->amount = LedgerColumn(tupdesc, "amount");
	cols->currency = LedgerColumn(tupdesc, "currency");
	cols->attempt = LedgerColumn(tupdesc, "attempt");
	cols->created_at = LedgerColumn(tupdesc, "created_at");
	cols->updated_at = LedgerColumn(tupdesc, "updated_at");
	cols->processing_since = LedgerColumn(tupdesc, "processing_since");
	fcinfo->flinfo->fn_extra = cols;
	return cols;
}

static Datum
GetColumn(HeapTuple tuple, Relation rel, AttrNumber attnum, bool *isnull)
{
	return heap_getattr(tuple, attnum, RelationGetDescr(rel), isnull);
}

static PayStatus
LedgerStatus(LedgerColumns *cols, Relation rel, HeapTuple tuple)
{
	bool		isnull;
	Datum		label = GetColumn(tuple, rel, cols->status, &isnull);

	if (isnull)
		ereport(ERROR,
				(errcode(ERRCODE_NOT_NULL_VIOLATION),
				 errmsg("null value in column \"status\" of relation \"pay_ledger\" violates not-null constraint"),
				 errtable(rel)));
	return PayStatusFromLabel(cols->catalog, DatumGetObjectId(label));
}

/* Refuse a change of a column that never changes once written. */
static void
CheckUnchanged(Relation rel, HeapTuple oldtuple, HeapTuple newtuple,
			   AttrNumber attnum)
{
	Form_pg_attribute attr = TupleDescAttr(RelationGetDescr(rel), attnum - 1);

	if (PayColumnUnchanged(rel, oldtuple, newtuple, attnum))
		return;
	ereport(ERROR,
			(errcode(ERRCODE_CHECK_VIOLATION),
			 errmsg("column \"%s\" is frozen on table \"pay_ledger\"",
					NameStr(attr->attname)),
			 errdetail("%s: \"%s\" never changes once the payment is recorded.",
					   PayRowKeyDescription(rel, oldtuple), NameStr(attr->attname)),
			 errtable(rel),
			 err_generic_string(PG_DIAG_CONSTRAINT_NAME, "pay_frozen_column")));
}

/*
 * pay_ledger_bookkeeping() returns trigger
 */
Datum
pay_ledger_bookkeeping(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	Relation	rel = trigdata->tg_relation;
	LedgerColumns *cols = GetLedgerColumns(fcinfo, rel);
	TupleDesc	tupdesc = RelationGetDescr(rel);
	Datum		now = TimestampTzGetDatum(GetCurrentTransactionStartTimestamp());
	/* on INSERT: prefix, biz_id, attempt, processing_since, created_at, updated_at */
	int			columns[6];
	Datum		values[6];
	bool		nulls[6] = {false, false, false, false, false, false};
	int			ncolumns = 0;
	HeapTuple	tuple;
	PayStatus	status;

	if (TRIGGER_FIRED_BY_INSERT(trigdata->tg_event))
	{
		bool		isnull;
		text	   *bizno;
		BiznoParts	parts;
		bool		generated;

		tuple = trigdata->tg_trigtuple;
		status = LedgerStatus(cols, rel, tuple);
		bizno = DatumGetTextPP(GetColumn(tuple, rel, cols->bizno, &isnull));
		if (isnull)
			ereport(ERROR,
					(errcode(ERRCODE_NOT_NULL_VIOLATION),
					 errmsg("null value in column \"bizno\" of relation \"pay_ledger\" violates not-null constraint"),
					 errtable(rel)));
		generated = BiznoCheckKey(bizno, &parts);

		columns[ncolumns] = cols->prefix;
		nulls[ncolumns] = !generated;
		values[ncolumns++] = generated ?
			PointerGetDatum(cstring_to_text_with_len(parts.prefix, parts.prefix_len)) : 0;
		columns[ncolumns] = cols->biz_id;
		nulls[ncolumns] = !generated;
		values[ncolumns++] = generated ?
			PointerGetDatum(cstring_to_text_with_len(parts.biz_id, parts.biz_id_len)) : 0;
		columns[ncolumns] = cols->attempt;
		values[ncolumns++] = Int32GetDatum(status == PAY_PROCESSING ? 1 : 0);
		columns[ncolumns] = cols->processing_since;
		nulls[ncolumns] = status != PAY_PROCESSING;
		values[ncolumns++] = now;
		columns[ncolumns] = cols->created_at;
		values[ncolumns++] = now;
	}
	else
	{
		HeapTuple	oldtuple = trigdata->tg_trigtuple;
		bool		isnull;
		PayStatus	from;

		tuple = trigdata->tg_newtuple;
		CheckUnchanged(rel, oldtuple, tuple, cols->bizno);
		CheckUnchanged(rel, oldtuple, tuple, cols->prefix);
		CheckUnchanged(rel, oldtuple, tuple, cols->biz_id);
		CheckUnchanged(rel, oldtuple, tuple, cols->created_at);

		from = LedgerStatus(cols, rel, oldtuple);
		status = LedgerStatus(cols, rel, tuple);
		columns[ncolumns] = cols->attempt;
		values[ncolumns] = GetColumn(oldtuple, rel, cols->attempt, &isnull);
		columns[ncolumns + 1] = cols->processing_since;
		values[ncolumns + 1] = GetColumn(oldtuple, rel, cols->processing_since,
										 &nulls[ncolumns + 1]);
		if (from != PAY_PROCESSING && status == PAY_PROCESSING)
		{
			values[ncolumns] = Int32GetDatum(DatumGetInt32(values[ncolumns]) + 1);
			values[ncolumns + 1] = now;
			nulls[ncolumns + 1] = false;
		}
		ncolumns += 2;
	}

	columns[ncolumns] = cols->updated_at;
	values[ncolumns++] = now;

	return PointerGetDatum(heap_modify_tuple_by_cols(tuple, tupdesc, ncolumns,
													 columns, values, nulls));
}

static const char *
ActorName(void)
{
	Oid			role = GetOuterUserId();

	if (role != actor_role)
	{
		strlcpy(actor_name, GetUserNameFromId(role, false), NAMEDATALEN);
		actor_role = role;
	}
	return actor_name;
}

static const JournalTarget *
GetJournalTarget(const PayCatalog *catalog)
{
	if (journal_target.status_type == catalog->status_type)
		return &journal_target;

	journal_target.relid = get_relname_relid("pay_journal", catalog->namespace);
	journal_target.sequence = get_relname_relid("pay_journal_seq_seq", catalog->namespace);
	if (!OidIsValid(journal_target.relid) || !OidIsValid(journal_target.sequence))
		elog(ERROR, "pay_journal of idempotent_pay is missing");
	for (int i = 0; i < JOURNAL_COLUMNS; i++)
	{
		journal_target.attnums[i] = get_attnum(journal_target.relid, journal_column_names[i]);
		if (journal_target.attnums[i] == InvalidAttrNumber)
			elog(ERROR, "column %s of pay_journal is missing", journal_column_names[i]);
	}
	journal_target.status_type = catalog->status_type;
	return &journal_target;
}

/*
 * Append one row to pay_journal: heap, then every index.  values and nulls
 * are indexed by JournalColumn.
 */
static void
InsertJournalRow(const PayCatalog *catalog, const Datum *values, const bool *nulls)
{
	const JournalTarget *target = GetJournalTarget(catalog);
	Relation	journal = table_open(target->relid, RowExclusiveLock);
	TupleDesc	tupdesc = RelationGetDescr(journal);
	EState	   *estate = CreateExecutorState();
	ResultRelInfo *result_rel = makeNode(ResultRelInfo);
	TupleTableSlot *slot = ExecInitExtraTupleSlot(estate, tupdesc, &TTSOpsVirtual);

	InitResultRelInfo(result_rel, journal, 0, NULL, 0);
	ExecOpenIndices(result_rel, false);

	ExecClearTuple(slot);
	memset(slot->tts_isnull, true, sizeof(bool) * tupdesc->natts);
	for (int i = 0; i < JOURNAL_COLUMNS; i++)
	{
		slot->tts_values[target->attnums[i] - 1] = values[i];
		slot->tts_isnull[target->attnums[i] - 1] = nulls[i];
	}
	ExecStoreVirtualTuple(slot);

	if (tupdesc->constr)
		ExecConstraints(result_rel, slot, estate);
	table_tuple_insert(journal, slot, GetCurrentCommandId(true), 0, NULL);
	ExecInsertIndexTuples(result_rel, slot, estate, false, false, NULL, NIL);

	ExecCloseIndices(result_rel);
	ExecResetTupleTable(estate->es_tupleTable, false);
	FreeExecutorState(estate);
	table_close(journal, NoLock);
}

/*
 * NOTIFY the transition as JSON.  Keys hold only [A-Za-z0-9_.:-], so they
 * need no escaping.
 */
static void
NotifyTransition(const char *bizno, int from, PayStatus to, int32 attempt)
{
	char	   *from_json = from == PAY_NEW_ROW ? "null" :
		psprintf("\"%s\"", PayStatusName(from));

	Async_Notify(pay_notify_channel,
				 psprintf("{\"bizno\": \"%s\", \"from\": %s, \"to\": \"%s\", \"attempt\": %d}",
						  bizno, from_json, PayStatusName(to), attempt));
}

/*
 * pay_ledger_journal() returns trigger
 */
Datum
pay_ledger_journal(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	Relation	rel = trigdata->tg_relation;
	LedgerColumns *cols = GetLedgerColumns(fcinfo, rel);
	bool		is_update = TRIGGER_FIRED_BY_UPDATE(trigdata->tg_event);
	HeapTuple	tuple = is_update ? trigdata->tg_newtuple : trigdata->tg_trigtuple;
	Datum		values[JOURNAL_COLUMNS];
	bool		nulls[JOURNAL_COLUMNS];
	int			from = PAY_NEW_ROW;
	PayStatus	to = LedgerStatus(cols, rel, tuple);
	const char *note = journal_note;
	bool		isnull;

	if (is_update)
		from = LedgerStatus(cols, rel, trigdata->tg_trigtuple);
	if (note == NULL && pay_journal_note != NULL && pay_journal_note[0] != '\0')
		note = pay_journal_note;
	if (note == NULL && from == (int) to)
		note = "amount or currency changed";

	memset(nulls, false, sizeof(nulls));
	values[JOURNAL_SEQ] = Int64GetDatum(nextval_internal(GetJournalTarget(cols->catalog)->sequence,
														 false));
	values[JOURNAL_BIZNO] = GetColumn(tuple, rel, cols->bizno, &isnull);
	values[JOURNAL_ATTEMPT] = GetColumn(tuple, rel, cols->attempt, &isnull);
	nulls[JOURNAL_FROM] = from == PAY_NEW_ROW;
	values[JOURNAL_FROM] = nulls[JOURNAL_FROM] ? (Datum) 0 : PayStatusGetDatum(cols->catalog, from);
	values[JOURNAL_TO] = PayStatusGetDatum(cols->catalog, to);
	values[JOURNAL_AMOUNT] = GetColumn(tuple, rel, cols->amount, &nulls[JOURNAL_AMOUNT]);
	values[JOURNAL_CURRENCY] = GetColumn(tuple, rel, cols->currency, &nulls[JOURNAL_CURRENCY]);
	values[JOURNAL_AT] = TimestampTzGetDatum(GetCurrentTransactionStartTimestamp());
	values[JOURNAL_TXID] = FullTransactionIdGetDatum(GetTopFullTransactionId());
	values[JOURNAL_ACTOR] = CStringGetTextDatum(ActorName());
	nulls[JOURNAL_NOTE] = note == NULL;
	values[JOURNAL_NOTE] = note ? CStringGetTextDatum(note) : (Datum) 0;

	InsertJournalRow(cols->catalog, values, nulls);

	if (from != (int) to && pay_notify_channel != NULL && pay_notify_channel[0] != '\0')
		NotifyTransition(TextDatumGetCString(values[JOURNAL_BIZNO]), from, to,
						 DatumGetInt32(values[JOURNAL_ATTEMPT]));

	return PointerGetDatum(NULL);
}
