/*-------------------------------------------------------------------------
 *
 * trigger_common.h
 *	  The checks and errors every trigger of the extension shares, and the
 *	  reading of ledger rows the ledger's own triggers share
 *	  (trigger_common.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef PAY_TRIGGER_COMMON_H
#define PAY_TRIGGER_COMMON_H

#include "postgres.h"

#include "access/attnum.h"
#include "access/htup.h"
#include "commands/trigger.h"
#include "fmgr.h"
#include "utils/relcache.h"

#include "catalog.h"
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
extern AttrNumber PayColumnNumber(Relation rel, const char *column);
extern bool PayRestoring(void);
extern bool PayPermitOwnRow(void);
extern void PayEndOwnRow(bool previous);
extern bool PayTakeOwnRowPermit(void);
extern void PayBecomeOwner(Relation rel, PayOwnerContext *context);
extern void PayRestoreUser(const PayOwnerContext *context);
extern void PayRaiseIllegalTransition(Relation rel, const char *key,
									  int from, PayStatus to);
extern char *PayRowKeyDescription(Relation rel, HeapTuple tuple);
extern bool PayColumnUnchanged(Relation rel, HeapTuple oldtuple, HeapTuple newtuple,
							   AttrNumber attnum);

/*
 * The ledger's own triggers, which read a row of the ledger deformed once
 * (PayDeformLedgerRow): its values and nulls indexed by attribute number
 * less one.
 */
typedef struct PayLedgerValues
{
	HeapTuple	tuple;			/* the row deformed, for error details */
	Datum	   *values;
	bool	   *nulls;
} PayLedgerValues;

extern const PayCatalog *PayCheckLedgerTrigger(FunctionCallInfo fcinfo, const char *function,
											   TriggerEvent timing, int events);
extern void PayDeformLedgerRow(Relation rel, HeapTuple tuple, PayLedgerValues *row);
extern void PayDeformLedgerRowInto(Relation rel, HeapTuple tuple, PayLedgerValues *row);
extern Datum PayRequiredValue(Relation rel, const PayLedgerValues *row, AttrNumber attnum);
extern PayStatus PayLedgerStatus(const PayCatalog *catalog, Relation rel,
								 const PayLedgerValues *row);
extern bool PayLedgerValueUnchanged(Relation rel, const PayLedgerValues *old,
									const PayLedgerValues *new, AttrNumber attnum);

/* The value of column attnum of a deformed ledger row; *isnull says whether NULL. */
static inline Datum
PayLedgerValue(const PayLedgerValues *row, AttrNumber attnum, bool *isnull)
{
	*isnull = row->nulls[attnum - 1];
	return row->values[attnum - 1];
}

static inline bool
PayLedgerValueIsNull(const PayLedgerValues *row, AttrNumber attnum)
{
	return row->nulls[attnum - 1];
}

#endif							/* PAY_TRIGGER_COMMON_H */
