/*-------------------------------------------------------------------------
 *
 * machine.h
 *	  The payment state machine: states, actions, and the one table of
 *	  legal transitions that the API, the ledger and every guarded table ask.
 *
 *-------------------------------------------------------------------------
 */
#ifndef MACHINE_H
#define MACHINE_H

#include "postgres.h"

#include "fmgr.h"
#include "utils/relcache.h"

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
	PAY_ILLEGAL					/* refused with 23514 */
} PayVerdict;

/* The states in which amount and currency may no longer change. */
#define PayStatusIsFrozen(status) \
	((status) == PAY_PROCESSING || (status) == PAY_SUCCESS)

extern const char *PayStatusName(PayStatus status);
extern bool PayStatusFromText(const char *label, size_t len, PayStatus *status);
extern PayVerdict PayTransitionVerdict(int from, PayStatus to);
extern const char *PayTransitionReason(int from, PayStatus to);
extern void PayRaiseIllegalTransition(Relation rel, const char *key,
									  int from, PayStatus to);

#endif							/* MACHINE_H */
