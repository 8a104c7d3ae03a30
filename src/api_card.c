/*-------------------------------------------------------------------------
 *
 * api_card.c
 *	  The card flow's openers: pay_open_authorization, pay_capture_open,
 *	  pay_void_open and pay_increment_open.
 *
 * Each records a ledger row of its own, or finds it again: an
 * authorization by its business action, as pay_open finds a payment; a
 * step by its authorization and key, as pay_refund_open finds a refund.
 * What is recorded under a key keeps its kind (pay_step_key_taken: the
 * authorization's refunds and steps share its keys), its amount
 * (pay_amount_frozen) and currency.  The rows are then claimed and settled
 * as any payment; the ledger's bookkeeping holds every write, these
 * included, to the rules of the card flow (card.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/numeric.h"
#include "utils/timestamp.h"

#include "amount.h"
#include "api.h"
#include "api_args.h"
#include "bizno.h"
#include "card.h"
#include "catalog.h"
#include "prefixes.h"
#include "reason.h"
#include "write.h"

PG_FUNCTION_INFO_V1(pay_open_authorization);
PG_FUNCTION_INFO_V1(pay_capture_open);
PG_FUNCTION_INFO_V1(pay_void_open);
PG_FUNCTION_INFO_V1(pay_increment_open);

static void
RequireCardFlow(const PayCatalog *catalog)
{
	if (!PayLedgerHasCardFlow(catalog))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("pay_ledger has no columns kind, expires_in and expires_at"),
				 errhint("ALTER EXTENSION idempotent_pay UPDATE adds them.")));
}

/* How a row of the card flow is named in messages. */
static const char *
KindName(PayCardKind kind)
{
	switch (kind)
	{
		case PAY_CARD_NONE:
			return "a refund";
		case PAY_CARD_AUTHORIZATION:
			return "an authorization";
		case PAY_CARD_CAPTURE:
			return "a capture";
		case PAY_CARD_FINAL_CAPTURE:
			return "a final capture";
		case PAY_CARD_VOID:
			return "a void";
		case PAY_CARD_INCREMENT:
			return "an increment";
		default:
			return "a row of another kind";
	}
}

/*
 * Refuse key of parent when the row recorded under it is not of kind
 * (PAY_CARD_NONE: a refund).
 */
void
PayRefuseStepKeyTaken(FunctionCallInfo fcinfo, const PayCatalog *catalog, Datum parent, Datum key,
					  PayCardKind kind)
{
	PayCardRow	row;
	PayCardKind recorded;

	if (!PayLedgerFindCardStep(fcinfo, catalog, parent, key, &row))
		return;
	recorded = PayCardKindOf(row.kind, row.kind_null);
	if (recorded == kind)
		return;
	ereport(ERROR,
			(errmsg("key %s of %s names %s", PayQuoteTextDatum(key), PayQuoteTextDatum(parent),
					KindName(recorded)),
			 errdetail("Recorded: %s, %s; asked for %s.", PayQuoteTextDatum(row.bizno),
					   KindName(recorded), KindName(kind)),
			 PayReason(PAY_REASON_STEP_KEY_TAKEN)));
}

/* A positive interval: the life of a hold. */
static Datum
ExpiresInArgument(FunctionCallInfo fcinfo, int argno)
{
	Interval	zero = {0};

	PayRequireArgument(fcinfo, argno, "expires_in");
	if (DatumGetInt32(DirectFunctionCall2(interval_cmp, PG_GETARG_DATUM(argno),
										  IntervalPGetDatum(&zero))) <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("expires_in must be positive"),
				 errhint("Pass how long the hold lasts once placed, such as '7 days'.")));
	return PG_GETARG_DATUM(argno);
}

/*
 * pay_open_authorization(prefix, biz_id, amount, currency, expires_in)
 * returns text: the bizNo of the authorization of business action
 * (prefix, biz_id), recorded as INIT.
 */
Datum
pay_open_authorization(PG_FUNCTION_ARGS)
{
	const PayCatalog *catalog = PayCatalogGetTables(fcinfo);
	text	   *prefix;
	text	   *biz_id;
	PaymentAmount amount;
	Datum		expires_in;
	PayInsertConflict conflict = PAY_INSERT_IF_ABSENT;

	PayRequireArgument(fcinfo, 0, "prefix");
	PayRequireArgument(fcinfo, 1, "biz_id");
	PayRequireArgument(fcinfo, 2, "amount");
	PayRequireArgument(fcinfo, 3, "currency");
	prefix = PG_GETARG_TEXT_PP(0);
	biz_id = PG_GETARG_TEXT_PP(1);
	BiznoCheckParts(prefix, biz_id);
	amount = PayAmountArguments(fcinfo, 2, 3, PAY_API_1_4);
	expires_in = ExpiresInArgument(fcinfo, 4);

	SPI_connect();
	RequireCardFlow(catalog);
	for (;;)
	{
		PayCardRow	row;
		LedgerRow	archived;
		char		buf[BIZNO_MAX_LEN + 1];
		PayCardInsert insert = {0};
		Datum		bizno;

		CHECK_FOR_INTERRUPTS();
		if (PayLedgerFindCardOrder(catalog, PointerGetDatum(prefix), PointerGetDatum(biz_id), &row))
		{
			bizno = SPI_datumTransfer(row.bizno, false, -1);
			if (PayCardKindOf(row.kind, row.kind_null) != PAY_CARD_AUTHORIZATION)
				ereport(ERROR,
						(errmsg("business action %s %s is a payment, not an authorization",
								PayQuoteText(prefix), PayQuoteText(biz_id)),
						 errdetail("Recorded: %s.", PayQuoteTextDatum(bizno)),
						 PayReason(PAY_REASON_STEP_KEY_TAKEN)));
			if (row.amount_null ||
				DatumGetInt32(DirectFunctionCall2(numeric_cmp, row.amount, amount.amount)) != 0)
				ereport(ERROR,
						(errmsg("authorization %s was opened for another amount", PayQuoteTextDatum(bizno)),
						 errdetail("Recorded: %s; requested: %s.",
								   PayAmountText(row.amount_null, row.amount, row.currency_null, row.currency),
								   PayAmountText(false, amount.amount, false, amount.currency)),
						 PayReason(PAY_REASON_STEP_AMOUNT_FROZEN)));
			if (row.currency_null || !PayTextEqual(row.currency, amount.currency))
				ereport(ERROR,
						(errmsg("authorization %s was opened in another currency", PayQuoteTextDatum(bizno)),
						 errdetail("Recorded: %s; requested: %s.",
								   row.currency_null ? "none" : TextDatumGetCString(row.currency),
								   TextDatumGetCString(amount.currency)),
						 PayReason(PAY_REASON_CURRENCY_FROZEN)));
			if (row.expires_in_null ||
				DatumGetInt32(DirectFunctionCall2(interval_cmp, row.expires_in, expires_in)) != 0)
				ereport(ERROR,
						(errmsg("authorization %s was opened with another expires_in", PayQuoteTextDatum(bizno)),
						 errdetail("Recorded: %s; requested: %s.",
								   row.expires_in_null ? "none" :
								   DatumGetCString(DirectFunctionCall1(interval_out, row.expires_in)),
								   DatumGetCString(DirectFunctionCall1(interval_out, expires_in))),
						 PayReason(PAY_REASON_PARAMETER_CHANGED)));
			SPI_finish();
			PG_RETURN_DATUM(bizno);
		}
		switch (PayArchiveFindOrder(catalog, PointerGetDatum(prefix), PointerGetDatum(biz_id), &archived))
		{
			case PAY_NOT_ARCHIVED:
				break;
			case PAY_ARCHIVED_KEPT:
				bizno = SPI_datumTransfer(archived.bizno, false, -1);
				SPI_finish();
				PG_RETURN_DATUM(bizno);
			case PAY_ARCHIVED_DROPPED:
				ereport(ERROR,
						(errmsg("business action %s %s was archived",
								PayQuoteText(prefix), PayQuoteText(biz_id)),
						 errdetail("Its archive was dropped; only the fact that it was archived is kept."),
						 PayReason(PAY_REASON_ARCHIVED)));
		}
		BiznoCheckBizIdIsNoBizno(biz_id);
		PayPrefixNoteIssued(catalog, VARDATA_ANY(prefix), VARSIZE_ANY_EXHDR(prefix));
		bizno = PointerGetDatum(cstring_to_text_with_len(buf,
														 BiznoGenerate(buf, VARDATA_ANY(prefix),
																	   VARSIZE_ANY_EXHDR(prefix),
																	   VARDATA_ANY(biz_id),
																	   VARSIZE_ANY_EXHDR(biz_id))));
		insert.bizno = bizno;
		insert.amount = amount.amount;
		insert.currency = amount.currency;
		insert.kind = "AUTHORIZATION";
		insert.expires_in = expires_in;
		insert.parent_null = true;
		insert.note = "authorization";
		if (PayLedgerInsertCard(fcinfo, catalog, &insert, conflict))
		{
			PayArchiveForgetChecked();
			bizno = SPI_datumTransfer(bizno, false, -1);
			SPI_finish();
			PG_RETURN_DATUM(bizno);
		}
		PayArchiveForgetChecked();
		if (conflict == PAY_INSERT_STRICT)
			PayRequireRowWritten(false, bizno); /* a trigger skipped it, twice */
		/* recorded meanwhile: the next pass finds it */
		conflict = PAY_INSERT_STRICT;
	}
}

/*
 * The bizNo of step key of authorization parent (argument 0): the recorded
 * one, or a new one recorded as INIT in the authorization's currency.  A
 * void has no amount argument (has_amount false): it is recorded for the
 * authorization's amount, the hold it releases.
 */
static Datum
OpenStep(FunctionCallInfo fcinfo, PayCardKind kind, const char *key_name, bool has_amount)
{
	const PayCatalog *catalog = PayCatalogGetTables(fcinfo);
	Datum		parent = PayKeyArgument(fcinfo, 0);
	const char *label = PayCardKindLabel(kind);
	BiznoParts	parts;
	Datum		key;
	Datum		amount = (Datum) 0;
	PayInsertConflict conflict = PAY_INSERT_IF_ABSENT;
	const char *note;

	PayRequireArgument(fcinfo, 1, key_name);
	BiznoCheckKey(PG_GETARG_TEXT_PP(1), &parts);
	key = PointerGetDatum(PG_GETARG_TEXT_PP(1));
	if (has_amount)
	{
		PayRequireArgument(fcinfo, 2, "amount");
		PayCheckAmount(PG_GETARG_NUMERIC(2));
		PayCheckAmountBound(PG_GETARG_NUMERIC(2));
		amount = PG_GETARG_DATUM(2);
	}
	note = psprintf("%s %s of authorization %s", PayCardStepName(kind),
					TextDatumGetCString(key), TextDatumGetCString(parent));

	SPI_connect();
	RequireCardFlow(catalog);
	for (;;)
	{
		PayCardRow	row;
		PayCardRow	authorization;
		PayCardInsert insert = {0};
		Datum		bizno;

		CHECK_FOR_INTERRUPTS();
		if (PayLedgerFindCardStep(fcinfo, catalog, parent, key, &row))
		{
			bizno = SPI_datumTransfer(row.bizno, false, -1);
			PayRefuseStepKeyTaken(fcinfo, catalog, parent, key, kind);
			if (has_amount &&
				(row.amount_null ||
				 DatumGetInt32(DirectFunctionCall2(numeric_cmp, row.amount, amount)) != 0))
				ereport(ERROR,
						(errmsg("%s %s of authorization %s was opened for another amount",
								PayCardStepName(kind),
								PayQuoteTextDatum(key), PayQuoteTextDatum(parent)),
						 errdetail("Recorded: %s; requested: %s.",
								   PayAmountText(row.amount_null, row.amount, row.currency_null, row.currency),
								   PayAmountText(false, amount, row.currency_null, row.currency)),
						 PayReason(PAY_REASON_STEP_AMOUNT_FROZEN)));
			SPI_finish();
			PG_RETURN_DATUM(bizno);
		}

		if (!PayLedgerReadCardRow(fcinfo, catalog, parent, &authorization))
			PayRaiseUnknownPayment(catalog, parent);
		bizno = PayIssueChildBizno(parent, authorization.order_null, authorization.prefix,
								   authorization.biz_id);
		insert.bizno = bizno;
		insert.amount = has_amount ? amount : authorization.amount;
		insert.currency = authorization.currency;
		insert.kind = label;
		insert.expires_in_null = true;
		insert.parent = parent;
		insert.key = key;
		insert.note = note;
		/* the bookkeeping refuses a step of what is no held authorization */
		insert.currency_null = authorization.currency_null;
		insert.amount_null = !has_amount && authorization.amount_null;
		if (PayLedgerInsertCard(fcinfo, catalog, &insert, conflict))
		{
			bizno = SPI_datumTransfer(bizno, false, -1);
			SPI_finish();
			PG_RETURN_DATUM(bizno);
		}
		if (conflict == PAY_INSERT_STRICT)
			PayRequireRowWritten(false, bizno); /* a trigger skipped it, twice */
		/* opened meanwhile: the next pass finds it */
		conflict = PAY_INSERT_STRICT;
	}
}

/* pay_capture_open(auth_bizno, capture_key, amount, final) returns text */
Datum
pay_capture_open(PG_FUNCTION_ARGS)
{
	PayRequireArgument(fcinfo, 3, "final");
	return OpenStep(fcinfo, PG_GETARG_BOOL(3) ? PAY_CARD_FINAL_CAPTURE : PAY_CARD_CAPTURE,
					"capture_key", true);
}

/* pay_void_open(auth_bizno, void_key) returns text */
Datum
pay_void_open(PG_FUNCTION_ARGS)
{
	return OpenStep(fcinfo, PAY_CARD_VOID, "void_key", false);
}

/* pay_increment_open(auth_bizno, increment_key, amount) returns text */
Datum
pay_increment_open(PG_FUNCTION_ARGS)
{
	return OpenStep(fcinfo, PAY_CARD_INCREMENT, "increment_key", true);
}
