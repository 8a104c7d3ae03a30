/*-------------------------------------------------------------------------
 *
 * journal.c
 *	  The ledger's own triggers: the columns it derives, and the journal.
 *
 * pay_ledger_bookkeeping() (BEFORE INSERT OR UPDATE) keeps the columns no
 * writer may choose: prefix and biz_id come from the bizNo (a refund has
 * none: its order is its parent's), attempt counts the entries into
 * PROCESSING, processing_since, created_at and updated_at are stamped, and
 * bizno, prefix, biz_id, created_at and a refund's parent and refund_key
 * never change (constraint name pay_immutable_column), nor does the
 * response of a SUCCESS (pay_frozen_answer).  A refund is held to the rules
 * of refunds (refund.c) when it is recorded, when it enters PROCESSING and
 * when its amount or currency changes.  note is the note of this write: an
 * UPDATE that does not set it leaves it NULL, so a note is never carried
 * over to a later change.
 *
 * The SQL of 1.3 binds pay_ledger_bookkeeping_1_3, which also holds every
 * write to 1.3's rules for a payment's values (amount.c): a currency is an
 * active ISO 4217 code and the amount fits its minor units (22023), a
 * payment enters PROCESSING only with its amount and currency (23502) and
 * SUCCESS only with the bank's reference (23514, pay_success_reference),
 * and its texts are bounded (22001, 54000).  Rows a write does not change
 * are left as they are.
 *
 * pay_ledger_journal() (AFTER INSERT OR UPDATE) appends one journal row per
 * transition and per amount change (an UPDATE that changes none of status,
 * amount and currency is skipped), whoever wrote the ledger row -- the API
 * or a raw statement -- so the latest journal entry of a bizNo always names
 * its status.  The note comes with the row written (the ledger's note
 * column, set by the API or by hand), else from idempotent_pay.journal_note.
 *
 * While the journal has exactly the columns the trigger fills, of exactly
 * the types it fills them with, and nothing else an INSERT would run
 * (catalog.c decides: no defaults to compute, no domain or typmod to check,
 * no INSERT trigger or rule, no generated column, no row security, no
 * partitioning, no CHECK constraint or index that could look a name up), a
 * row goes straight into its heap and indexes with its
 * NOT NULL and CHECK constraints checked, as logical replication's apply
 * does, without planning a statement per row.  Otherwise -- a DBA added a
 * column or a trigger -- it is inserted by an SQL statement, as the
 * journal's owner, so the executor does everything it does for any INSERT.
 *
 * When idempotent_pay.notify_channel is set, every transition is also
 * announced with NOTIFY, which PostgreSQL delivers at commit, so listeners
 * hear only of transitions that happened.
 *
 * Neither fires under session_replication_role = replica, and neither
 * touches a row a restore of pg_dump's output inserts (PayRestoring): a
 * replica or a restore receives the derived columns and the journal as
 * they were.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/detoast.h"
#include "access/htup_details.h"
#include "access/sysattr.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/transam.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "commands/async.h"
#include "commands/sequence.h"
#include "commands/trigger.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "nodes/bitmapset.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/rel.h"
#include "utils/timestamp.h"
#include "utils/xid8.h"

#include "amount.h"
#include "bizno.h"
#include "catalog.h"
#include "guard.h"
#include "idempotent_pay.h"
#include "journal.h"
#include "machine.h"
#include "refund.h"

/* The name of the role last journaled as actor. */
static Oid	actor_role = InvalidOid;
static char actor_name[NAMEDATALEN];

/* The INSERT of the journal when rows cannot go in directly. */
static SPIPlanPtr insert_plan = NULL;
static uint64 insert_plan_generation = 0;

PG_FUNCTION_INFO_V1(pay_ledger_bookkeeping);
PG_FUNCTION_INFO_V1(pay_ledger_bookkeeping_1_3);
PG_FUNCTION_INFO_V1(pay_ledger_journal);

/*
 * The trigger protocol of the ledger's own triggers: fired as declared in
 * the install script, and on pay_ledger.
 */
static const PayCatalog *
CheckLedgerTrigger(FunctionCallInfo fcinfo, const char *function, TriggerEvent timing)
{
	const PayCatalog *catalog;
	Relation	rel;

	PayCheckTriggerProtocol(fcinfo, function, timing,
							PAY_ON_INSERT | PAY_ON_UPDATE, false);
	rel = ((TriggerData *) fcinfo->context)->tg_relation;
	catalog = PayCatalogGetTables(fcinfo);
	if (RelationGetRelid(rel) != catalog->ledger)
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("%s fires only on pay_ledger, not on \"%s\"",
						function, RelationGetRelationName(rel))));
	return catalog;
}

static Datum
GetColumn(HeapTuple tuple, Relation rel, AttrNumber attnum, bool *isnull)
{
	return heap_getattr(tuple, attnum, RelationGetDescr(rel), isnull);
}

/*
 * The value of a column the ledger declares NOT NULL.  A BEFORE trigger runs
 * before the executor checks NOT NULL, so a NULL is refused here, as the
 * executor would refuse it.
 */
static Datum
RequiredColumn(HeapTuple tuple, Relation rel, AttrNumber attnum)
{
	bool		isnull;
	Datum		value = GetColumn(tuple, rel, attnum, &isnull);

	if (isnull)
		ereport(ERROR,
				(errcode(ERRCODE_NOT_NULL_VIOLATION),
				 errmsg("null value in column \"%s\" of relation \"%s\" violates not-null constraint",
						NameStr(TupleDescAttr(RelationGetDescr(rel), attnum - 1)->attname),
						RelationGetRelationName(rel)),
				 errtablecol(rel, attnum)));
	return value;
}

static PayStatus
LedgerStatus(const PayCatalog *catalog, Relation rel, HeapTuple tuple)
{
	Datum		label = RequiredColumn(tuple, rel, catalog->ledger_attnums[LEDGER_STATUS]);

	return PayStatusFromLabel(catalog, DatumGetObjectId(label));
}

/*
 * Refuse an UPDATE that removes the amount or the currency of a payment that
 * has one: what a payment was recorded for is never forgotten.
 */
static void
CheckNotCleared(Relation rel, HeapTuple oldtuple, HeapTuple newtuple,
				AttrNumber attnum)
{
	const char *column = NameStr(TupleDescAttr(RelationGetDescr(rel), attnum - 1)->attname);

	if (heap_attisnull(oldtuple, attnum, RelationGetDescr(rel)) ||
		!heap_attisnull(newtuple, attnum, RelationGetDescr(rel)))
		return;
	ereport(ERROR,
			(errcode(ERRCODE_NOT_NULL_VIOLATION),
			 errmsg("the %s of a payment cannot be removed", column),
			 errdetail("%s already records its %s; an UPDATE may change it, not set it to NULL.",
					   PayRowKeyDescription(rel, oldtuple), column),
			 errhint("Give the %s the payment is for.", column),
			 errtablecol(rel, attnum)));
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
			 errmsg("column \"%s\" of table \"pay_ledger\" never changes",
					NameStr(attr->attname)),
			 errdetail("%s: \"%s\" is fixed when the payment is recorded.",
					   PayRowKeyDescription(rel, oldtuple), NameStr(attr->attname)),
			 errhint("Record a new payment instead of changing this one's identity."),
			 errtable(rel),
			 err_generic_string(PG_DIAG_CONSTRAINT_NAME, "pay_immutable_column")));
}

/*
 * Hold a text column the write sets to its bound: characters (22001), or
 * bytes for the response (54000).  Only a value longer in bytes than the
 * bound is detoasted and counted.
 */
static void
CheckColumnBound(Relation rel, HeapTuple tuple, AttrNumber attnum, int max_chars)
{
	bool		isnull;
	Datum		value;

	if (attnum == InvalidAttrNumber)
		return;
	value = GetColumn(tuple, rel, attnum, &isnull);
	if (isnull || toast_raw_datum_size(value) - VARHDRSZ <= (Size) max_chars)
		return;
	PayCheckTextLength(DatumGetTextPP(value),
					   NameStr(TupleDescAttr(RelationGetDescr(rel), attnum - 1)->attname),
					   max_chars);
}

/*
 * The rules of 1.3 for the values of the row a write leaves, checked for
 * what it changes (oldtuple NULL for an INSERT): currency and amount, the
 * bank's reference of a success, the bounds of the texts.
 */
static void
CheckPaymentValues(const PayCatalog *catalog, Relation rel, HeapTuple oldtuple,
				   HeapTuple tuple, int from, PayStatus status)
{
	const AttrNumber *col = catalog->ledger_attnums;
	bool		isnull;
	Datum		currency;

#define CHANGED(attnum) \
	((attnum) != InvalidAttrNumber && \
	 (oldtuple == NULL || !PayColumnUnchanged(rel, oldtuple, tuple, (attnum))))

	currency = GetColumn(tuple, rel, col[LEDGER_CURRENCY], &isnull);
	if (!isnull && (CHANGED(col[LEDGER_CURRENCY]) || CHANGED(col[LEDGER_AMOUNT])))
	{
		bool		amount_null;
		Datum		amount = GetColumn(tuple, rel, col[LEDGER_AMOUNT], &amount_null);

		PayCheckCurrencyKnown(DatumGetTextPP(currency));
		if (!amount_null)
			PayCheckAmountFits(DatumGetNumeric(amount), DatumGetTextPP(currency));
	}
	/* only for a legal step: an illegal one is the guard's to refuse */
	if (status == PAY_PROCESSING && PayTransitionVerdict(from, status) == PAY_LEGAL)
	{
		AttrNumber	missing = heap_attisnull(tuple, col[LEDGER_AMOUNT], RelationGetDescr(rel)) ?
			col[LEDGER_AMOUNT] : col[LEDGER_CURRENCY];

		if (heap_attisnull(tuple, missing, RelationGetDescr(rel)))
			ereport(ERROR,
					(errcode(ERRCODE_NOT_NULL_VIOLATION),
					 errmsg("a payment is charged only with its amount and currency"),
					 errdetail("%s has no %s.", PayRowKeyDescription(rel, tuple),
							   NameStr(TupleDescAttr(RelationGetDescr(rel), missing - 1)->attname)),
					 errhint("Pass the amount and currency with the claim: pay_claim(bizno, amount, currency)."),
					 errtablecol(rel, missing)));
	}
	if (status == PAY_SUCCESS && PayTransitionVerdict(from, status) == PAY_LEGAL &&
		heap_attisnull(tuple, col[LEDGER_CHANNEL_REF], RelationGetDescr(rel)))
		ereport(ERROR,
				(errcode(ERRCODE_CHECK_VIOLATION),
				 errmsg("a payment enters SUCCESS only with the bank's reference"),
				 errdetail("%s has no channel_ref.", PayRowKeyDescription(rel, tuple)),
				 errhint("Settle it with pay_succeed(bizno, channel_ref, attempt), or set channel_ref in the same UPDATE."),
				 errtable(rel),
				 err_generic_string(PG_DIAG_CONSTRAINT_NAME, "pay_success_reference")));
	if (CHANGED(col[LEDGER_CHANNEL_REF]))
		CheckColumnBound(rel, tuple, col[LEDGER_CHANNEL_REF], PAY_CHANNEL_REF_MAX_CHARS);
	if (CHANGED(col[LEDGER_LAST_ERROR]))
		CheckColumnBound(rel, tuple, col[LEDGER_LAST_ERROR], PAY_NOTE_MAX_CHARS);
	if (CHANGED(col[LEDGER_NOTE]))
		CheckColumnBound(rel, tuple, col[LEDGER_NOTE], PAY_NOTE_MAX_CHARS);
	if (CHANGED(col[LEDGER_RESPONSE]))
	{
		Datum		response = GetColumn(tuple, rel, col[LEDGER_RESPONSE], &isnull);

		if (!isnull)
			PayCheckResponseSize(response);
	}
#undef CHANGED
}

/*
 * pay_ledger_bookkeeping() returns trigger, as the SQL of 1.0 to 1.2 binds
 * it; pay_ledger_bookkeeping_1_3 adds 1.3's rules for a payment's values.
 */
static Datum
Bookkeeping(FunctionCallInfo fcinfo, bool values_1_3)
{
	const PayCatalog *catalog = CheckLedgerTrigger(fcinfo, "pay_ledger_bookkeeping()",
												   TRIGGER_EVENT_BEFORE);
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	Relation	rel = trigdata->tg_relation;
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
	bool		is_refund = false;
	bool		check_refund;
	bool		entering_processing;

	if (TRIGGER_FIRED_BY_INSERT(trigdata->tg_event))
	{
		text	   *bizno;
		BiznoParts	parts;
		bool		generated;

		tuple = trigdata->tg_trigtuple;
		status = LedgerStatus(catalog, rel, tuple);
		bizno = DatumGetTextPP(RequiredColumn(tuple, rel, col[LEDGER_BIZNO]));
		generated = BiznoCheckKey(bizno, &parts);
		if (PayRestoring())
			return PointerGetDatum(tuple);	/* its history, as it was */

		/* a refund's (prefix, biz_id) are its parent's, whose order it is */
		is_refund = col[LEDGER_PARENT] != InvalidAttrNumber &&
			!heap_attisnull(tuple, col[LEDGER_PARENT], tupdesc);
		generated = generated && !is_refund;
		check_refund = is_refund;
		entering_processing = status == PAY_PROCESSING;

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
		if (values_1_3)
			CheckPaymentValues(catalog, rel, NULL, tuple, PAY_NEW_ROW, status);
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
		if (col[LEDGER_PARENT] != InvalidAttrNumber)
		{
			CheckUnchanged(rel, oldtuple, tuple, col[LEDGER_PARENT]);
			CheckUnchanged(rel, oldtuple, tuple, col[LEDGER_REFUND_KEY]);
			is_refund = !heap_attisnull(tuple, col[LEDGER_PARENT], tupdesc);
		}

		CheckNotCleared(rel, oldtuple, tuple, col[LEDGER_AMOUNT]);
		CheckNotCleared(rel, oldtuple, tuple, col[LEDGER_CURRENCY]);
		(void) RequiredColumn(tuple, rel, col[LEDGER_ATTEMPT]);

		from = LedgerStatus(catalog, rel, oldtuple);
		status = LedgerStatus(catalog, rel, tuple);
		if (values_1_3)
			CheckPaymentValues(catalog, rel, oldtuple, tuple, from, status);
		if (from == PAY_SUCCESS && col[LEDGER_RESPONSE] != InvalidAttrNumber &&
			!PayColumnUnchanged(rel, oldtuple, tuple, col[LEDGER_RESPONSE]))
			ereport(ERROR,
					(errcode(ERRCODE_CHECK_VIOLATION),
					 errmsg("the response of a successful payment never changes"),
					 errdetail("%s is SUCCESS: its first response is the one every retry replays.",
							   PayRowKeyDescription(rel, oldtuple)),
					 errhint("Answer retries with the stored response."),
					 errtable(rel),
					 err_generic_string(PG_DIAG_CONSTRAINT_NAME, "pay_frozen_answer")));
		columns[ncolumns] = col[LEDGER_ATTEMPT];
		values[ncolumns] = GetColumn(oldtuple, rel, col[LEDGER_ATTEMPT], &isnull);
		columns[ncolumns + 1] = col[LEDGER_PROCESSING_SINCE];
		values[ncolumns + 1] = GetColumn(oldtuple, rel, col[LEDGER_PROCESSING_SINCE],
										 &nulls[ncolumns + 1]);
		entering_processing = from != PAY_PROCESSING && status == PAY_PROCESSING;
		check_refund = is_refund &&
			(entering_processing ||
			 !PayColumnUnchanged(rel, oldtuple, tuple, col[LEDGER_AMOUNT]) ||
			 !PayColumnUnchanged(rel, oldtuple, tuple, col[LEDGER_CURRENCY]));
		if (entering_processing)
		{
			values[ncolumns] = Int32GetDatum(DatumGetInt32(values[ncolumns]) + 1);
			values[ncolumns + 1] = now;
			nulls[ncolumns + 1] = false;
		}
		ncolumns += 2;

		/* a note belongs to the write that sets it */
		if (col[LEDGER_NOTE] != InvalidAttrNumber &&
			!bms_is_member(col[LEDGER_NOTE] - FirstLowInvalidHeapAttributeNumber,
						   trigdata->tg_updatedcols))
		{
			columns[ncolumns] = col[LEDGER_NOTE];
			nulls[ncolumns] = true;
			values[ncolumns++] = (Datum) 0;
		}
	}

	columns[ncolumns] = col[LEDGER_UPDATED_AT];
	values[ncolumns++] = now;

	tuple = heap_modify_tuple_by_cols(tuple, tupdesc, ncolumns, columns, values, nulls);
	if (check_refund)
		PayCheckRefund(catalog, rel, tuple, entering_processing);
	return PointerGetDatum(tuple);
}

Datum
pay_ledger_bookkeeping(PG_FUNCTION_ARGS)
{
	return Bookkeeping(fcinfo, false);
}

Datum
pay_ledger_bookkeeping_1_3(PG_FUNCTION_ARGS)
{
	return Bookkeeping(fcinfo, true);
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
 * Append one row to the journal, already opened and locked: heap, then
 * every index.  values and nulls are indexed by JournalColumn.
 */
static void
InsertJournalRowDirectly(const PayCatalog *catalog, Relation journal,
						 const Datum *values, const bool *nulls)
{
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
}

/*
 * Append one row to the journal by an INSERT statement: defaults, triggers,
 * rules and everything else an INSERT does apply.  It runs as the journal's
 * owner (PayBecomeOwner: the session's role may not insert into it; the
 * actor column still names that role), so what a DBA's trigger or default
 * there resolves does not depend on the caller.
 */
static void
InsertJournalRowBySql(const PayCatalog *catalog, Relation journal,
					  const Datum *values, const bool *nulls)
{
	Oid			types[JOURNAL_COLUMNS] = {
		INT8OID, TEXTOID, INT4OID, catalog->status_type, catalog->status_type,
		NUMERICOID, TEXTOID, TIMESTAMPTZOID, XID8OID, TEXTOID, TEXTOID
	};
	char		spi_nulls[JOURNAL_COLUMNS];
	PayOwnerContext owner;
	int			ret;

	for (int i = 0; i < JOURNAL_COLUMNS; i++)
		spi_nulls[i] = nulls[i] ? 'n' : ' ';

	PayBecomeOwner(journal, &owner);
	SPI_connect();
	if (insert_plan == NULL || insert_plan_generation != catalog->generation)
	{
		SPIPlanPtr	plan;

		if (insert_plan != NULL)
		{
			SPI_freeplan(insert_plan);
			insert_plan = NULL;
		}
		plan = SPI_prepare(psprintf("INSERT INTO %s.pay_journal (seq, bizno, attempt, "
									"from_status, to_status, amount, currency, at, txid, "
									"actor, note) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, "
									"$9, $10, $11)", catalog->schema),
						   JOURNAL_COLUMNS, types);
		if (plan == NULL)
			elog(ERROR, "SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
		SPI_keepplan(plan);
		insert_plan = plan;
		insert_plan_generation = catalog->generation;
	}
	/* a rule of the DBA's may rewrite the INSERT: that is the DBA's will */
	ret = SPI_execute_plan(insert_plan, (Datum *) values, spi_nulls, false, 0);
	if (ret != SPI_OK_INSERT && ret != SPI_OK_REWRITTEN)
		elog(ERROR, "SPI_execute_plan failed: %s", SPI_result_code_string(ret));
	SPI_finish();
	PayRestoreUser(&owner);
}

/*
 * Whether an UPDATE of a ledger row changes what the journal records: its
 * status, amount or currency.
 */
static bool
JournaledChange(const PayCatalog *catalog, Relation rel, HeapTuple oldtuple, HeapTuple newtuple)
{
	const AttrNumber *col = catalog->ledger_attnums;

	return !PayColumnUnchanged(rel, oldtuple, newtuple, col[LEDGER_STATUS]) ||
		!PayColumnUnchanged(rel, oldtuple, newtuple, col[LEDGER_AMOUNT]) ||
		!PayColumnUnchanged(rel, oldtuple, newtuple, col[LEDGER_CURRENCY]);
}

/*
 * NOTIFY the transition as JSON, with the payment a refund pays back
 * (parent NULL for a payment).  Keys hold only [A-Za-z0-9_.:-], so they
 * need no escaping.
 */
static void
NotifyTransition(const char *bizno, int from, PayStatus to, int32 attempt,
				 const char *parent)
{
	char	   *from_json = from == PAY_NEW_ROW ? "null" :
		psprintf("\"%s\"", PayStatusName(from));

	Async_Notify(pay_notify_channel,
				 psprintf("{\"bizno\": \"%s\", \"from\": %s, \"to\": \"%s\", \"attempt\": %d%s%s%s}",
						  bizno, from_json, PayStatusName(to), attempt,
						  parent ? ", \"parent\": \"" : "", parent ? parent : "",
						  parent ? "\"" : ""));
}

/*
 * pay_ledger_journal() returns trigger
 */
Datum
pay_ledger_journal(PG_FUNCTION_ARGS)
{
	const PayCatalog *catalog = CheckLedgerTrigger(fcinfo, "pay_ledger_journal()",
												   TRIGGER_EVENT_AFTER);
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	Relation	rel = trigdata->tg_relation;
	bool		is_update = TRIGGER_FIRED_BY_UPDATE(trigdata->tg_event);
	HeapTuple	tuple = is_update ? trigdata->tg_newtuple : trigdata->tg_trigtuple;
	Relation	journal;
	const AttrNumber *col;
	Datum		values[JOURNAL_COLUMNS];
	bool		nulls[JOURNAL_COLUMNS];
	int			from = PAY_NEW_ROW;
	PayStatus	to;
	bool		isnull;

	if (!is_update && PayRestoring())
		return PointerGetDatum(NULL);	/* the journal arrives with the data */
	if (is_update && !JournaledChange(catalog, rel, trigdata->tg_trigtuple, tuple))
		return PointerGetDatum(NULL);

	/* lock the journal, then read its columns: an ALTER is seen */
	journal = table_open(catalog->journal, RowExclusiveLock);
	catalog = PayCatalogGetTables(fcinfo);
	col = catalog->ledger_attnums;

	to = LedgerStatus(catalog, rel, tuple);
	if (is_update)
		from = LedgerStatus(catalog, rel, trigdata->tg_trigtuple);

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

	/* the note of this write, else the session's, else what changed */
	nulls[JOURNAL_NOTE] = true;
	if (col[LEDGER_NOTE] != InvalidAttrNumber)
		values[JOURNAL_NOTE] = GetColumn(tuple, rel, col[LEDGER_NOTE], &nulls[JOURNAL_NOTE]);
	if (nulls[JOURNAL_NOTE] && pay_journal_note != NULL && pay_journal_note[0] != '\0')
	{
		values[JOURNAL_NOTE] = CStringGetTextDatum(pay_journal_note);
		nulls[JOURNAL_NOTE] = false;
	}
	if (nulls[JOURNAL_NOTE] && from == (int) to)
	{
		values[JOURNAL_NOTE] = CStringGetTextDatum("amount or currency changed");
		nulls[JOURNAL_NOTE] = false;
	}

	/* another module that checks the executor's permissions sees the INSERT */
	if (catalog->journal_direct && ExecutorCheckPerms_hook == NULL)
		InsertJournalRowDirectly(catalog, journal, values, nulls);
	else
		InsertJournalRowBySql(catalog, journal, values, nulls);
	table_close(journal, NoLock);

	if (from != (int) to && pay_notify_channel != NULL && pay_notify_channel[0] != '\0')
	{
		Datum		parent = (Datum) 0;

		isnull = true;
		if (col[LEDGER_PARENT] != InvalidAttrNumber)
			parent = GetColumn(tuple, rel, col[LEDGER_PARENT], &isnull);
		NotifyTransition(TextDatumGetCString(values[JOURNAL_BIZNO]), from, to,
						 DatumGetInt32(values[JOURNAL_ATTEMPT]),
						 isnull ? NULL : TextDatumGetCString(parent));
	}

	return PointerGetDatum(NULL);
}
