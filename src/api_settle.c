/*-------------------------------------------------------------------------
 *
 * api_settle.c
 *	  Settling payments and moving them by hand: pay_succeed, pay_fail,
 *	  pay_confirm_second_charge, pay_reset and pay_transition, and one input
 *	  of pay_settle_many.
 *
 * A settlement moves a payment from the one state the machine settles
 * from (PaySettleSource) to SUCCESS or FAILED, for the attempt given --
 * the fencing token that keeps a late answer for an earlier attempt from
 * settling a later one.  Settling a payment that is settled already is
 * answered by the machine's verdict on the row as it is: a no-op for the
 * same outcome, a refusal otherwise; a success reported again under another
 * bank reference is a second charge, journaled, and since 1.3 the result
 * SECOND_CHARGE.  pay_reset and pay_transition ask PayTransitionVerdict.
 *
 * 1.3 requires the attempt, and a success's bank reference; texts are
 * bounded.  1.4 takes the attempt as a bigint, so that a caller's smallint,
 * integer or bigint all resolve to the one function (overloads would make
 * a NULL or a quoted literal ambiguous), and refuses one beyond an
 * integer's range (22003) rather than let it wrap.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

#include "amount.h"
#include "api.h"
#include "api_args.h"
#include "api_batch.h"
#include "catalog.h"
#include "machine.h"
#include "reason.h"
#include "trigger_common.h"
#include "write.h"

PG_FUNCTION_INFO_V1(pay_succeed);
PG_FUNCTION_INFO_V1(pay_fail);
PG_FUNCTION_INFO_V1(pay_reset);
PG_FUNCTION_INFO_V1(pay_transition);
PG_FUNCTION_INFO_V1(pay_succeed_1_3);
PG_FUNCTION_INFO_V1(pay_fail_1_3);
PG_FUNCTION_INFO_V1(pay_reset_1_3);
PG_FUNCTION_INFO_V1(pay_transition_1_3);
PG_FUNCTION_INFO_V1(pay_succeed_1_4);
PG_FUNCTION_INFO_V1(pay_fail_1_4);
PG_FUNCTION_INFO_V1(pay_confirm_second_charge);

/*
 * How the journal records a second charge: as 1.2 did (counted as captured
 * at once, in a note alone), reported by a settlement since 1.3 (counted
 * once a bank statement confirms it), or confirmed by a statement
 * (pay_reconcile).  Since 1.3 the kind is the row's second_charge column,
 * which pay_refund_balance, pay_verify and pay_stats read, and the note
 * only tells a person: a note is text a session can set.
 */
typedef enum SecondCharge
{
	SECOND_CHARGE_1_2,
	SECOND_CHARGE_REPORTED,
	SECOND_CHARGE_CONFIRMED
} SecondCharge;

static const char *const second_charge_kinds[] = {
	[SECOND_CHARGE_1_2] = NULL,
	[SECOND_CHARGE_REPORTED] = "reported",
	[SECOND_CHARGE_CONFIRMED] = "confirmed",
};

static const char *const second_charge_notes[] = {
	[SECOND_CHARGE_1_2] = "second charge: the bank reported %s for a payment settled as %s",
	[SECOND_CHARGE_REPORTED] = "second charge reported: %s, for a payment settled as %s",
	[SECOND_CHARGE_CONFIRMED] = "second charge confirmed by a statement: %s, for a payment settled as %s",
};

/*
 * A success reported again under another bank reference: the bank charged
 * twice.  The payment keeps its first reference and answer; the journal
 * records the second reference, once per reference, and the caller gets a
 * WARNING (pay_second_charge) saying to refund it -- and since 1.3 the
 * result SECOND_CHARGE, which no driver drops.  Not an ERROR: PostgreSQL has
 * no autonomous transactions, and an error would roll back the journal row
 * that is the evidence.
 */
static void
JournalSecondCharge(FunctionCallInfo fcinfo, const PayCatalog *catalog, Datum bizno,
					const LedgerRow *row, Datum channel_ref, SecondCharge kind)
{
	char	   *second = PayQuoteTextDatum(channel_ref);
	char	   *first = PayQuoteTextDatum(row->channel_ref);
	LedgerRow	locked;

	/*
	 * The payment's row is locked first: pay_archive, which moves a payment
	 * with every journal row of it, either took it before (and it is gone:
	 * refused) or waits for this report and sees it.
	 */
	if (!PayLedgerLock(fcinfo, catalog, bizno, &locked))
		PayRaiseUnknownPayment(catalog, bizno);
	PayJournalSecondCharge(catalog, bizno, second_charge_kinds[kind], channel_ref,
						   psprintf(second_charge_notes[kind], second, first));
	if (kind == SECOND_CHARGE_CONFIRMED)
		return;
	ereport(WARNING,
			(errmsg("payment %s succeeded already under %s; the bank reports another charge, %s",
					TextDatumGetCString(bizno), first, second),
			 errdetail("The payment keeps its first reference and answer; the second charge is journaled."),
			 PayReasonWith(PAY_REASON_SECOND_CHARGE, second)));
}

/*
 * Refuse (55000) a settlement for an attempt that is not the current one,
 * saying which it is: a late answer for an earlier attempt, or an attempt
 * never claimed.
 */
static void
RaiseOtherAttempt(Datum bizno, const LedgerRow *row, int32 attempt)
{
	bool		earlier = attempt < row->attempt;

	ereport(ERROR,
			(earlier ?
			 errmsg("attempt %d of payment %s is not the current one",
					attempt, TextDatumGetCString(bizno)) :
			 errmsg("attempt %d of payment %s was never claimed",
					attempt, TextDatumGetCString(bizno)),
			 errdetail("The current attempt is %d, %s.", row->attempt,
					   PayStatusName(row->status)),
			 PayReason(earlier ? PAY_REASON_STALE_ATTEMPT : PAY_REASON_UNCLAIMED_ATTEMPT)));
}

/*
 * pay_succeed's result since 1.3 (pay_settlement): SUCCESS, or
 * SECOND_CHARGE when the bank reported another charge of a payment that
 * had succeeded already.  Its labels are looked up once per call site.
 */
static Datum
SettlementResult(FunctionCallInfo fcinfo, bool second_charge)
{
	Oid		   *labels = fcinfo->flinfo->fn_extra;

	if (labels == NULL)
	{
		Oid			type = get_func_rettype(fcinfo->flinfo->fn_oid);

		labels = MemoryContextAlloc(fcinfo->flinfo->fn_mcxt, 2 * sizeof(Oid));
		labels[0] = DatumGetObjectId(DirectFunctionCall2(enum_in, CStringGetDatum("SUCCESS"),
														 ObjectIdGetDatum(type)));
		labels[1] = DatumGetObjectId(DirectFunctionCall2(enum_in, CStringGetDatum("SECOND_CHARGE"),
														 ObjectIdGetDatum(type)));
		fcinfo->flinfo->fn_extra = labels;
	}
	return ObjectIdGetDatum(labels[second_charge ? 1 : 0]);
}

/*
 * The attempt argument: an integer before 1.4, a bigint since, held to an
 * integer's range (attempt counts entries into PROCESSING, an integer).
 */
static int32
AttemptArgument(FunctionCallInfo fcinfo, int argno, PayApi api)
{
	int64		attempt;

	if (api < PAY_API_1_4)
		return PG_GETARG_INT32(argno);
	attempt = PG_GETARG_INT64(argno);
	if (attempt < PG_INT32_MIN || attempt > PG_INT32_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("attempt " INT64_FORMAT " is out of range", attempt),
				 errdetail("An attempt is an integer: the count pay_claim returned, at most %d.",
						   PG_INT32_MAX),
				 errhint("Pass the attempt pay_claim returned.")));
	return (int32) attempt;
}

/*
 * The settlement pay_succeed or pay_fail was called for, its arguments
 * held to the rules of api.
 */
static PaySettleWrite
SettleArguments(FunctionCallInfo fcinfo, PayStatus target, PayApi api)
{
	PaySettleWrite settle = {
		.bizno = PayKeyArgument(fcinfo, 0),
		.target = target,
		.from = PaySettleSource(target),
		.channel_ref_null = true,
		.last_error_null = true,
		.attempt_null = PG_ARGISNULL(2),
		.attempt = PG_ARGISNULL(2) ? 0 : AttemptArgument(fcinfo, 2, api),
		.response_null = true,
	};

	if (api >= PAY_API_1_3)
	{
		if (target == PAY_SUCCESS && PG_ARGISNULL(1))
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("channel_ref must not be null"),
					 errhint("Pass the bank's reference of the charge: a success is known by it, and a second charge is told from it.")));
		if (PG_ARGISNULL(2))
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("attempt must not be null"),
					 errhint("Pass the attempt pay_claim returned: it keeps a late answer for an earlier attempt from settling a later one.")));
		if (target == PAY_SUCCESS)
			PayCheckChannelRef(PG_GETARG_TEXT_PP(1));
		else if (!PG_ARGISNULL(1))
			PayCheckTextLength(PG_GETARG_TEXT_PP(1), "reason", PAY_NOTE_MAX_CHARS);
		if (target == PAY_SUCCESS && !PG_ARGISNULL(3))
			PayCheckResponseSize(PG_GETARG_DATUM(3));
	}

	/* channel_ref of a success, last_error (and note) of a failure */
	if (!PG_ARGISNULL(1) && target == PAY_SUCCESS)
	{
		settle.channel_ref = PG_GETARG_DATUM(1);
		settle.channel_ref_null = false;
	}
	else if (!PG_ARGISNULL(1))
	{
		settle.last_error = PG_GETARG_DATUM(1);
		settle.last_error_null = false;
	}
	/* the answer to replay: pay_succeed's fourth argument, since 1.2 */
	if (target == PAY_SUCCESS && PG_NARGS() > 3 && !PG_ARGISNULL(3))
	{
		settle.response = PG_GETARG_DATUM(3);
		settle.response_null = false;
	}

	return settle;
}

/*
 * Hold pay_succeed's or pay_fail's arguments to their rules, as the call
 * does before it reads anything: what it refuses whatever the ledger holds.
 */
void
PaySettleCheckArguments(FunctionCallInfo fcinfo, PayStatus target, PayApi api)
{
	(void) SettleArguments(fcinfo, target, api);
}

/*
 * pay_succeed and pay_fail: PROCESSING -> target, a no-op on target.
 * attempt, when given, must be the current attempt (a fencing token);
 * since 1.3 it must be given, and a success must bring the bank's
 * reference.  The arguments are fcinfo's, pay_succeed's or pay_fail's;
 * returns whether the bank reported a second charge.  pay_settle_many
 * calls it for each of its inputs (api_batch.c).  Call it inside SPI.
 */
bool
PaySettleRow(FunctionCallInfo fcinfo, const PayCatalog *catalog, PayStatus target,
			 PayApi api)
{
	PaySettleWrite settle = SettleArguments(fcinfo, target, api);
	Datum		bizno = settle.bizno;
	LedgerRow	row;
	int32		settled_attempt = -1;	/* the attempt last found PROCESSING */
	bool		second_charge = false;

	for (;;)
	{
		PayVerdict	verdict;

		CHECK_FOR_INTERRUPTS();
		if (PayLedgerSettle(fcinfo, catalog, &settle))
			break;

		if (!PayLedgerProbe(fcinfo, bizno, &row))
			PayRaiseUnknownPayment(catalog, bizno);
		if (!settle.attempt_null && row.attempt != settle.attempt)
			RaiseOtherAttempt(bizno, &row, settle.attempt);
		verdict = PayTransitionVerdict(row.status, target);
		if (verdict == PAY_NO_OP && target == PAY_SUCCESS && !PG_ARGISNULL(1) &&
			!row.channel_ref_null && !PayTextEqual(row.channel_ref, PG_GETARG_DATUM(1)))
		{
			JournalSecondCharge(fcinfo, catalog, bizno, &row, PG_GETARG_DATUM(1),
								api >= PAY_API_1_3 ? SECOND_CHARGE_REPORTED : SECOND_CHARGE_1_2);
			second_charge = true;
		}
		if (verdict == PAY_NO_OP)
			break;				/* a duplicate callback */
		if (verdict == PAY_ILLEGAL)
			PayRaiseIllegalTransition(NULL, PayKeyDescription(bizno), row.status, target);
		/* it left and re-entered PROCESSING meanwhile: settle that attempt */
		if (row.attempt == settled_attempt)
			PayRequireRowWritten(false, bizno); /* no: the UPDATE was suppressed */
		settled_attempt = row.attempt;
	}
	return second_charge;
}

static Datum
Settle(FunctionCallInfo fcinfo, PayStatus target, PayApi api)
{
	const PayCatalog *catalog = PayCatalogGetTables(fcinfo);
	bool		second_charge;

	SPI_connect();
	second_charge = PaySettleRow(fcinfo, catalog, target, api);
	SPI_finish();

	if (api >= PAY_API_1_3 && target == PAY_SUCCESS)
		PG_RETURN_DATUM(SettlementResult(fcinfo, second_charge));
	PG_RETURN_DATUM(PayStatusGetDatum(catalog, target));
}

/*
 * pay_succeed(bizno text, channel_ref text, attempt int [, response jsonb])
 * returns pay_status; the response argument exists since 1.2.  Since 1.3:
 * channel_ref and attempt required, returns pay_settlement.
 */
Datum
pay_succeed(PG_FUNCTION_ARGS)
{
	return Settle(fcinfo, PAY_SUCCESS, PAY_API_1_2);
}

Datum
pay_succeed_1_3(PG_FUNCTION_ARGS)
{
	return Settle(fcinfo, PAY_SUCCESS, PAY_API_1_3);
}

Datum
pay_succeed_1_4(PG_FUNCTION_ARGS)
{
	return Settle(fcinfo, PAY_SUCCESS, PAY_API_1_4);
}

/*
 * pay_fail(bizno text, reason text, attempt int) returns pay_status;
 * since 1.3 attempt is required.
 */
Datum
pay_fail(PG_FUNCTION_ARGS)
{
	return Settle(fcinfo, PAY_FAILED, PAY_API_1_2);
}

Datum
pay_fail_1_3(PG_FUNCTION_ARGS)
{
	return Settle(fcinfo, PAY_FAILED, PAY_API_1_3);
}

Datum
pay_fail_1_4(PG_FUNCTION_ARGS)
{
	return Settle(fcinfo, PAY_FAILED, PAY_API_1_4);
}

/*
 * pay_confirm_second_charge(bizno text, channel_ref text) returns void
 *
 * A bank statement shows a second charge of SUCCESS payment bizno under
 * channel_ref (pay_reconcile calls it): journaled once as confirmed, from
 * then on counted as captured, so that it can be refunded.  The reference
 * of the payment's own success is no second charge: nothing to do.
 */
Datum
pay_confirm_second_charge(PG_FUNCTION_ARGS)
{
	const PayCatalog *catalog = PayCatalogGetTables(fcinfo);
	Datum		bizno = PayKeyArgument(fcinfo, 0);
	LedgerRow	row;

	PayRequireArgument(fcinfo, 1, "channel_ref");
	PayCheckChannelRef(PG_GETARG_TEXT_PP(1));
	SPI_connect();
	if (!PayLedgerLock(fcinfo, catalog, bizno, &row))
		PayRaiseUnknownPayment(catalog, bizno);
	if (row.status != PAY_SUCCESS || row.channel_ref_null)
		ereport(ERROR,
				(errmsg("payment %s is %s%s: a second charge is one of a settled payment",
						TextDatumGetCString(bizno), PayStatusName(row.status),
						row.status == PAY_SUCCESS ? " without a reference" : ""),
				 PayReason(PAY_REASON_NOT_SETTLED)));
	if (!PayTextEqual(row.channel_ref, PG_GETARG_DATUM(1)))
		JournalSecondCharge(fcinfo, catalog, bizno, &row, PG_GETARG_DATUM(1),
							SECOND_CHARGE_CONFIRMED);
	SPI_finish();
	PG_RETURN_VOID();
}

/*
 * Lock the row of bizno and move it to target as the machine allows.
 */
static Datum
GuardedTransition(FunctionCallInfo fcinfo, Datum bizno, PayStatus target,
				  const char *note)
{
	const PayCatalog *catalog = PayCatalogGetTables(fcinfo);
	LedgerRow	row;

	SPI_connect();
	if (!PayLedgerLock(fcinfo, catalog, bizno, &row))
		PayRaiseUnknownPayment(catalog, bizno);
	switch (PayTransitionVerdict(row.status, target))
	{
		case PAY_NO_OP:
			break;
		case PAY_ILLEGAL:
			PayRaiseIllegalTransition(NULL, PayKeyDescription(bizno), row.status, target);
			break;
		case PAY_LEGAL:
			PayLedgerSetStatus(catalog, bizno, target, note);
			break;
	}
	SPI_finish();

	PG_RETURN_DATUM(PayStatusGetDatum(catalog, target));
}

/*
 * pay_reset(bizno text, note text) returns pay_status
 */
static Datum
ResetPayment(FunctionCallInfo fcinfo, PayApi api)
{
	Datum		bizno = PayKeyArgument(fcinfo, 0);

	PayRequireArgument(fcinfo, 1, "note");
	return GuardedTransition(fcinfo, bizno, PAY_INIT,
							 PayBoundedTextArgument(fcinfo, 1, "note", PAY_NOTE_MAX_CHARS, api));
}

Datum
pay_reset(PG_FUNCTION_ARGS)
{
	return ResetPayment(fcinfo, PAY_API_1_2);
}

Datum
pay_reset_1_3(PG_FUNCTION_ARGS)
{
	return ResetPayment(fcinfo, PAY_API_1_3);
}

/*
 * pay_transition(bizno text, target pay_status, note text) returns pay_status
 */
static Datum
TransitionPayment(FunctionCallInfo fcinfo, PayApi api)
{
	Datum		bizno = PayKeyArgument(fcinfo, 0);

	PayRequireArgument(fcinfo, 1, "target");
	return GuardedTransition(fcinfo, bizno,
							 PayStatusFromLabel(PayCatalogGet(fcinfo), PG_GETARG_OID(1)),
							 PayBoundedTextArgument(fcinfo, 2, "note", PAY_NOTE_MAX_CHARS, api));
}

Datum
pay_transition(PG_FUNCTION_ARGS)
{
	return TransitionPayment(fcinfo, PAY_API_1_2);
}

Datum
pay_transition_1_3(PG_FUNCTION_ARGS)
{
	return TransitionPayment(fcinfo, PAY_API_1_3);
}

