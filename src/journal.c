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
#include "utils/rel.h"
#include "utils/timestamp.h"
#include "utils/xid8.h"

#include "bizno_format.h"
#include "catalog.h"
#include "guard.h"
#include "idempotent_pay.h"
#include "journal.h"
#include "machine.h"

/* The note the API gives the journal rows of its next statement. */
static const char *journal_note = NULL;
static bool xact_callback_registered = false;

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

static Datum
GetColumn(HeapTuple tuple, Relation rel, AttrNumber attnum, bool *isnull)
{
	return heap_getattr(tuple, attnum, RelationGetDescr(rel), isnull);
}

static PayStatus
LedgerStatus(const PayCatalog *catalog, Relation rel, HeapTuple tuple)
{
	bool		isnull;
	Datum		label = GetColumn(tuple, rel, catalog->ledger_attnums[LEDGER_STATUS], &isnull);

	if (isnull)
		ereport(ERROR,
				(errcode(ERRCODE_NOT_NULL_VIOLATION),
				 errmsg("null value in column \"status\" of relation \"pay_ledger\" violates not-null constraint"),
				 errtable(rel)));
	return PayStatusFromLabel(catalog, DatumGetObjectId(label));
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
	const PayCatalog *catalog = PayCatalogGet(fcinfo);
	const AttrNumber *col = catalog->ledger_attnums;
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
		status = LedgerStatus(catalog, rel, tuple);
		bizno = DatumGetTextPP(GetColumn(tuple, rel, col[LEDGER_BIZNO], &isnull));
		if (isnull)
			ereport(ERROR,
					(errcode(ERRCODE_NOT_NULL_VIOLATION),
					 errmsg("null value in column \"bizno\" of relation \"pay_ledger\" violates not-null constraint"),
					 errtable(rel)));
		generated = BiznoCheckKey(bizno, &parts);

		columns[ncolumns] = col[LEDGER_PREFIX];
		nulls[ncolumns] = !generated;
		values[ncolumns++] = generated ?
			PointerGetDatum(cstring_to_text_with_len(parts.prefix, parts.prefix_len)) : 0;
		columns[ncolumns] = col[LEDGER_BIZ_ID];
		nulls[ncolumns] = !generated;
		values[ncolumns++] = generated ?
			PointerGetDatum(cstring_to_text_with_len(parts.biz_id, parts.biz_id_len)) : 0;
		columns[ncolumns] = col[LEDGER_ATTEMPT];
		values[ncolumns++] = Int32GetDatum(status == PAY_PROCESSING ? 1 : 0);
		columns[ncolumns] = col[LEDGER_PROCESSING_SINCE];
		nulls[ncolumns] = status != PAY_PROCESSING;
		values[ncolumns++] = now;
		columns[ncolumns] = col[LEDGER_CREATED_AT];
		values[ncolumns++] = now;
	}
	else
	{
		HeapTuple	oldtuple = trigdata->tg_trigtuple;
		bool		isnull;
		PayStatus	from;

		tuple = trigdata->tg_newtuple;
		CheckUnchanged(rel, oldtuple, tuple, col[LEDGER_BIZNO]);
		CheckUnchanged(rel, oldtuple, tuple, col[LEDGER_PREFIX]);
		CheckUnchanged(rel, oldtuple, tuple, col[LEDGER_BIZ_ID]);
		CheckUnchanged(rel, oldtuple, tuple, col[LEDGER_CREATED_AT]);

		from = LedgerStatus(catalog, rel, oldtuple);
		status = LedgerStatus(catalog, rel, tuple);
		columns[ncolumns] = col[LEDGER_ATTEMPT];
		values[ncolumns] = GetColumn(oldtuple, rel, col[LEDGER_ATTEMPT], &isnull);
		columns[ncolumns + 1] = col[LEDGER_PROCESSING_SINCE];
		values[ncolumns + 1] = GetColumn(oldtuple, rel, col[LEDGER_PROCESSING_SINCE],
										 &nulls[ncolumns + 1]);
		if (from != PAY_PROCESSING && status == PAY_PROCESSING)
		{
			values[ncolumns] = Int32GetDatum(DatumGetInt32(values[ncolumns]) + 1);
			values[ncolumns + 1] = now;
			nulls[ncolumns + 1] = false;
		}
		ncolumns += 2;
	}

	columns[ncolumns] = col[LEDGER_UPDATED_AT];
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

/*
 * Append one row to pay_journal: heap, then every index.  values and nulls
 * are indexed by JournalColumn.
 */
static void
InsertJournalRow(const PayCatalog *catalog, const Datum *values, const bool *nulls)
{
	Relation	journal = table_open(catalog->journal, RowExclusiveLock);
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
		slot->tts_values[catalog->journal_attnums[i] - 1] = values[i];
		slot->tts_isnull[catalog->journal_attnums[i] - 1] = nulls[i];
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
	const PayCatalog *catalog = PayCatalogGet(fcinfo);
	const AttrNumber *col = catalog->ledger_attnums;
	bool		is_update = TRIGGER_FIRED_BY_UPDATE(trigdata->tg_event);
	HeapTuple	tuple = is_update ? trigdata->tg_newtuple : trigdata->tg_trigtuple;
	Datum		values[JOURNAL_COLUMNS];
	bool		nulls[JOURNAL_COLUMNS];
	int			from = PAY_NEW_ROW;
	PayStatus	to = LedgerStatus(catalog, rel, tuple);
	const char *note = journal_note;
	bool		isnull;

	if (is_update)
		from = LedgerStatus(catalog, rel, trigdata->tg_trigtuple);
	if (note == NULL && pay_journal_note != NULL && pay_journal_note[0] != '\0')
		note = pay_journal_note;
	if (note == NULL && from == (int) to)
		note = "amount or currency changed";

	memset(nulls, false, sizeof(nulls));
	values[JOURNAL_SEQ] = Int64GetDatum(nextval_internal(catalog->journal_sequence,
														 false));
	values[JOURNAL_BIZNO] = GetColumn(tuple, rel, col[LEDGER_BIZNO], &isnull);
	values[JOURNAL_ATTEMPT] = GetColumn(tuple, rel, col[LEDGER_ATTEMPT], &isnull);
	nulls[JOURNAL_FROM] = from == PAY_NEW_ROW;
	values[JOURNAL_FROM] = nulls[JOURNAL_FROM] ? (Datum) 0 : PayStatusGetDatum(catalog, from);
	values[JOURNAL_TO] = PayStatusGetDatum(catalog, to);
	values[JOURNAL_AMOUNT] = GetColumn(tuple, rel, col[LEDGER_AMOUNT], &nulls[JOURNAL_AMOUNT]);
	values[JOURNAL_CURRENCY] = GetColumn(tuple, rel, col[LEDGER_CURRENCY], &nulls[JOURNAL_CURRENCY]);
	values[JOURNAL_AT] = TimestampTzGetDatum(GetCurrentTransactionStartTimestamp());
	values[JOURNAL_TXID] = FullTransactionIdGetDatum(GetTopFullTransactionId());
	values[JOURNAL_ACTOR] = CStringGetTextDatum(ActorName());
	nulls[JOURNAL_NOTE] = note == NULL;
	values[JOURNAL_NOTE] = note ? CStringGetTextDatum(note) : (Datum) 0;

	InsertJournalRow(catalog, values, nulls);

	if (from != (int) to && pay_notify_channel != NULL && pay_notify_channel[0] != '\0')
		NotifyTransition(TextDatumGetCString(values[JOURNAL_BIZNO]), from, to,
						 DatumGetInt32(values[JOURNAL_ATTEMPT]));

	return PointerGetDatum(NULL);
}
