/*-------------------------------------------------------------------------
 *
 * guard.h
 *	  The pay_guard trigger, shared by the ledger, the journal and user tables.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GUARD_H
#define GUARD_H

#include "postgres.h"

#include "access/attnum.h"
#include "access/htup.h"
#include "utils/relcache.h"

extern char *PayRowKeyDescription(Relation rel, HeapTuple tuple);
extern bool PayColumnUnchanged(Relation rel, HeapTuple oldtuple, HeapTuple newtuple,
							   AttrNumber attnum);

#endif							/* GUARD_H */
