/*-------------------------------------------------------------------------
 *
 * api_claim.c
 *	  Starting and claiming payments: pay_open, pay_begin, pay_claim and
 *	  pay_open_claim, and one input of pay_open_claim_many.
 *
 * Every function runs as the extension owner (SECURITY DEFINER) and reads
 * and writes the ledger through write.h alone.  A decision that writes is
 * taken on the row as re-read under FOR UPDATE; decisions that do not write
 * (ALREADY_SUCCEEDED, IN_PROGRESS) are taken on a plain read, because
 * SUCCESS never changes and a PROCESSING row answered IN_PROGRESS is never
 * charged.  The plain read is the probe of the primary key
 * (PayLedgerProbe): it is the whole duplicate-retry path, and the first
 * step of every new payment.  The ledger's triggers enforce the state
 * machine and write the journal for these writes as for any other; a note
 * for the journal travels in the row written (the ledger's note column).
 *
 * What to do with a payment is never decided here: pay_begin asks
 * PayDecideBegin (machine.c).
 *
 * 1.3's rules make the guarantee independent of the caller getting every
 * detail right: a new payment needs amount and currency, an active ISO
 * 4217 one with the amount in its minor units, and mismatches name the
 * field (pay_amount_frozen, pay_currency_frozen, and pay_parameter_changed
 * under idempotent_pay.parameter_change = refuse).
 *
 * 1.4's rules make the claim durable before the caller acts on it (a claim
 * is refused inside a transaction block: PayRefuseClaimInTransaction), refuse
 * by default another amount or currency of a known payment in every state
 * (idempotent_pay.parameter_change = default, which allows it under 1.3's
 * SQL), bound an amount (idempotent_pay.max_amount), and hold keys to what
 * they claim to be: a key the ledger does not have starts a payment when it
 * is a bizNo, or a key of another system the caller accepts
 * (PayCheckNewKey); a bizNo is never the biz_id of a new business action.
 *
 * The order of 1.4's checks: a claim inside a transaction block is refused
 * (25001) first, before its arguments are read, so there a NULL or
 * malformed key is 25001 too; then the arguments (22004, 22P02, 22023,
 * 22003 beyond max_amount); then, for a key neither the ledger nor the
 * archive has, the key's own check (22P02, pay_foreign_key included)
 * before a new payment's missing amount or currency (22004).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/numeric.h"

#include "api.h"
#include "api_args.h"
#include "api_batch.h"
#include "bizno.h"
#include "catalog.h"
#include "compat.h"
#include "machine.h"
#include "prefixes.h"
#include "reason.h"
#include "settings.h"
#include "stats.h"
#include "write.h"

PG_FUNCTION_INFO_V1(pay_open);
PG_FUNCTION_INFO_V1(pay_begin);
PG_FUNCTION_INFO_V1(pay_begin_1_2);
PG_FUNCTION_INFO_V1(pay_claim);
PG_FUNCTION_INFO_V1(pay_open_claim);
PG_FUNCTION_INFO_V1(pay_open_1_3);
PG_FUNCTION_INFO_V1(pay_begin_1_3);
PG_FUNCTION_INFO_V1(pay_claim_1_3);
PG_FUNCTION_INFO_V1(pay_open_claim_1_3);
PG_FUNCTION_INFO_V1(pay_open_1_4);
PG_FUNCTION_INFO_V1(pay_begin_1_4);
PG_FUNCTION_INFO_V1(pay_claim_1_4);
PG_FUNCTION_INFO_V1(pay_open_claim_1_4);

/*
 * Since 1.4 the functions that can answer PROCEED refuse (25001) to run
 * inside a transaction block -- an explicit BEGIN, or what PostgreSQL's
 * PreventInTransactionBlock also counts as one: the statements of one
 * simple query, a pipeline of the extended protocol, a subtransaction (a
 * savepoint, a PL/pgSQL block with an EXCEPTION clause, which may roll the
 * claim back while the statement goes on) -- unless
 * idempotent_pay.claim_in_transaction = allow.  A claim made there is not
 * durable when the caller reads it: should the transaction roll back after
 * the bank call (an error, a crash, a lost connection), the claim goes with
 * it and the next claim answers PROCEED under the same attempt again, which
 * the bank charges again.  Drawing a new attempt instead would not help: a
 * new attempt is a new reference at the bank.  Refused whatever the answer
 * would be, so that a caller meets it on the first test, not with the first
 * new payment in production.  Called before anything is read or written,
 * and before the arguments are checked.
 * A pipeline's first statement cannot know that more will follow, as for
 * PreventInTransactionBlock.  pay_open_claim_many refuses it for the whole
 * batch.
 */
void
PayRefuseClaimInTransaction(const char *function)
{
	if (pay_claim_in_transaction == PAY_CLAIM_IN_TRANSACTION_ALLOW)
		return;
	if (!IsTransactionBlock() && (MyXactFlags & XACT_FLAGS_PIPELINING) == 0)
		return;
	ereport(ERROR,
			(IsSubTransaction() ?
			 errmsg("%s cannot run inside a subtransaction: its claim would not be committed before the bank is called",
					function) :
			 errmsg("%s cannot run inside a transaction block: its claim would not be committed before the bank is called",
					function),
			 errdetail("Should the transaction roll back after the bank call, the claim is lost with it and the next claim answers PROCEED again under the same attempt: the bank charges twice."),
			 PayReason(PAY_REASON_CLAIM_IN_TRANSACTION)));
}

/*
 * Refuse (55000) a change of one field of a payment's amount -- the amount
 * or the currency, the reason naming which -- with both values.
 */
static void
RaiseFieldChange(Datum bizno, const LedgerRow *row, const char *field,
				 const char *recorded, const char *requested, PayReasonId reason)
{
	ereport(ERROR,
			(errmsg("payment %s is %s: its %s cannot change", TextDatumGetCString(bizno),
					PayStatusName(row->status), field),
			 errdetail("Recorded %s: %s; requested: %s.", field, recorded, requested),
			 PayReason(reason)));
}

/*
 * Whether idempotent_pay.parameter_change refuses another amount or currency
 * of a known INIT or FAILED payment under the rules of api: its default is
 * 1.4's rule, refuse, and 1.3's under 1.3's SQL, allow.
 */
static bool
ParameterChangeRefused(PayApi api)
{
	switch ((PayParameterChange) pay_parameter_change)
	{
		case PAY_PARAMETER_CHANGE_ALLOW:
			return false;
		case PAY_PARAMETER_CHANGE_REFUSE:
			return true;
		case PAY_PARAMETER_CHANGE_DEFAULT:
			break;
	}
	return api >= PAY_API_1_4;
}

/*
 * A payment keeps one amount while it is charged: a different amount is
 * refused (55000) while PROCESSING or SUCCESS, and replaced -- journaled by
 * the ledger's trigger -- while INIT or FAILED, unless, since 1.3,
 * idempotent_pay.parameter_change refuses it (by default since 1.4).  Since
 * 1.3 the refusal names the field that differs.  Since 1.4 a value the
 * payment lacks (one recorded by 1.0 to 1.2 without a currency) may be
 * given while INIT or FAILED: that completes the payment, changing nothing
 * recorded.  row must be locked when it is INIT or FAILED.
 */
static void
ApplyAmount(const PayCatalog *catalog, Datum bizno, const LedgerRow *row,
			const PaymentAmount *amount, PayApi api)
{
	if (!PayAmountDiffers(row, amount))
		return;

	if (api >= PAY_API_1_3)
	{
		bool		frozen = PayStatusIsFrozen(row->status);
		bool		refused = frozen || ParameterChangeRefused(api);
		bool		completes = !frozen && api >= PAY_API_1_4;

		if (refused && PayCurrencyFieldDiffers(row, amount) && !(completes && row->currency_null))
			RaiseFieldChange(bizno, row, "currency",
							 row->currency_null ? "(none)" : PayQuoteTextDatum(row->currency),
							 PayQuoteTextDatum(amount->currency),
							 frozen ? PAY_REASON_CURRENCY_FROZEN : PAY_REASON_PARAMETER_CHANGED);
		if (refused && PayAmountFieldDiffers(row, amount) && !(completes && row->amount_null))
			RaiseFieldChange(bizno, row, "amount",
							 row->amount_null ? "(none)" : PayQuoteNumeric(row->amount),
							 PayQuoteNumeric(amount->amount),
							 frozen ? PAY_REASON_AMOUNT_FROZEN : PAY_REASON_PARAMETER_CHANGED);
	}
	if (PayStatusIsFrozen(row->status))
		ereport(ERROR,
				(errmsg("payment %s is %s: its amount cannot change",
						TextDatumGetCString(bizno), PayStatusName(row->status)),
				 errdetail("Recorded: %s; requested: %s.",
						   PayAmountText(row->amount_null, row->amount,
									  row->currency_null, row->currency),
						   PayAmountText(!amount->has_amount, amount->amount,
									  !amount->has_currency, amount->currency)),
				 PayReason(PAY_REASON_AMOUNT_FROZEN_1_2)));

	PayLedgerSetAmount(catalog, bizno,
					   !amount->has_amount && row->amount_null,
					   amount->has_amount ? amount->amount : row->amount,
					   !amount->has_currency && row->currency_null,
					   amount->has_currency ? amount->currency : row->currency);
}

/*
 * Insert failed on a unique key but no row has this bizNo: another bizNo
 * may hold the same (prefix, biz_id).  Raise 23505 naming it; return when
 * there is none (the holder vanished meanwhile, or another unique index of
 * the DBA's refused the row).
 */
static void
RaiseIfOrderTaken(FunctionCallInfo fcinfo, const PayCatalog *catalog, Datum bizno)
{
	text	   *key = DatumGetTextPP(bizno);
	BiznoParts	parts;
	char		expected_check;
	Datum		args[2];
	LedgerRow	holder;

	if (bizno_parse(VARDATA_ANY(key), VARSIZE_ANY_EXHDR(key), &parts,
					&expected_check) != BIZNO_VALID)
		return;
	args[0] = PointerGetDatum(cstring_to_text_with_len(parts.prefix, parts.prefix_len));
	args[1] = PointerGetDatum(cstring_to_text_with_len(parts.biz_id, parts.biz_id_len));
	if (PayLedgerFindOrder(fcinfo, catalog, args[0], args[1], &holder))
		ereport(ERROR,
				(errmsg("business action %s %s already has bizNo %s",
						TextDatumGetCString(args[0]), TextDatumGetCString(args[1]),
						TextDatumGetCString(holder.bizno)),
				 errdetail("bizNo %s was not recorded: one business action has one bizNo.",
						   text_to_cstring(key)),
				 PayReasonWith(PAY_REASON_ORDER_TAKEN, TextDatumGetCString(holder.bizno))));
}

/*
 * Refuse (55000) a late retry of payment bizno, archived as status (or,
 * when its partition was dropped, of unknown status): it is never charged
 * again.
 */
static void
RaiseArchived(Datum bizno, const char *status)
{
	ereport(ERROR,
			(errmsg("payment %s was archived", TextDatumGetCString(bizno)),
			 status != NULL ?
			 errdetail("It was archived as %s; a retry is never charged.", status) :
			 errdetail("Its archive was dropped; only the fact that it was archived is kept."),
			 PayReason(PAY_REASON_ARCHIVED)));
}

/*
 * A key the ledger does not have may have been archived.  A payment
 * archived as SUCCESS answers from the archive as it would from the
 * ledger: true, with its row (the caller's decision on SUCCESS writes
 * nothing).  Any other archived payment is refused; a key never archived
 * is new: false.
 */
static bool
AnswerFromArchive(const PayCatalog *catalog, Datum bizno, LedgerRow *row)
{
	switch (PayArchiveFind(catalog, bizno, row))
	{
		case PAY_NOT_ARCHIVED:
			return false;
		case PAY_ARCHIVED_KEPT:
			if (!PayTextEqual(row->bizno, bizno))
				ereport(ERROR,
						(errmsg("the business action of %s was archived under bizNo %s",
								TextDatumGetCString(bizno), TextDatumGetCString(row->bizno)),
						 errdetail("bizNo %s was not recorded: one business action has one bizNo.",
								   TextDatumGetCString(bizno)),
						 PayReason(PAY_REASON_ARCHIVED)));
			if (row->status == PAY_SUCCESS)
				return true;
			RaiseArchived(bizno, PayStatusName(row->status));
			break;
		case PAY_ARCHIVED_DROPPED:
			RaiseArchived(bizno, NULL);
			break;
	}
	pg_unreachable();
}

/*
 * Carry out the machine's pay_begin decision on a row read plainly (when
 * the decision writes nothing) or under lock (when it does).  The step
 * into PROCESSING, the claim itself, is written as a settlement is, by the
 * access methods where they may be used (PayLedgerAdvance); a reset
 * carries a note, rare, by SQL.
 */
static PayAction
Begin(FunctionCallInfo fcinfo, const PayCatalog *catalog, Datum bizno, const LedgerRow *row,
	  const PaymentAmount *amount, PayBeginDecision decision, PayApi api)
{
	PayStatus	status = row->status;

	ApplyAmount(catalog, bizno, row, amount, api);
	for (int i = 0; i < decision.nsteps; i++)
	{
		if (decision.steps[i] == PAY_INIT)
			PayLedgerSetStatus(catalog, bizno, PAY_INIT,
							   "reset by pay_begin (idempotent_pay.retry_failed = auto)");
		else
			PayLedgerAdvance(fcinfo, catalog, bizno, status, decision.steps[i]);
		status = decision.steps[i];
	}
	return decision.action;
}

/*
 * The pay_begin decision on bizno, carried out; returns the action.  When
 * after is not NULL it receives the payment as the call leaves it (for
 * pay_claim): the row read, or locked, when nothing was written after it,
 * else the row read again.  pay_begin passes NULL and reads nothing more.
 * opened: the row of bizno was inserted by this call (pay_open_claim's new
 * business action).  Call it inside SPI.
 */
static PayAction
Claim(FunctionCallInfo fcinfo, const PayCatalog *catalog, Datum bizno,
	  const PaymentAmount *amount, PayApi api, LedgerRow *after, bool opened)
{
	bool		retry_failed = pay_retry_failed == PAY_RETRY_AUTO;
	PayBeginDecision decision;
	PayAction	action;
	LedgerRow	row;
	bool		row_is_current = false;
	bool		inserted;

	for (;;)
	{
		CHECK_FOR_INTERRUPTS();
		if (!PayLedgerProbe(fcinfo, bizno, &row) &&
			!AnswerFromArchive(catalog, bizno, &row))
		{
			if (api >= PAY_API_1_4)
				PayCheckNewKey(catalog, bizno);
			if (api >= PAY_API_1_2 && !amount->has_amount)
				ereport(ERROR,
						(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
						 errmsg("payment %s is new: its amount must not be null",
								TextDatumGetCString(bizno)),
						 errhint("Pass the amount and currency to charge with the first claim, or open the payment with pay_open.")));
			if (api >= PAY_API_1_3 && !amount->has_currency)
				ereport(ERROR,
						(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
						 errmsg("payment %s is new: its currency must not be null",
								TextDatumGetCString(bizno)),
						 errhint("Pass the amount and currency to charge with the first claim, or open the payment with pay_open.")));
			decision = PayDecideBegin(PAY_NEW_ROW, retry_failed);
			inserted = PayLedgerInsert(fcinfo, catalog, bizno, decision.steps[0], amount,
									   PAY_INSERT_IF_ABSENT);
			PayArchiveForgetChecked();
			if (inserted)
			{
				action = decision.action;
				break;
			}
			if (!PayLedgerProbe(fcinfo, bizno, &row))
			{
				RaiseIfOrderTaken(fcinfo, catalog, bizno);

				/*
				 * No row holds this bizNo or its business action, yet a
				 * unique index refused it: one of the DBA's, or the holder
				 * is gone.  Insert without ON CONFLICT: PostgreSQL names the
				 * index that refuses it, or the row goes in.
				 */
				PayRequireRowWritten(PayLedgerInsert(fcinfo, catalog, bizno, decision.steps[0],
													 amount, PAY_INSERT_STRICT), bizno);
				action = decision.action;
				break;
			}
		}
		decision = PayDecideBegin(row.status, retry_failed);
		/*
		 * A decision that writes is taken again on the row under lock --
		 * unless this call inserted the row: no other transaction sees it,
		 * and the insert holds it as a lock would.
		 */
		if ((decision.nsteps > 0 ||
			 (!PayStatusIsFrozen(row.status) && PayAmountDiffers(&row, amount))) &&
			!opened)
		{
			if (!PayLedgerLock(fcinfo, catalog, bizno, &row))
				continue;		/* deleted meanwhile */
			decision = PayDecideBegin(row.status, retry_failed);
		}
		/* the row read or locked is the payment as the call leaves it unless Begin writes */
		row_is_current = decision.nsteps == 0 && !PayAmountDiffers(&row, amount);
		action = Begin(fcinfo, catalog, bizno, &row, amount, decision, api);
		break;
	}

	if (after != NULL)
	{
		if (row_is_current)
			*after = row;
		else if (!PayLedgerProbe(fcinfo, bizno, after))
			PayRequireRowWritten(false, bizno);
	}
	return action;
}

/*
 * pay_begin(bizno text, amount numeric, currency text) returns pay_action
 *
 * An entry point per version, as pg_stat_statements keeps them: the SQL of
 * 1.3 binds pay_begin_1_3, that of 1.2 pay_begin_1_2, which refuses a new
 * payment without an amount (22004); the SQL of 1.0 and 1.1, still
 * installed until ALTER EXTENSION UPDATE, binds pay_begin, which records it
 * with none, as those versions did.  The SQL of 1.4 binds pay_begin_1_4,
 * which adds 1.4's rules (above), the refusal inside a transaction block
 * first.
 */
static Datum
BeginPayment(FunctionCallInfo fcinfo, PayApi api)
{
	const PayCatalog *catalog;
	Datum		bizno;
	PaymentAmount amount;
	PayAction	action;

	if (api >= PAY_API_1_4)
		PayRefuseClaimInTransaction("pay_begin");
	catalog = PayCatalogGetTables(fcinfo);
	bizno = PayKeyArgument(fcinfo, 0);
	amount = PayAmountArguments(fcinfo, 1, 2, api);

	SPI_connect();
	action = Claim(fcinfo, catalog, bizno, &amount, api, NULL, false);
	SPI_finish();

	PayStatsCountAnswer(action);
	PG_RETURN_DATUM(PayActionGetDatum(catalog, action));
}

/* pay_begin as the SQL of 1.0 and 1.1 binds it: no amount required */
Datum
pay_begin(PG_FUNCTION_ARGS)
{
	return BeginPayment(fcinfo, PAY_API_1_1);
}

/* pay_begin as the SQL of 1.2 binds it: a new payment needs its amount */
Datum
pay_begin_1_2(PG_FUNCTION_ARGS)
{
	return BeginPayment(fcinfo, PAY_API_1_2);
}

Datum
pay_begin_1_3(PG_FUNCTION_ARGS)
{
	return BeginPayment(fcinfo, PAY_API_1_3);
}

Datum
pay_begin_1_4(PG_FUNCTION_ARGS)
{
	return BeginPayment(fcinfo, PAY_API_1_4);
}

/*
 * The pay_claim composite of an action and the payment as it stands:
 * (action, attempt, status, channel_ref, response), with bizno in front
 * when the result type has six columns (pay_open_claim).
 */
static Datum
ClaimResult(FunctionCallInfo fcinfo, const PayCatalog *catalog, Datum bizno,
			PayAction action, const LedgerRow *row)
{
	TupleDesc	tupdesc;
	Datum		values[6];
	bool		nulls[6] = {false, false, false, false, false, false};
	int			n = 0;

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "the result of a claim is not a composite type");
	tupdesc = BlessTupleDesc(tupdesc);
	if (tupdesc->natts == 6)
		values[n++] = bizno;
	values[n++] = PayActionGetDatum(catalog, action);
	values[n++] = Int32GetDatum(row->attempt);
	values[n++] = PayStatusGetDatum(catalog, row->status);
	nulls[n] = row->channel_ref_null;
	values[n++] = row->channel_ref;
	nulls[n] = row->response_null;
	values[n++] = row->response;
	return HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls));
}

/*
 * pay_claim(bizno text, amount numeric, currency text) returns pay_claim
 *
 * pay_begin's decision, with what the caller needs in the same round trip:
 * the attempt to charge under (PROCEED) or in flight (IN_PROGRESS), and
 * the reference and stored response of a success (ALREADY_SUCCEEDED).
 */
static Datum
ClaimPayment(FunctionCallInfo fcinfo, PayApi api)
{
	const PayCatalog *catalog;
	Datum		bizno;
	PaymentAmount amount;
	PayAction	action;
	LedgerRow	row;
	Datum		result;

	if (api >= PAY_API_1_4)
		PayRefuseClaimInTransaction("pay_claim");
	catalog = PayCatalogGetTables(fcinfo);
	bizno = PayKeyArgument(fcinfo, 0);
	amount = PayAmountArguments(fcinfo, 1, 2, api);

	SPI_connect();
	action = Claim(fcinfo, catalog, bizno, &amount, api, &row, false);
	result = SPI_datumTransfer(ClaimResult(fcinfo, catalog, bizno, action, &row), false, -1);
	SPI_finish();

	PayStatsCountAnswer(action);
	PG_RETURN_DATUM(result);
}

Datum
pay_claim(PG_FUNCTION_ARGS)
{
	return ClaimPayment(fcinfo, PAY_API_1_2);
}

Datum
pay_claim_1_3(PG_FUNCTION_ARGS)
{
	return ClaimPayment(fcinfo, PAY_API_1_3);
}

Datum
pay_claim_1_4(PG_FUNCTION_ARGS)
{
	return ClaimPayment(fcinfo, PAY_API_1_4);
}

/*
 * pay_open's and pay_open_claim's arguments (prefix, biz_id, amount,
 * currency), held to their rules before anything is read: what the call
 * refuses whatever the ledger holds.  Returns the amount.
 */
PaymentAmount
PayOpenArguments(FunctionCallInfo fcinfo, PayApi api)
{
	PayRequireArgument(fcinfo, 0, "prefix");
	PayRequireArgument(fcinfo, 1, "biz_id");
	PayRequireArgument(fcinfo, 2, "amount");
	if (api >= PAY_API_1_3)
		PayRequireArgument(fcinfo, 3, "currency");
	BiznoCheckParts(PG_GETARG_TEXT_PP(0), PG_GETARG_TEXT_PP(1));
	return PayAmountArguments(fcinfo, 2, 3, api);
}

/*
 * The bizNo of business action (prefix, biz_id): the recorded one (another
 * amount or currency held to ApplyAmount's rules), or a new one recorded
 * as new_status (*opened set): INIT for pay_open, the claim's first step
 * for pay_open_claim since 1.4.  When opened_row is not NULL, a new row
 * is read back into it as written (PayLedgerInsertRead).
 * Call it inside SPI; the bizNo is in the caller's memory.
 */
static Datum
OpenOrder(FunctionCallInfo fcinfo, const PayCatalog *catalog, PaymentAmount *amount,
		  PayApi api, PayStatus new_status, bool *opened, LedgerRow *opened_row)
{
	text	   *prefix;
	text	   *biz_id;
	Datum		order[2];
	Datum		bizno;
	LedgerRow	row;
	char		buf[BIZNO_MAX_LEN + 1];
	PayInsertConflict conflict = PAY_INSERT_IF_ABSENT;
	bool		inserted;

	*amount = PayOpenArguments(fcinfo, api);
	prefix = PG_GETARG_TEXT_PP(0);
	biz_id = PG_GETARG_TEXT_PP(1);
	order[0] = PointerGetDatum(prefix);
	order[1] = PointerGetDatum(biz_id);
	*opened = false;

	for (;;)
	{
		CHECK_FOR_INTERRUPTS();
		if (PayLedgerFindOrder(fcinfo, catalog, order[0], order[1], &row))
		{
			bizno = SPI_datumTransfer(row.bizno, false, -1);
			if (PayAmountDiffers(&row, amount))
			{
				if (!PayLedgerLock(fcinfo, catalog, bizno, &row))
					continue;	/* deleted meanwhile */
				ApplyAmount(catalog, bizno, &row, amount, api);
			}
			return bizno;
		}
		switch (PayArchiveFindOrder(catalog, order[0], order[1], &row))
		{
			case PAY_NOT_ARCHIVED:
				break;
			case PAY_ARCHIVED_KEPT:

				/*
				 * Its bizNo, which a claim answers from the archive; a
				 * success keeps its amount, as in the ledger.  Any other
				 * archived payment is never charged again: its amount no
				 * longer matters.
				 */
				if (row.status == PAY_SUCCESS)
					ApplyAmount(catalog, row.bizno, &row, amount, api);
				return SPI_datumTransfer(row.bizno, false, -1);
			case PAY_ARCHIVED_DROPPED:
				ereport(ERROR,
						(errmsg("business action %s %s was archived",
								TextDatumGetCString(order[0]), TextDatumGetCString(order[1])),
						 errdetail("Its archive was dropped; only the fact that it was archived is kept."),
						 PayReason(PAY_REASON_ARCHIVED)));
		}
		/* a business action recorded with a bizNo for biz_id keeps working */
		if (api >= PAY_API_1_4)
		{
			BiznoCheckBizIdIsNoBizno(biz_id);
			PayPrefixNoteIssued(catalog, VARDATA_ANY(prefix), VARSIZE_ANY_EXHDR(prefix));
		}
		bizno = PointerGetDatum(cstring_to_text_with_len(buf,
														 BiznoGenerate(buf, VARDATA_ANY(prefix),
																	   VARSIZE_ANY_EXHDR(prefix),
																	   VARDATA_ANY(biz_id),
																	   VARSIZE_ANY_EXHDR(biz_id))));
		inserted = opened_row != NULL ?
			PayLedgerInsertRead(fcinfo, catalog, bizno, new_status, amount, conflict, opened_row) :
			PayLedgerInsert(fcinfo, catalog, bizno, new_status, amount, conflict);
		PayArchiveForgetChecked();
		*opened = inserted;
		if (inserted)
			return SPI_datumTransfer(bizno, false, -1);
		if (conflict == PAY_INSERT_STRICT)
			PayRequireRowWritten(false, bizno); /* a trigger skipped it, twice */

		/*
		 * A unique key refused the new row: the business action was
		 * recorded meanwhile, which the next pass finds, or a unique index
		 * of the DBA's refuses it, which the next pass lets PostgreSQL
		 * name by inserting without ON CONFLICT.
		 */
		conflict = PAY_INSERT_STRICT;
	}
}

/*
 * pay_open(prefix text, biz_id text, amount numeric, currency text)
 * returns text: the bizNo of this business action, recorded as INIT.
 */
static Datum
OpenPayment(FunctionCallInfo fcinfo, PayApi api)
{
	const PayCatalog *catalog = PayCatalogGetTables(fcinfo);
	PaymentAmount amount;
	Datum		bizno;
	bool		opened;

	SPI_connect();
	bizno = OpenOrder(fcinfo, catalog, &amount, api, PAY_INIT, &opened, NULL);
	SPI_finish();

	PG_RETURN_DATUM(bizno);
}

Datum
pay_open(PG_FUNCTION_ARGS)
{
	return OpenPayment(fcinfo, PAY_API_1_2);
}

Datum
pay_open_1_3(PG_FUNCTION_ARGS)
{
	return OpenPayment(fcinfo, PAY_API_1_3);
}

Datum
pay_open_1_4(PG_FUNCTION_ARGS)
{
	return OpenPayment(fcinfo, PAY_API_1_4);
}

/*
 * What pay_open_claim does with its arguments, (prefix, biz_id, amount,
 * currency) in fcinfo, after the refusal inside a transaction block: the
 * business action's bizNo in *bizno, in the memory of the caller of
 * SPI_connect, the claim's action returned and the payment as the claim
 * leaves it in *row.  pay_open_claim_many calls it for each of its inputs
 * (api_batch.c).  Call it inside SPI.
 */
PayAction
PayOpenClaimRow(FunctionCallInfo fcinfo, const PayCatalog *catalog, PayApi api,
				Datum *bizno, LedgerRow *row)
{
	PayBeginDecision decision = PayDecideBegin(PAY_NEW_ROW,
											   pay_retry_failed == PAY_RETRY_AUTO);
	PaymentAmount amount;
	bool		opened;

	/*
	 * Since 1.4 a new business action is recorded as the claim of a new key
	 * is, in its first step (PROCESSING, journaled once) rather than as INIT
	 * then claimed: no other transaction could see it INIT, and one write
	 * and one journal row are half the cost of the new payment.  Before,
	 * it went through INIT, as 1.3's SQL keeps it.
	 */
	if (api < PAY_API_1_4)
	{
		*bizno = OpenOrder(fcinfo, catalog, &amount, api, PAY_INIT, &opened, NULL);
		return Claim(fcinfo, catalog, *bizno, &amount, api, row, opened);
	}
	*bizno = OpenOrder(fcinfo, catalog, &amount, api, decision.steps[0], &opened, row);
	if (!opened)
		return Claim(fcinfo, catalog, *bizno, &amount, api, row, false);
	return decision.action;
}

/*
 * pay_open_claim(prefix text, biz_id text, amount numeric, currency text,
 *				  OUT bizno, OUT action, OUT attempt, OUT status,
 *				  OUT channel_ref, OUT response) returns record
 *
 * pay_open and pay_claim in one call: the common case of an application
 * that knows its order and wants to charge it.
 */
static Datum
OpenClaimPayment(FunctionCallInfo fcinfo, PayApi api)
{
	const PayCatalog *catalog;
	PayAction	action;
	LedgerRow	row;
	Datum		bizno;
	Datum		result;

	if (api >= PAY_API_1_4)
		PayRefuseClaimInTransaction("pay_open_claim");
	catalog = PayCatalogGetTables(fcinfo);

	SPI_connect();
	action = PayOpenClaimRow(fcinfo, catalog, api, &bizno, &row);
	result = SPI_datumTransfer(ClaimResult(fcinfo, catalog, bizno, action, &row), false, -1);
	SPI_finish();

	PayStatsCountAnswer(action);
	PG_RETURN_DATUM(result);
}

Datum
pay_open_claim(PG_FUNCTION_ARGS)
{
	return OpenClaimPayment(fcinfo, PAY_API_1_2);
}

Datum
pay_open_claim_1_3(PG_FUNCTION_ARGS)
{
	return OpenClaimPayment(fcinfo, PAY_API_1_3);
}

Datum
pay_open_claim_1_4(PG_FUNCTION_ARGS)
{
	return OpenClaimPayment(fcinfo, PAY_API_1_4);
}
