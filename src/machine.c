/*-------------------------------------------------------------------------
 *
 * machine.c
 *	  The one table of legal payment transitions and every
 *	  rule derived from it.
 *
 * Every path that changes a payment status asks PayTransitionVerdict: the
 * SQL API (api_*.c), the guard trigger on the ledger and on user tables
 * (trigger_guard.c), and pay_allowed.  pay_begin's answers come from
 * PayDecideBegin, which reads them off the same table.  The reasons for
 * refusals live beside the table, so an error always says why.
 *
 * No server headers here: the machine is plain data and plain functions.
 *
 *-------------------------------------------------------------------------
 */
#include "machine.h"

#include <string.h>

#define L	PAY_LEGAL
#define N	PAY_NO_OP
#define X	PAY_ILLEGAL

/* verdicts[from][to]; the last row is a row that does not exist yet */
static const PayVerdict verdicts[PAY_STATUS_COUNT + 1][PAY_STATUS_COUNT] = {
	/* to:			 INIT PROCESSING SUCCESS FAILED */
	/* INIT */		 {N, L, X, X},
	/* PROCESSING */ {X, X, L, L},
	/* SUCCESS */	 {X, X, N, X},
	/* FAILED */	 {L, X, X, N},
	/* new row */	 {L, L, X, X},
};

#undef L
#undef N
#undef X

static const char *const status_names[PAY_STATUS_COUNT] = {
	"INIT", "PROCESSING", "SUCCESS", "FAILED"
};

static const char *const action_names[PAY_ACTION_COUNT] = {
	"PROCEED", "ALREADY_SUCCEEDED", "IN_PROGRESS", "NEEDS_RESET"
};

const char *
PayStatusName(PayStatus status)
{
	return status_names[status];
}

const char *
PayActionName(PayAction action)
{
	return action_names[action];
}

/*
 * The state whose label is the len bytes at label (not NUL-terminated, as
 * in a text datum); false when it is no label of pay_status.
 */
bool
PayStatusFromText(const char *label, int len, PayStatus *status)
{
	for (int s = 0; s < PAY_STATUS_COUNT; s++)
	{
		if ((int) strlen(status_names[s]) == len && memcmp(label, status_names[s], len) == 0)
		{
			*status = (PayStatus) s;
			return true;
		}
	}
	return false;
}

/*
 * The verdict on moving from (a PayStatus, or PAY_NEW_ROW) to to.
 */
PayVerdict
PayTransitionVerdict(int from, PayStatus to)
{
	return verdicts[from][to];
}

/*
 * Why the machine refuses from -> to.
 */
const char *
PayTransitionReason(int from, PayStatus to)
{
	switch (from)
	{
		case PAY_NEW_ROW:
			return "a payment starts in INIT or PROCESSING";
		case PAY_INIT:
			return "a payment settles only from PROCESSING";
		case PAY_PROCESSING:
			if (to == PAY_PROCESSING)
				return "entering PROCESSING again would charge twice";
			return "a payment in flight settles as SUCCESS or FAILED, and only FAILED may be reset";
		case PAY_SUCCESS:
			return "SUCCESS is final";
		case PAY_FAILED:
			if (to == PAY_PROCESSING)
				return "a failed payment is reset to INIT before it is retried";
			return "a failed payment cannot succeed; reset it and pay again";
	}
	return "it is not a transition of the payment state machine";
}

/*
 * What the caller does about a refused from -> to.
 */
const char *
PayTransitionHint(int from, PayStatus to)
{
	switch (from)
	{
		case PAY_NEW_ROW:
			return "Record a new payment as INIT or PROCESSING (pay_open, pay_begin).";
		case PAY_INIT:
			return "Start the charge first: pay_begin.";
		case PAY_PROCESSING:
			if (to == PAY_PROCESSING)
				return "Never charge again: wait for the answer, or ask the bank about the attempt in flight (pay_stuck).";
			return "Settle it first: pay_succeed or pay_fail, as the bank answered.";
		case PAY_SUCCESS:
			return "The payment succeeded: answer success; refund it as a payment of its own.";
		case PAY_FAILED:
			return "Retry it with pay_begin, or have an operator reset it (pay_reset).";
	}
	return "Follow the payment state machine (pay_transitions).";
}

/*
 * Whether amount and currency (and a guarded table's frozen columns) keep
 * their values in this state: while the bank may be charging, and after.
 */
bool
PayStatusIsFrozen(PayStatus status)
{
	return status == PAY_PROCESSING || status == PAY_SUCCESS;
}

/*
 * pay_begin's decision on a payment found in state found (PAY_NEW_ROW when
 * there is none), read off the transition table:
 *
 * - PROCESSING can be entered: PROCEED, entering it (a new row, INIT);
 * - found is PROCESSING itself, which is never entered again: IN_PROGRESS;
 * - INIT can be entered and PROCESSING after it (a reset): PROCEED through
 *	 both when retry_failed, else NEEDS_RESET (FAILED);
 * - nothing can be entered: the payment is final, ALREADY_SUCCEEDED.
 */
PayBeginDecision
PayDecideBegin(int found, bool retry_failed)
{
	PayBeginDecision decision = {0};

	if (PayTransitionVerdict(found, PAY_PROCESSING) == PAY_LEGAL)
	{
		decision.action = PAY_PROCEED;
		decision.steps[decision.nsteps++] = PAY_PROCESSING;
	}
	else if (found == PAY_PROCESSING)
		decision.action = PAY_IN_PROGRESS;
	else if (PayTransitionVerdict(found, PAY_INIT) == PAY_LEGAL &&
			 PayTransitionVerdict(PAY_INIT, PAY_PROCESSING) == PAY_LEGAL)
	{
		decision.action = retry_failed ? PAY_PROCEED : PAY_NEEDS_RESET;
		if (retry_failed)
		{
			decision.steps[decision.nsteps++] = PAY_INIT;
			decision.steps[decision.nsteps++] = PAY_PROCESSING;
		}
	}
	else
		decision.action = PAY_ALREADY_SUCCEEDED;
	return decision;
}

/*
 * The one state a settlement moves a payment from into target (SUCCESS or
 * FAILED), read off the transition table: PROCESSING.  The settling write
 * matches only rows in it.
 */
PayStatus
PaySettleSource(PayStatus target)
{
	PayStatus	source = PAY_PROCESSING;
	int			sources = 0;

	for (int from = 0; from < PAY_STATUS_COUNT; from++)
		if (PayTransitionVerdict(from, target) == PAY_LEGAL)
		{
			source = (PayStatus) from;
			sources++;
		}
	/* the table has one way into each outcome; a second would be a bug */
	return sources == 1 ? source : PAY_PROCESSING;
}
