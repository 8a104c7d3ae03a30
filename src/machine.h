/*-------------------------------------------------------------------------
 *
 * machine.h
 *	  The payment state machine: states, actions, the one table of legal
 *	  transitions, the reasons for refusals, and the decisions of pay_begin
 *	  and of settling a payment, all derived from that table.
 *
 * Pure C with no server headers: nothing here knows of catalogs, SQL or
 * errors.  The API (api_*.c), the guard on every table (trigger_guard.c) and
 * pay_allowed ask it; none of them encodes a rule of its own.
 *
 *-------------------------------------------------------------------------
 */
#ifndef MACHINE_H
#define MACHINE_H

#include <stdbool.h>

/* The labels of SQL enum pay_status, in order. */
typedef enum PayStatus
{
	PAY_INIT,
	PAY_PROCESSING,
	PAY_SUCCESS,
	PAY_FAILED
} PayStatus;

#define PAY_STATUS_COUNT	4
/* The "from" of a row that does not exist yet. */
#define PAY_NEW_ROW			PAY_STATUS_COUNT

/* The labels of SQL enum pay_action, in order. */
typedef enum PayAction
{
	PAY_PROCEED,
	PAY_ALREADY_SUCCEEDED,
	PAY_IN_PROGRESS,
	PAY_NEEDS_RESET
} PayAction;

#define PAY_ACTION_COUNT	4

typedef enum PayVerdict
{
	PAY_LEGAL,					/* a transition the machine allows */
	PAY_NO_OP,					/* the same state again: nothing to do */
	PAY_ILLEGAL					/* refused */
} PayVerdict;

/*
 * What pay_begin does with a payment it found in some state: the answer,
 * and the transitions (at most two, in order) it takes to give it.
 */
typedef struct PayBeginDecision
{
	PayAction	action;
	int			nsteps;
	PayStatus	steps[2];
} PayBeginDecision;

extern const char *PayStatusName(PayStatus status);
extern const char *PayActionName(PayAction action);
extern bool PayStatusFromText(const char *label, int len, PayStatus *status);
extern PayVerdict PayTransitionVerdict(int from, PayStatus to);
extern const char *PayTransitionReason(int from, PayStatus to);
extern const char *PayTransitionHint(int from, PayStatus to);
extern bool PayStatusIsFrozen(PayStatus status);
extern PayBeginDecision PayDecideBegin(int found, bool retry_failed);
extern PayStatus PaySettleSource(PayStatus target);

#endif							/* MACHINE_H */
