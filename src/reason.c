/*-------------------------------------------------------------------------
 *
 * reason.c
 *	  The table of the extension's named refusals: for each, the constraint
 *	  name a caller branches on, its SQLSTATE, and the hint that says what
 *	  the caller does next.
 *
 * One name may head several rows where the cause differs (pay_refund_parent
 * is a missing parent, 23503, or a parent that cannot be one, 23514) or the
 * advice does (pay_amount_frozen for a payment and for a refund).  Every
 * row is in doc/reference.md with its SQLSTATE; test/tap/010_reference.pl
 * fails when one is missing.
 *
 * What a refusal quotes of a caller's input is bounded here too (PayQuote).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "mb/pg_wchar.h"
#include "utils/builtins.h"
#include "utils/numeric.h"

#include "compat.h"
#include "reason.h"

typedef struct PayReasonSpec
{
	const char *name;			/* the constraint name callers see */
	int			sqlstate;
	const char *hint;			/* may hold one %s: PayReasonWith */
} PayReasonSpec;

static const PayReasonSpec reasons[PAY_REASON_COUNT] = {
	[PAY_REASON_STATUS_TRANSITION] = {"pay_status_transition", ERRCODE_CHECK_VIOLATION,
	"%s"},
	[PAY_REASON_STATUS_NULL] = {"pay_status_transition", ERRCODE_CHECK_VIOLATION,
	"A payment is always in one of INIT, PROCESSING, SUCCESS and FAILED."},
	[PAY_REASON_APPEND_ONLY] = {"pay_append_only", ERRCODE_CHECK_VIOLATION,
	"The journal is the history: it is appended to, never rewritten."},
	[PAY_REASON_WRITTEN_BY_EXTENSION] = {"pay_written_by_extension", ERRCODE_CHECK_VIOLATION,
	"Record a step through the API (pay_transition, pay_reset, pay_confirm_second_charge); maintenance is recorded by SET idempotent_pay.maintenance."},
	[PAY_REASON_PROTECTED_ROW] = {"pay_protected_row", ERRCODE_CHECK_VIOLATION,
	"Keep the record of a payment being charged or paid; only INIT and FAILED payments may be deleted."},
	[PAY_REASON_FROZEN_COLUMN] = {"pay_frozen_column", ERRCODE_CHECK_VIOLATION,
	"A payment being charged or paid keeps these values; record a new payment for new ones."},
	[PAY_REASON_IMMUTABLE_COLUMN] = {"pay_immutable_column", ERRCODE_CHECK_VIOLATION,
	"Record a new payment instead of changing this one's identity."},
	[PAY_REASON_ATTEMPT_COUNT] = {"pay_attempt_count", ERRCODE_CHECK_VIOLATION,
	"Leave attempt to the ledger: it counts the payment's entries into PROCESSING."},
	[PAY_REASON_FROZEN_ANSWER] = {"pay_frozen_answer", ERRCODE_CHECK_VIOLATION,
	"Answer retries with the stored response."},
	[PAY_REASON_SUCCESS_REFERENCE] = {"pay_success_reference", ERRCODE_CHECK_VIOLATION,
	"Settle it with pay_succeed(bizno, channel_ref, attempt), or set channel_ref in the same UPDATE."},
	[PAY_REASON_WRITE_SUPPRESSED] = {"pay_write_suppressed", ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
	"An operator must let the triggers and rules of pay_ledger pass the API's writes."},
	[PAY_REASON_ORDER_TAKEN] = {"pay_ledger_prefix_biz_id_key", ERRCODE_UNIQUE_VIOLATION,
	"Pay this business action under bizNo %s (pay_open returns it)."},
	[PAY_REASON_AMOUNT_FROZEN] = {"pay_amount_frozen", ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
	"A payment being charged or paid keeps its amount: fix the caller, or open a new business action for another one."},
	[PAY_REASON_CURRENCY_FROZEN] = {"pay_currency_frozen", ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
	"A payment being charged or paid keeps its currency: fix the caller, or open a new business action for another one."},
	[PAY_REASON_AMOUNT_FROZEN_1_2] = {"pay_amount_frozen", ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
	"A payment being charged or paid keeps its amount: fix the caller, or open a new business action for another amount."},
	[PAY_REASON_PARAMETER_CHANGED] = {"pay_parameter_changed", ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
	"A known bizNo keeps its amount and currency (idempotent_pay.parameter_change): open a new business action for other ones."},
	[PAY_REASON_STALE_ATTEMPT] = {"pay_stale_attempt", ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
	"A late answer for an earlier attempt: the payment has moved on and keeps its state; if the bank charged that attempt, reconcile it."},
	[PAY_REASON_UNCLAIMED_ATTEMPT] = {"pay_unclaimed_attempt", ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
	"Settle with the attempt pay_claim returned when it answered PROCEED; an attempt is claimed before it is charged."},
	[PAY_REASON_SECOND_CHARGE] = {"pay_second_charge", ERRCODE_WARNING,
	"Refund charge %s at the bank; pay_reconcile lists the payment as DUPLICATE_CHARGE."},
	[PAY_REASON_NOT_SETTLED] = {"pay_not_settled", ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
	"Settle the payment with its first charge's reference (pay_succeed) before confirming another."},
	[PAY_REASON_REFUND_AMOUNT_FROZEN] = {"pay_amount_frozen", ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
	"A refund key names one refund of one amount: retry with its amount, or refund the rest under another refund key."},
	[PAY_REASON_REFUND_INCOMPLETE] = {"pay_refund_parent", ERRCODE_CHECK_VIOLATION,
	"Open refunds with pay_refund_open(bizno, refund_key, amount)."},
	[PAY_REASON_REFUND_UNKNOWN_PARENT] = {"pay_refund_parent", ERRCODE_FOREIGN_KEY_VIOLATION,
	"Refund a payment the ledger has, by its bizNo."},
	[PAY_REASON_REFUND_OF_REFUND] = {"pay_refund_parent", ERRCODE_CHECK_VIOLATION,
	"Refund the payment the refund belongs to."},
	[PAY_REASON_REFUND_PARENT_PROCESSING] = {"pay_refund_unpaid", ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
	"Ask the bank how the payment ended, and settle it first."},
	[PAY_REASON_REFUND_PARENT_UNPAID] = {"pay_refund_unpaid", ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
	"Nothing was captured: there is nothing to refund."},
	[PAY_REASON_REFUND_CURRENCY] = {"pay_refund_currency", ERRCODE_INVALID_PARAMETER_VALUE,
	"A refund pays back in the currency that was captured."},
	[PAY_REASON_REFUND_LIMIT] = {"pay_refund_limit", ERRCODE_CHECK_VIOLATION,
	"Refund at most %s, the rest of the capture; a failed refund frees its share."},
	[PAY_REASON_CARD_STEP] = {"pay_card_step", ERRCODE_CHECK_VIOLATION,
	"Open authorizations with pay_open_authorization, and their captures, voids and increments with pay_capture_open, pay_void_open and pay_increment_open."},
	[PAY_REASON_AUTHORIZATION_NOT_HELD] = {"pay_authorization_not_held", ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
	"Capture, void or raise a hold only once its authorization succeeded: claim and settle the authorization first."},
	[PAY_REASON_AUTHORIZATION_CLOSED] = {"pay_authorization_closed", ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
	"The hold is closed: capture nothing more under it; authorize again to charge more. A void or final capture that fails reopens it."},
	[PAY_REASON_CAPTURE_LIMIT] = {"pay_capture_limit", ERRCODE_CHECK_VIOLATION,
	"Capture at most %s, what the hold has left; a capture that fails frees its share."},
	[PAY_REASON_INCREMENT_AFTER_CAPTURE] = {"pay_increment_after_capture", ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
	"Raise a hold before its first capture; to charge more now, authorize again."},
	[PAY_REASON_STEP_AMOUNT_FROZEN] = {"pay_amount_frozen", ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
	"A key names one step of one amount: retry with its amount, or use another key for another step."},
	[PAY_REASON_STEP_KEY_TAKEN] = {"pay_step_key_taken", ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
	"A key names one step of an authorization, of one kind: retry the step it names, or use another key."},
	[PAY_REASON_ARCHIVED] = {"pay_archived", ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
	"This payment was archived; never charge it."},
	[PAY_REASON_CLAIM_IN_TRANSACTION] = {"pay_claim_in_transaction", ERRCODE_ACTIVE_SQL_TRANSACTION,
	"Claim in autocommit mode, so that the claim is committed when it answers, and call the bank after that. Code that claims inside a transaction and commits it before calling the bank may SET idempotent_pay.claim_in_transaction = allow."},
	[PAY_REASON_FOREIGN_KEY] = {"pay_foreign_key", ERRCODE_INVALID_TEXT_REPRESENTATION,
	"Pass the bizNo that pay_open returned; to key payments by another system's ids, SET idempotent_pay.foreign_keys = accept for those calls."},
	[PAY_REASON_DDL_REFUSED] = {"pay_ddl_refused", ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
	"For deliberate maintenance, a superuser runs SET idempotent_pay.maintenance = on first: the DDL then passes and is recorded in pay_maintenance_log (doc/operations.md)."},
};

int
PayReasonWith(PayReasonId reason, const char *hint_arg)
{
	const PayReasonSpec *spec = &reasons[reason];

	errcode(spec->sqlstate);
	if (hint_arg != NULL)
		errhint(spec->hint, hint_arg);
	else
		errhint("%s", spec->hint);
	return err_generic_string(PG_DIAG_CONSTRAINT_NAME, spec->name);
}

int
PayReason(PayReasonId reason)
{
	return PayReasonWith(reason, NULL);
}

/*
 * value (len bytes, in the server's encoding) as a message quotes it: whole
 * up to PAY_QUOTE_MAX_CHARS characters, else cut at a character's boundary
 * and marked "... (N bytes)".
 */
char *
PayQuote(const char *value, int len)
{
	int			kept;

	/* a character is at least one byte: count them only when it matters */
	if (len <= PAY_QUOTE_MAX_CHARS)
		return pnstrdup(value, len);
	kept = pg_mbcharcliplen(value, len, PAY_QUOTE_MAX_CHARS);
	if (kept >= len)
		return pnstrdup(value, len);
	return psprintf("%.*s... (%d bytes)", kept, value, len);
}

char *
PayQuoteCString(const char *value)
{
	return PayQuote(value, strlen(value));
}

char *
PayQuoteText(text *value)
{
	return PayQuote(VARDATA_ANY(value), VARSIZE_ANY_EXHDR(value));
}

char *
PayQuoteTextDatum(Datum value)
{
	return PayQuoteText(DatumGetTextPP(value));
}

/* A numeric as numeric_out writes it, bounded: 1e130000 has 130001 digits. */
char *
PayQuoteNumeric(Datum value)
{
	return PayQuoteCString(DatumGetCString(DirectFunctionCall1(numeric_out, value)));
}
