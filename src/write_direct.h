/*-------------------------------------------------------------------------
 *
 * write_direct.h
 *	  Reads and writes through the table and index access methods, made
 *	  only where write_direct_policy.c allows them.  Called by write.c, and
 *	  for the card flow's rows by write_card.c.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PAY_WRITE_DIRECT_H
#define PAY_WRITE_DIRECT_H

#include "postgres.h"

#include "executor/tuptable.h"
#include "fmgr.h"
#include "nodes/lockoptions.h"
#include "utils/relcache.h"

#include "catalog.h"
#include "write_rows.h"

extern bool PayDirectProbe(FunctionCallInfo fcinfo, Datum bizno, LedgerRow *row);
extern bool PayDirectInsert(FunctionCallInfo fcinfo, Datum bizno, PayStatus status,
							const PaymentAmount *amount, bool *inserted);
extern bool PayDirectInsertRead(FunctionCallInfo fcinfo, Datum bizno, PayStatus status,
								const PaymentAmount *amount, bool *inserted, LedgerRow *row);
extern bool PayDirectFindOrder(FunctionCallInfo fcinfo, Datum prefix, Datum biz_id,
							   LedgerRow *row, bool *found);
extern bool PayDirectReadCardRow(FunctionCallInfo fcinfo, Datum bizno, bool by_step, Datum key,
								 PayCardRow *row, bool *found);
extern bool PayDirectInsertCard(FunctionCallInfo fcinfo, const PayCardInsert *insert,
								bool *inserted);
extern bool PayDirectSettle(FunctionCallInfo fcinfo, const PaySettleWrite *settle,
							bool *settled);
extern void PayDirectJournalInsert(const PayCatalog *catalog, Relation journal,
								   const Datum *values, const bool *nulls);
extern bool PayDirectSegmentBegin(void);
extern void PayDirectSegmentEnd(void);
extern void PayDirectSegmentAbandon(void);
extern bool PayDirectLockRow(const PayCatalog *catalog, Relation ledger, Datum bizno,
							 LockTupleMode mode, TupleTableSlot *slot);
extern bool PayDirectLock(FunctionCallInfo fcinfo, Datum bizno, LedgerRow *row, bool *found);

#endif							/* PAY_WRITE_DIRECT_H */
