/*-------------------------------------------------------------------------
 *
 * direct.h
 *	  The API's two hot writes of the ledger -- a new payment, and settling
 *	  one -- through the table and index access methods.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DIRECT_H
#define DIRECT_H

#include "postgres.h"

#include "fmgr.h"
#include "executor/tuptable.h"
#include "utils/relcache.h"
#include "utils/snapshot.h"

#include "catalog.h"

/* What the settling UPDATE writes, as ledger.c's PLAN_SETTLE takes it. */
typedef struct PaySettleWrite
{
	Datum		bizno;
	PayStatus	target;			/* SUCCESS or FAILED */
	Datum		channel_ref;	/* kept when null */
	bool		channel_ref_null;
	Datum		last_error;		/* kept when null; also the note */
	bool		last_error_null;
	int32		attempt;		/* the attempt it must be */
	bool		attempt_null;	/* any attempt */
	Datum		response;
	bool		response_null;
} PaySettleWrite;

extern bool PayFetchLedgerRow(Relation ledger, Relation pkey, Snapshot snapshot, Datum bizno,
							  TupleTableSlot *slot);
extern bool PayDirectInsert(FunctionCallInfo fcinfo, Datum bizno, PayStatus status,
							bool amount_null, Datum amount,
							bool currency_null, Datum currency, bool *inserted);
extern bool PayDirectSettle(FunctionCallInfo fcinfo, const PaySettleWrite *write,
							bool *settled);

#endif							/* DIRECT_H */
