/*-------------------------------------------------------------------------
 *
 * trigger_bookkeeping.c
 *	  pay_ledger_bookkeeping(), the ledger's BEFORE trigger: the columns the
 *	  ledger derives, and the rules every write of a payment is held to.
 *
 * pay_ledger_bookkeeping() (BEFORE INSERT OR UPDATE) keeps the columns no
 * writer may choose: prefix and biz_id come from the bizNo (a refund has
 * none: its order is its parent's), attempt counts the entries into
 * PROCESSING, processing_since, created_at and updated_at are stamped.  A
 * refund is held to the rules of refunds (refund.c) when it is recorded,
 * when it enters PROCESSING and when its amount or currency changes.  note
 * is the note of this write: an UPDATE that does not set it leaves it NULL,
 * so a note is never carried over to a later change.  The rules that keep
 * a payment's identity, its count of attempts and a success's answer, and
 * the refusal of an archived payment's new row, are the guard's
 * (trigger_guard.c), which fires in every session mode.
 *
 * The SQL of 1.3 binds pay_ledger_bookkeeping_1_3, which also holds every
 * write to 1.3's rules for a payment's values (amount.c): a currency is an
 * active ISO 4217 code and the amount fits its minor units (22023), a
 * payment enters PROCESSING only with its amount and currency (23502), and
 * its texts are bounded (22001, 54000).  The SQL of 1.4 binds
 * pay_ledger_bookkeeping_1_4, which also holds an amount to
 * idempotent_pay.max_amount (22003).  Rows a write does not change are left
 * as they are.
 *
 * It does not fire under session_replication_role = replica, and leaves
 * alone a row a restore of pg_dump's output inserts (PayRestoring): a
 * replica or a restore receives the derived columns as they were.  What
 * must hold there too is the guard's.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/detoast.h"
#include "access/htup_details.h"
#include "commands/trigger.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/rel.h"
#include "utils/timestamp.h"

#include "amount.h"
#include "api.h"
#include "bizno.h"
#include "card.h"
#include "catalog.h"
#include "machine.h"
#include "reason.h"
#include "refund.h"
#include "settings.h"
#include "trigger_common.h"
#include "triggers.h"
#include "write.h"

PG_FUNCTION_INFO_V1(pay_ledger_bookkeeping);
PG_FUNCTION_INFO_V1(pay_ledger_bookkeeping_1_3);
PG_FUNCTION_INFO_V1(pay_ledger_bookkeeping_1_4);

/*
 * Refuse an UPDATE that removes the amount or the currency of a payment that
 * has one: what a payment was recorded for is never forgotten.
 */
static void
CheckNotCleared(Relation rel, const PayLedgerValues *old, const PayLedgerValues *new,
				AttrNumber attnum)
{
	const char *column = NameStr(TupleDescAttr(RelationGetDescr(rel), attnum - 1)->attname);

	if (PayLedgerValueIsNull(old, attnum) || !PayLedgerValueIsNull(new, attnum))
		return;
	ereport(ERROR,
			(errcode(ERRCODE_NOT_NULL_VIOLATION),
			 errmsg("the %s of a payment cannot be removed", column),
			 errdetail("%s already records its %s; an UPDATE may change it, not set it to NULL.",
					   PayRowKeyDescription(rel, old->tuple), column),
			 errhint("Give the %s the payment is for.", column),
			 errtablecol(rel, attnum)));
}

/*
 * Hold a text column the write sets to its bound: characters (22001), or
 * bytes for the response (54000).  Only a value longer in bytes than the
 * bound is detoasted and counted.
 */
static void
CheckColumnBound(Relation rel, const PayLedgerValues *row, AttrNumber attnum, int max_chars)
{
	bool		isnull;
	Datum		value;

	if (attnum == InvalidAttrNumber)
		return;
	value = PayLedgerValue(row, attnum, &isnull);
	if (isnull || toast_raw_datum_size(value) - VARHDRSZ <= (Size) max_chars)
		return;
	PayCheckTextLength(DatumGetTextPP(value),
					   NameStr(TupleDescAttr(RelationGetDescr(rel), attnum - 1)->attname),
					   max_chars);
}

/*
 * The rules of 1.3 for the values of the row a write leaves, checked for
 * what it changes (old NULL for an INSERT): currency and amount, the
 * amount and currency of a charge, the bank's reference's form, the bounds
 * of the texts; and since 1.4 the bound of the amount.
 */
static void
CheckPaymentValues(const PayCatalog *catalog, Relation rel, const PayLedgerValues *old,
				   const PayLedgerValues *row, int from, PayStatus status, PayApi api)
{
	const AttrNumber *col = catalog->ledger_attnums;
	bool		isnull;
	Datum		currency;

#define CHANGED(attnum) \
	((attnum) != InvalidAttrNumber && \
	 (old == NULL || !PayLedgerValueUnchanged(rel, old, row, (attnum))))

	if (api >= PAY_API_1_4 && CHANGED(col[LEDGER_AMOUNT]))
	{
		Datum		amount = PayLedgerValue(row, col[LEDGER_AMOUNT], &isnull);

		if (!isnull)
			PayCheckAmountBound(DatumGetNumeric(amount));
	}
	currency = PayLedgerValue(row, col[LEDGER_CURRENCY], &isnull);
	if (!isnull && (CHANGED(col[LEDGER_CURRENCY]) || CHANGED(col[LEDGER_AMOUNT])))
	{
		bool		amount_null;
		Datum		amount = PayLedgerValue(row, col[LEDGER_AMOUNT], &amount_null);

		PayCheckCurrencyKnown(DatumGetTextPP(currency));
		if (!amount_null)
			PayCheckAmountFits(DatumGetNumeric(amount), DatumGetTextPP(currency));
	}
	/* only for a legal step: an illegal one is the guard's to refuse */
	if (status == PAY_PROCESSING && PayTransitionVerdict(from, status) == PAY_LEGAL)
	{
		AttrNumber	missing = PayLedgerValueIsNull(row, col[LEDGER_AMOUNT]) ?
			col[LEDGER_AMOUNT] : col[LEDGER_CURRENCY];

		if (PayLedgerValueIsNull(row, missing))
			ereport(ERROR,
					(errcode(ERRCODE_NOT_NULL_VIOLATION),
					 errmsg("a payment is charged only with its amount and currency"),
					 errdetail("%s has no %s.", PayRowKeyDescription(rel, row->tuple),
							   NameStr(TupleDescAttr(RelationGetDescr(rel), missing - 1)->attname)),
					 errhint("Pass the amount and currency with the claim: pay_claim(bizno, amount, currency)."),
					 errtablecol(rel, missing)));
	}
	if (CHANGED(col[LEDGER_CHANNEL_REF]))
	{
		Datum		channel_ref = PayLedgerValue(row, col[LEDGER_CHANNEL_REF], &isnull);

		if (!isnull)
			PayCheckChannelRef(DatumGetTextPP(channel_ref));
	}
	if (CHANGED(col[LEDGER_LAST_ERROR]))
		CheckColumnBound(rel, row, col[LEDGER_LAST_ERROR], PAY_NOTE_MAX_CHARS);
	if (CHANGED(col[LEDGER_NOTE]))
		CheckColumnBound(rel, row, col[LEDGER_NOTE], PAY_NOTE_MAX_CHARS);
	if (CHANGED(col[LEDGER_RESPONSE]))
	{
		Datum		response = PayLedgerValue(row, col[LEDGER_RESPONSE], &isnull);

		if (!isnull)
			PayCheckResponseSize(response);
	}
#undef CHANGED
}

/*
 * What the derived columns decide beyond their values, which Derive writes
 * into the deformed row: whether the row is held to the rules of refunds.
 */
typedef struct DerivedColumns
{
	bool		check_refund;	/* hold the row to the rules of refunds */
	bool		check_card;		/* hold the row to the rules of the card flow */
	bool		inserting;
	bool		entering_processing;
} DerivedColumns;

static void
Derive(PayLedgerValues *row, AttrNumber column, Datum value, bool isnull)
{
	row->values[column - 1] = value;
	row->nulls[column - 1] = isnull;
}

/*
 * A new row: prefix and biz_id from a generated bizNo (a refund's are its
 * parent's, whose order it is), attempt, processing_since and created_at.
 * false when a restore inserts it: its history comes as it was.
 */
static bool
DeriveOnInsert(const PayCatalog *catalog, Relation rel, PayLedgerValues *row, Datum now,
			   PayApi api, DerivedColumns *derived)
{
	const AttrNumber *col = catalog->ledger_attnums;
	PayStatus	status = PayLedgerStatus(catalog, rel, row);
	text	   *bizno = DatumGetTextPP(PayRequiredValue(rel, row, col[LEDGER_BIZNO]));
	BiznoParts	parts;
	bool		generated = BiznoCheckKey(bizno, &parts);
	bool		is_refund;

	if (PayRestoring())
		return false;

	is_refund = col[LEDGER_PARENT] != InvalidAttrNumber &&
		!PayLedgerValueIsNull(row, col[LEDGER_PARENT]);
	generated = generated && !is_refund;
	derived->inserting = true;
	derived->entering_processing = status == PAY_PROCESSING;
	if (api >= PAY_API_1_4 && col[LEDGER_KIND] != InvalidAttrNumber)
	{
		/* a hold expires only once placed */
		derived->check_card = !PayLedgerValueIsNull(row, col[LEDGER_KIND]);
		Derive(row, col[LEDGER_EXPIRES_AT], (Datum) 0, true);
	}
	derived->check_refund = is_refund && !derived->check_card;

	if (api >= PAY_API_1_3)
		CheckPaymentValues(catalog, rel, NULL, row, PAY_NEW_ROW, status, api);
	Derive(row, col[LEDGER_PREFIX], generated ?
		   PointerGetDatum(cstring_to_text_with_len(parts.prefix, parts.prefix_len)) : 0,
		   !generated);
	Derive(row, col[LEDGER_BIZ_ID], generated ?
		   PointerGetDatum(cstring_to_text_with_len(parts.biz_id, parts.biz_id_len)) : 0,
		   !generated);
	Derive(row, col[LEDGER_ATTEMPT], Int32GetDatum(status == PAY_PROCESSING ? 1 : 0), false);
	Derive(row, col[LEDGER_PROCESSING_SINCE], now, status != PAY_PROCESSING);
	Derive(row, col[LEDGER_CREATED_AT], now, false);
	return true;
}

/*
 * The card flow's columns on an update: kind and expires_in never change,
 * and expires_at is the ledger's, fixed when an authorization enters
 * SUCCESS.  A payment or refund (no kind, no life: two flags tested) pays
 * for nothing more.  A step is checked when claimed, and when its amount
 * or currency changes.
 */
static void
DeriveCardOnUpdate(const PayCatalog *catalog, Relation rel, const PayLedgerValues *old,
				   PayLedgerValues *row, PayStatus from, PayStatus status, Datum now,
				   DerivedColumns *derived)
{
	const AttrNumber *col = catalog->ledger_attnums;
	bool		kind_null;
	bool		expires_null;
	Datum		kind = PayLedgerValue(old, col[LEDGER_KIND], &kind_null);
	Datum		expires_at = PayLedgerValue(old, col[LEDGER_EXPIRES_AT], &expires_null);
	const AttrNumber frozen[2] = {col[LEDGER_KIND], col[LEDGER_EXPIRES_IN]};

	for (int i = 0; i < 2; i++)
	{
		if ((PayLedgerValueIsNull(old, frozen[i]) && PayLedgerValueIsNull(row, frozen[i])) ||
			PayLedgerValueUnchanged(rel, old, row, frozen[i]))
			continue;
		ereport(ERROR,
				(errmsg("column %s of a ledger row cannot change",
						NameStr(TupleDescAttr(RelationGetDescr(rel), frozen[i] - 1)->attname)),
				 errdetail("%s is recorded as the step it is, for the life it was opened with.",
						   PayRowKeyDescription(rel, old->tuple)),
				 errtablecol(rel, frozen[i]),
				 PayReason(PAY_REASON_IMMUTABLE_COLUMN)));
	}
	if (!kind_null && status == PAY_SUCCESS && from != PAY_SUCCESS &&
		PayCardKindOf(kind, false) == PAY_CARD_AUTHORIZATION)
	{
		bool		life_null;
		Datum		life = PayLedgerValue(old, col[LEDGER_EXPIRES_IN], &life_null);

		expires_null = life_null;
		if (!life_null)
			expires_at = DirectFunctionCall2(timestamptz_pl_interval, now, life);
	}
	Derive(row, col[LEDGER_EXPIRES_AT], expires_at, expires_null);
	derived->check_card = !kind_null &&
		(derived->entering_processing ||
		 !PayLedgerValueUnchanged(rel, old, row, col[LEDGER_AMOUNT]) ||
		 !PayLedgerValueUnchanged(rel, old, row, col[LEDGER_CURRENCY]));
}

/*
 * An update: attempt and processing_since move on entering PROCESSING and
 * are kept otherwise (the guard then holds attempt to that count in every
 * mode); a note not set by this write is cleared.
 */
static void
DeriveOnUpdate(const PayCatalog *catalog, TriggerData *trigdata, const PayLedgerValues *old,
			   PayLedgerValues *row, Datum now, PayApi api, DerivedColumns *derived)
{
	const AttrNumber *col = catalog->ledger_attnums;
	Relation	rel = trigdata->tg_relation;
	bool		is_refund = false;
	bool		isnull;
	bool		since_null;
	Datum		attempt;
	Datum		since;
	PayStatus	from;
	PayStatus	status;

	if (col[LEDGER_PARENT] != InvalidAttrNumber)
		is_refund = !PayLedgerValueIsNull(row, col[LEDGER_PARENT]);

	CheckNotCleared(rel, old, row, col[LEDGER_AMOUNT]);
	CheckNotCleared(rel, old, row, col[LEDGER_CURRENCY]);
	(void) PayRequiredValue(rel, row, col[LEDGER_ATTEMPT]);

	from = PayLedgerStatus(catalog, rel, old);
	status = PayLedgerStatus(catalog, rel, row);
	if (api >= PAY_API_1_3)
		CheckPaymentValues(catalog, rel, old, row, from, status, api);

	derived->entering_processing = from != PAY_PROCESSING && status == PAY_PROCESSING;
	if (api >= PAY_API_1_4 && col[LEDGER_KIND] != InvalidAttrNumber)
		DeriveCardOnUpdate(catalog, rel, old, row, from, status, now, derived);
	derived->check_refund = is_refund && !derived->check_card &&
		(derived->entering_processing ||
		 !PayLedgerValueUnchanged(rel, old, row, col[LEDGER_AMOUNT]) ||
		 !PayLedgerValueUnchanged(rel, old, row, col[LEDGER_CURRENCY]));
	attempt = PayLedgerValue(old, col[LEDGER_ATTEMPT], &isnull);
	since = PayLedgerValue(old, col[LEDGER_PROCESSING_SINCE], &since_null);
	if (derived->entering_processing)
	{
		attempt = Int32GetDatum(DatumGetInt32(attempt) + 1);
		since = now;
		since_null = false;
	}
	Derive(row, col[LEDGER_ATTEMPT], attempt, false);
	Derive(row, col[LEDGER_PROCESSING_SINCE], since, since_null);

	/* a note belongs to the write that sets it */
	if (col[LEDGER_NOTE] != InvalidAttrNumber &&
		!bms_is_member(col[LEDGER_NOTE] - FirstLowInvalidHeapAttributeNumber,
					   trigdata->tg_updatedcols))
		Derive(row, col[LEDGER_NOTE], (Datum) 0, true);
}

/*
 * pay_ledger_bookkeeping() returns trigger, as the SQL of 1.0 to 1.2 binds
 * it; pay_ledger_bookkeeping_1_3 adds 1.3's rules for a payment's values,
 * pay_ledger_bookkeeping_1_4 the bound of an amount.
 */
static Datum
Bookkeeping(FunctionCallInfo fcinfo, PayApi api)
{
	const PayCatalog *catalog = PayCheckLedgerTrigger(fcinfo, "pay_ledger_bookkeeping()",
													  TRIGGER_EVENT_BEFORE,
													  PAY_ON_INSERT | PAY_ON_UPDATE);
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	Relation	rel = trigdata->tg_relation;
	Datum		now = TimestampTzGetDatum(GetCurrentTransactionStartTimestamp());
	DerivedColumns derived = {0};
	PayLedgerValues row;
	HeapTuple	tuple;

	if (TRIGGER_FIRED_BY_INSERT(trigdata->tg_event))
	{
		PayDeformLedgerRow(rel, trigdata->tg_trigtuple, &row);
		if (!DeriveOnInsert(catalog, rel, &row, now, api, &derived))
			return PointerGetDatum(trigdata->tg_trigtuple); /* its history, as it was */
	}
	else
	{
		PayLedgerValues old;

		PayDeformLedgerRow(rel, trigdata->tg_trigtuple, &old);
		PayDeformLedgerRow(rel, trigdata->tg_newtuple, &row);
		DeriveOnUpdate(catalog, trigdata, &old, &row, now, api, &derived);
	}
	Derive(&row, catalog->ledger_attnums[LEDGER_UPDATED_AT], now, false);

	/* the row with what was derived, as heap_modify_tuple forms it */
	tuple = heap_form_tuple(RelationGetDescr(rel), row.values, row.nulls);
	tuple->t_data->t_ctid = row.tuple->t_data->t_ctid;
	tuple->t_self = row.tuple->t_self;
	tuple->t_tableOid = row.tuple->t_tableOid;
	if (derived.check_card)
		PayCheckCardRow(catalog, rel, tuple, derived.inserting, derived.entering_processing);
	else if (derived.check_refund)
		PayCheckRefund(catalog, rel, tuple, derived.entering_processing);
	return PointerGetDatum(tuple);
}

Datum
pay_ledger_bookkeeping(PG_FUNCTION_ARGS)
{
	return Bookkeeping(fcinfo, PAY_API_1_2);
}

Datum
pay_ledger_bookkeeping_1_3(PG_FUNCTION_ARGS)
{
	return Bookkeeping(fcinfo, PAY_API_1_3);
}

Datum
pay_ledger_bookkeeping_1_4(PG_FUNCTION_ARGS)
{
	return Bookkeeping(fcinfo, PAY_API_1_4);
}

