/*-------------------------------------------------------------------------
 *
 * write_indexes.h
 *	  The indexes a direct write inserts into, opened as the executor opens
 *	  them, with their IndexInfo built once per relcache invalidation.
 *	  Called by write_direct.c only.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PAY_WRITE_INDEXES_H
#define PAY_WRITE_INDEXES_H

#include "postgres.h"

#include "nodes/execnodes.h"

extern void PayOpenIndices(ResultRelInfo *result, bool speculative, TupleTableSlot *row,
						   EState *estate);
extern void PayCloseIndices(ResultRelInfo *result);

#endif							/* PAY_WRITE_INDEXES_H */
