/*-------------------------------------------------------------------------
 *
 * refund.h
 *	  The rules of refunds, held by the ledger's bookkeeping trigger.
 *
 *-------------------------------------------------------------------------
 */
#ifndef REFUND_H
#define REFUND_H

#include "postgres.h"

#include "access/htup.h"
#include "utils/relcache.h"

#include "catalog.h"

extern void PayCheckRefund(const PayCatalog *catalog, Relation rel, HeapTuple tuple,
						   bool entering_processing);

#endif							/* REFUND_H */
