/*-------------------------------------------------------------------------
 *
 * reason.h
 *	  Every refusal of the extension that carries a name: the one table of
 *	  their constraint names, SQLSTATEs and hints (reason.c).
 *
 * A refusal is raised as
 *
 *	  ereport(ERROR, (errmsg(...), errdetail(...), PayReason(PAY_REASON_X)));
 *
 * which adds the SQLSTATE, the hint and the constraint name, the field a
 * caller's code branches on (PG_DIAG_CONSTRAINT_NAME, as for a CHECK
 * constraint).  The message and detail stay at the call, which knows the
 * payment; what a caller does about a refusal lives in the table.
 * doc/reference.md lists every row; a test holds the two together.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PAY_REASON_H
#define PAY_REASON_H

#include "postgres.h"

typedef enum PayReasonId
{
	/* the state machine (machine.c decides; the hint is the machine's) */
	PAY_REASON_STATUS_TRANSITION,
	PAY_REASON_STATUS_NULL,
	/* pay_guard on the ledger, the journal and user tables */
	PAY_REASON_APPEND_ONLY,
	PAY_REASON_WRITTEN_BY_EXTENSION,	/* the journal and pay_maintenance_log,
										 * since 1.4 */
	PAY_REASON_PROTECTED_ROW,
	PAY_REASON_FROZEN_COLUMN,
	/* pay_guard on the ledger alone */
	PAY_REASON_IMMUTABLE_COLUMN,
	PAY_REASON_ATTEMPT_COUNT,
	PAY_REASON_FROZEN_ANSWER,
	PAY_REASON_SUCCESS_REFERENCE,
	/* the API */
	PAY_REASON_WRITE_SUPPRESSED,
	PAY_REASON_ORDER_TAKEN,
	PAY_REASON_AMOUNT_FROZEN,
	PAY_REASON_CURRENCY_FROZEN,
	PAY_REASON_AMOUNT_FROZEN_1_2,
	PAY_REASON_PARAMETER_CHANGED,
	PAY_REASON_STALE_ATTEMPT,
	PAY_REASON_UNCLAIMED_ATTEMPT,
	PAY_REASON_SECOND_CHARGE,
	PAY_REASON_NOT_SETTLED,
	/* refunds (refund.c, and pay_refund_open) */
	PAY_REASON_REFUND_AMOUNT_FROZEN,
	PAY_REASON_REFUND_INCOMPLETE,
	PAY_REASON_REFUND_UNKNOWN_PARENT,
	PAY_REASON_REFUND_OF_REFUND,
	PAY_REASON_REFUND_PARENT_PROCESSING,
	PAY_REASON_REFUND_PARENT_UNPAID,
	PAY_REASON_REFUND_CURRENCY,
	PAY_REASON_REFUND_LIMIT,
	/* the card flow (card.c, api_card.c) */
	PAY_REASON_CARD_STEP,
	PAY_REASON_AUTHORIZATION_NOT_HELD,
	PAY_REASON_AUTHORIZATION_CLOSED,
	PAY_REASON_CAPTURE_LIMIT,
	PAY_REASON_INCREMENT_AFTER_CAPTURE,
	PAY_REASON_STEP_AMOUNT_FROZEN,
	PAY_REASON_STEP_KEY_TAKEN,
	/* since 1.3 */
	PAY_REASON_ARCHIVED,
	/* since 1.4 */
	PAY_REASON_CLAIM_IN_TRANSACTION,
	PAY_REASON_FOREIGN_KEY,
	/* DDL on the extension's objects (ddl.c) */
	PAY_REASON_DDL_REFUSED,
	PAY_REASON_COUNT
} PayReasonId;

/*
 * The SQLSTATE, hint and constraint name of reason, inside ereport's list.
 * A hint with a %s takes hint_arg (PayReasonWith).
 */
extern int	PayReason(PayReasonId reason);
extern int	PayReasonWith(PayReasonId reason, const char *hint_arg);

/*
 * What a message quotes of a value a caller gave -- a key, a reference, a
 * currency, an amount: the value itself, or when it is longer than
 * PAY_QUOTE_MAX_CHARS characters its first ones and a marker with its whole
 * length, so that no refusal carries a megabyte of input back to the
 * caller and into the server's log.  The bound is that of the longest
 * valid key: a valid value is always quoted whole.
 */
#define PAY_QUOTE_MAX_CHARS 128

extern char *PayQuote(const char *value, int len);
extern char *PayQuoteCString(const char *value);
extern char *PayQuoteText(text *value);
extern char *PayQuoteTextDatum(Datum value);
extern char *PayQuoteNumeric(Datum value);

#endif							/* PAY_REASON_H */
