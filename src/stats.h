/*-------------------------------------------------------------------------
 *
 * stats.h
 *	  Counters of duplicate answers, in shared memory when preloaded.
 *
 *-------------------------------------------------------------------------
 */
#ifndef STATS_H
#define STATS_H

#include "postgres.h"

#include "machine.h"

extern void PayStatsRequestShmem(void);
extern void PayStatsCountAnswer(PayAction action);

#endif							/* STATS_H */
