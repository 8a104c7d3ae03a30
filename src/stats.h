/*-------------------------------------------------------------------------
 *
 * stats.h
 *	  Counters of duplicate answers, in shared memory when preloaded, and
 *	  the deletions pay_stats' maintained counts take from the ledger.
 *
 *-------------------------------------------------------------------------
 */
#ifndef STATS_H
#define STATS_H

#include "postgres.h"

#include "utils/rel.h"

#include "catalog.h"
#include "machine.h"

extern void PayStatsRequestShmem(void);
extern void PayStatsCountAnswer(PayAction action);
extern void PayStatsCountDeletion(const PayCatalog *catalog, Relation ledger, HeapTuple row);

#endif							/* STATS_H */
