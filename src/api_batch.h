/*-------------------------------------------------------------------------
 *
 * api_batch.h
 *	  One input of a batch: what the single call does with its arguments,
 *	  shared by the single calls (api_claim.c, api_settle.c) and the batches
 *	  (api_batch.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef PAY_API_BATCH_H
#define PAY_API_BATCH_H

#include "postgres.h"

#include "fmgr.h"

#include "api.h"
#include "catalog.h"
#include "machine.h"
#include "write_rows.h"

extern PayAction PayOpenClaimRow(FunctionCallInfo fcinfo, const PayCatalog *catalog,
								 PayApi api, Datum *bizno, LedgerRow *row);
extern bool PaySettleRow(FunctionCallInfo fcinfo, const PayCatalog *catalog,
						 PayStatus target, PayApi api);
extern PaymentAmount PayOpenArguments(FunctionCallInfo fcinfo, PayApi api);
extern void PaySettleCheckArguments(FunctionCallInfo fcinfo, PayStatus target, PayApi api);
extern void PayRefuseClaimInTransaction(const char *function);

extern Datum pay_open_claim_many(PG_FUNCTION_ARGS);
extern Datum pay_settle_many(PG_FUNCTION_ARGS);

#endif							/* PAY_API_BATCH_H */
