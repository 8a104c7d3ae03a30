/*-------------------------------------------------------------------------
 *
 * guard.h
 *	  The pay_guard trigger, shared by the ledger, the journal and user
 *	  tables, and the checks and errors every trigger of the extension shares.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GUARD_H
#define GUARD_H

#include "postgres.h"

#include "access/attnum.h"
#include "access/htup.h"
#include "commands/trigger.h"
#include "fmgr.h"
#include "utils/relcache.h"

#include "machine.h"

/* The row events a trigger of the extension accepts (TRIGGER_EVENT_INSERT is 0). */
#define PAY_ON_INSERT	0x01
#define PAY_ON_UPDATE	0x02
#define PAY_ON_DELETE	0x04

/* The identity saved while a trigger acts as a table's owner. */
typedef struct PayOwnerContext
{
	Oid			saved_user;
	int			saved_sec_context;
	int			guc_nest_level;
} PayOwnerContext;

extern void PayCheckTriggerProtocol(FunctionCallInfo fcinfo, const char *function,
									TriggerEvent timing, int events, bool truncate_too);
extern bool PayRestoring(void);
extern void PayBecomeOwner(Relation rel, PayOwnerContext *context);
extern void PayRestoreUser(const PayOwnerContext *context);
extern void PayRaiseIllegalTransition(Relation rel, const char *key,
									  int from, PayStatus to);
extern char *PayRowKeyDescription(Relation rel, HeapTuple tuple);
extern bool PayColumnUnchanged(Relation rel, HeapTuple oldtuple, HeapTuple newtuple,
							   AttrNumber attnum);

#endif							/* GUARD_H */
