/*-------------------------------------------------------------------------
 *
 * api_refund.c
 *	  pay_refund_open: opening a refund of a payment.
 *
 * A refund is a ledger row of its own, driven by the same API as a payment
 * once opened; the ledger's bookkeeping trigger holds it to the rules of
 * refunds (refund.c) on every write.  Its bizNo is issued for the
 * business action of its payment, so that it reads as that order's and a
 * router sends it where the payment is (bizno_format.c says how for a
 * payment keyed by another system).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/builtins.h"

#include "amount.h"
#include "api.h"
#include "api_args.h"
#include "bizno.h"
#include "catalog.h"
#include "compat.h"
#include "reason.h"
#include "write.h"

PG_FUNCTION_INFO_V1(pay_refund_open);
PG_FUNCTION_INFO_V1(pay_refund_open_1_3);

/*
 * The bizNo of a new refund (or step of the card flow) of parent: issued for the parent's business
 * action (prefix, biz_id), so that it reads as that order's and a router
 * hashing (prefix, biz_id) sends it where the parent is; for a parent keyed
 * by another system, under prefix REFUND with as much of the parent's key
 * as a biz_id holds.
 */
Datum
PayIssueChildBizno(Datum parent, bool order_null, Datum prefix, Datum biz_id)
{
	char		buf[BIZNO_MAX_LEN + 1];
	BiznoParts	action;

	if (order_null)
	{
		text	   *parent_key = DatumGetTextPP(parent);

		bizno_action_of_foreign_key(VARDATA_ANY(parent_key), VARSIZE_ANY_EXHDR(parent_key),
									&action);
	}
	else
	{
		action.prefix = VARDATA_ANY(DatumGetTextPP(prefix));
		action.prefix_len = VARSIZE_ANY_EXHDR(DatumGetTextPP(prefix));
		action.biz_id = VARDATA_ANY(DatumGetTextPP(biz_id));
		action.biz_id_len = VARSIZE_ANY_EXHDR(DatumGetTextPP(biz_id));
	}
	return PointerGetDatum(cstring_to_text_with_len(buf,
													BiznoGenerate(buf, action.prefix,
																  action.prefix_len,
																  action.biz_id,
																  action.biz_id_len)));
}

/*
 * pay_refund_open(bizno text, refund_key text, amount numeric, reason text)
 * returns text: the bizNo of refund refund_key of payment bizno -- the
 * recorded one, or a new one recorded as INIT in the payment's currency.
 * The refund is then claimed, settled and reconciled as any payment; the
 * ledger's trigger holds it to the rules of refunds (refund.c) on every
 * write, this one included.
 */
static Datum
OpenRefund(FunctionCallInfo fcinfo, PayApi api)
{
	const PayCatalog *catalog = PayCatalogGetTables(fcinfo);
	Datum		parent = PayKeyArgument(fcinfo, 0);
	BiznoParts	parts;
	PaymentAmount amount = {0};
	Datum		refund_key;
	const char *reason;
	const char *note;
	PayInsertConflict conflict = PAY_INSERT_IF_ABSENT;

	PayRequireArgument(fcinfo, 1, "refund_key");
	BiznoCheckKey(PG_GETARG_TEXT_PP(1), &parts);
	refund_key = PointerGetDatum(PG_GETARG_TEXT_PP(1));
	PayRequireArgument(fcinfo, 2, "amount");
	PayCheckAmount(PG_GETARG_NUMERIC(2));
	amount.has_amount = true;
	amount.amount = PG_GETARG_DATUM(2);
	reason = PayBoundedTextArgument(fcinfo, 3, "reason", PAY_NOTE_MAX_CHARS, api);
	note = psprintf("refund %s of payment %s%s%s", TextDatumGetCString(refund_key),
					TextDatumGetCString(parent), reason ? ": " : "", reason ? reason : "");

	SPI_connect();
	if (!PayLedgerHasRefunds(catalog))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("pay_ledger has no columns parent and refund_key"),
				 errhint("ALTER EXTENSION idempotent_pay UPDATE adds them.")));
	for (;;)
	{
		LedgerRow	refund;
		PayRefundRow row = {
			.amount = amount.amount,
			.parent = parent,
			.refund_key = refund_key,
			.note = note,
		};
		Datum		bizno;
		bool		order_null;
		Datum		prefix;
		Datum		biz_id;

		CHECK_FOR_INTERRUPTS();
		if (PayLedgerFindRefund(catalog, parent, refund_key, &refund))
		{
			bizno = SPI_datumTransfer(refund.bizno, false, -1);
			if (PayLedgerHasCardFlow(catalog))
				PayRefuseStepKeyTaken(fcinfo, catalog, parent, refund_key, PAY_CARD_NONE);
			if (PayAmountDiffers(&refund, &amount))
				ereport(ERROR,
						(errmsg("refund %s of payment %s was opened for another amount",
								TextDatumGetCString(refund_key), TextDatumGetCString(parent)),
						 errdetail("Recorded: %s; requested: %s.",
								   PayAmountText(refund.amount_null, refund.amount,
											  refund.currency_null, refund.currency),
								   PayAmountText(false, amount.amount, refund.currency_null,
											  refund.currency)),
						 PayReason(PAY_REASON_REFUND_AMOUNT_FROZEN)));
			SPI_finish();
			PG_RETURN_DATUM(bizno);
		}

		if (!PayLedgerReadParent(catalog, parent, &row.currency, &row.currency_null,
								 &prefix, &biz_id, &order_null))
			PayRaiseUnknownPayment(catalog, parent);
		row.bizno = bizno = PayIssueChildBizno(parent, order_null, prefix, biz_id);
		if (PayLedgerInsertRefund(catalog, &row, conflict))
		{
			bizno = SPI_datumTransfer(bizno, false, -1);
			SPI_finish();
			PG_RETURN_DATUM(bizno);
		}
		if (conflict == PAY_INSERT_STRICT)
			PayRequireRowWritten(false, bizno); /* a trigger skipped it, twice */

		/*
		 * A unique key refused the new row: the refund was opened meanwhile,
		 * which the next pass finds, or a unique index of the DBA's refuses
		 * it, which the next pass lets PostgreSQL name.
		 */
		conflict = PAY_INSERT_STRICT;
	}
}

Datum
pay_refund_open(PG_FUNCTION_ARGS)
{
	return OpenRefund(fcinfo, PAY_API_1_2);
}

Datum
pay_refund_open_1_3(PG_FUNCTION_ARGS)
{
	return OpenRefund(fcinfo, PAY_API_1_3);
}
