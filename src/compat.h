/*-------------------------------------------------------------------------
 *
 * compat.h
 *	  Every difference between the PostgreSQL majors idempotent_pay builds
 *	  against (15, 17 and 18; 16 by the same shims), in one place: the rest
 *	  of src/ calls the Pay* names below and has no PG_VERSION_NUM test of
 *	  its own.  Each shim keeps the older majors' behaviour on the newer
 *	  ones; doc/porting.md says how to add the next major.
 *
 *	  Include it after postgres.h.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PAY_COMPAT_H
#define PAY_COMPAT_H

#include "postgres.h"

#include "access/genam.h"
#include "access/tableam.h"
#include "executor/executor.h"
#include "storage/itemptr.h"
#include "storage/proc.h"
#include "utils/relcache.h"

#if PG_VERSION_NUM < 150000
#error "idempotent_pay needs PostgreSQL 15 or later"
#endif

/*
 * A function that never returns: 18 spells it as a prefix of the
 * declaration, pg_noreturn; before 18 it was the attribute
 * pg_attribute_noreturn(), which 18 no longer has (GCC takes it as a
 * prefix too).
 */
#if PG_VERSION_NUM >= 180000
#define PayNoReturn pg_noreturn
#else
#define PayNoReturn pg_attribute_noreturn()
#endif

/* 16: the varlena macros (VARDATA_ANY, VARSIZE_ANY_EXHDR, ...) moved here */
#if PG_VERSION_NUM >= 160000
#include "varatt.h"
#endif

/*
 * This backend's PGPROC number, unique among live backends.  17 dropped
 * PGPROC.pgprocno for the global MyProcNumber (the same number: the index
 * of MyProc in ProcGlobal->allProcs).
 */
#if PG_VERSION_NUM >= 170000
#define PayMyProcNumber() ((uint32) MyProcNumber)
#else
#define PayMyProcNumber() ((uint32) MyProc->pgprocno)
#endif

/*
 * The backend part of a virtual transaction id: 17 renamed backendId to
 * procNumber.
 */
#if PG_VERSION_NUM >= 170000
#define PayVxidBackend(vxid) ((vxid).procNumber)
#define PayVxidSetBackend(vxid, backend) ((vxid).procNumber = (backend))
#else
#define PayVxidBackend(vxid) ((vxid).backendId)
#define PayVxidSetBackend(vxid, backend) ((vxid).backendId = (backend))
#endif

/*
 * The relation's primary key index, InvalidOid when it has none -- or only
 * a deferrable one, which the relcache never reported before 18; 18 asks
 * whether a deferrable one will do, and it does not, as before.
 */
#if PG_VERSION_NUM >= 180000
#define PayRelationGetPrimaryKeyIndex(rel) RelationGetPrimaryKeyIndex((rel), false)
#else
#define PayRelationGetPrimaryKeyIndex(rel) RelationGetPrimaryKeyIndex(rel)
#endif

/* 18: index_beginscan takes the scan's instrumentation (none here). */
#if PG_VERSION_NUM >= 180000
#define PayIndexBeginScan(heap, index, snapshot, nkeys, norderbys) \
	index_beginscan((heap), (index), (snapshot), NULL, (nkeys), (norderbys))
#else
#define PayIndexBeginScan(heap, index, snapshot, nkeys, norderbys) \
	index_beginscan((heap), (index), (snapshot), (nkeys), (norderbys))
#endif

/*
 * Which indexes an UPDATE must insert entries into, as table_tuple_update
 * reports it: a bool before 16 (all or none, none for a HOT update); from
 * 16 on TU_None, TU_All, or TU_Summarizing (a HOT update that still owes
 * the summarizing indexes, BRIN, their entries).
 */
#if PG_VERSION_NUM >= 160000
typedef TU_UpdateIndexes PayUpdateIndexes;
#define PayUpdateIndexesAny(u) ((u) != TU_None)
#define PayUpdateIndexesOnlySummarizing(u) ((u) == TU_Summarizing)
#else
typedef bool PayUpdateIndexes;
#define PayUpdateIndexesAny(u) (u)
#define PayUpdateIndexesOnlySummarizing(u) false
#endif

/*
 * ExecInsertIndexTuples with 16's onlySummarizing: when true, only the
 * summarizing indexes get entries (what the executor does after a HOT
 * update that reported TU_Summarizing).  Before 16 no update reports that,
 * so it is always false there.
 */
static inline List *
PayExecInsertIndexTuples(ResultRelInfo *result, TupleTableSlot *slot, EState *estate,
						 bool update, bool noDupErr, bool *specConflict,
						 List *arbiterIndexes, bool onlySummarizing)
{
#if PG_VERSION_NUM >= 160000
	return ExecInsertIndexTuples(result, slot, estate, update, noDupErr, specConflict,
								 arbiterIndexes, onlySummarizing);
#else
	Assert(!onlySummarizing);
	return ExecInsertIndexTuples(result, slot, estate, update, noDupErr, specConflict,
								 arbiterIndexes);
#endif
}

/*
 * ExecCheckIndexConstraints before a (speculative) insertion.  18 takes the
 * tuple id of the row being checked, so that a row does not conflict with
 * itself (WITHOUT OVERLAPS); a row not inserted yet has none, and the
 * executor's ON CONFLICT passes an invalid one, as here.
 */
static inline bool
PayExecCheckIndexConstraints(ResultRelInfo *result, TupleTableSlot *slot, EState *estate,
							 ItemPointer conflictTid, List *arbiterIndexes)
{
#if PG_VERSION_NUM >= 180000
	ItemPointerData none;

	ItemPointerSetInvalid(&none);
	return ExecCheckIndexConstraints(result, slot, estate, conflictTid, &none,
									 arbiterIndexes);
#else
	return ExecCheckIndexConstraints(result, slot, estate, conflictTid, arbiterIndexes);
#endif
}

/*
 * 17: an index access method may keep state across the inserts of a
 * statement, released by index_insert_cleanup when the executor closes the
 * index; before 17 there is none.
 */
#if PG_VERSION_NUM >= 170000
#define PayIndexInsertCleanup(index, info) index_insert_cleanup((index), (info))
#else
#define PayIndexInsertCleanup(index, info) ((void) 0)
#endif

/*
 * 17's SQL/JSON query functions (JSON_VALUE, JSON_QUERY, JSON_EXISTS)
 * coerce their result to the RETURNING type at run time -- its input
 * function, a domain's checks -- with no node a walker of the expression
 * sees.  Before 17 there are none.
 */
#if PG_VERSION_NUM >= 170000
#define PayIsSqlJsonQuery(node) IsA((node), JsonExpr)
#else
#define PayIsSqlJsonQuery(node) false
#endif

#endif							/* PAY_COMPAT_H */
