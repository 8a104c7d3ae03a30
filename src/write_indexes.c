/*-------------------------------------------------------------------------
 *
 * write_indexes.c
 *	  The indexes of a table a direct write inserts into, opened as the
 *	  executor opens a result relation's (ExecOpenIndices), with what it
 *	  derives from each index's catalog rows kept between writes.
 *
 * ExecOpenIndices builds every index's IndexInfo -- its key columns,
 * expressions and predicate, and for ON CONFLICT the operators of the
 * unique check -- from the catalog at every statement: on the hot path, a
 * few percent of a payment's CPU.  Here each is built once and kept until a
 * relcache invalidation of its table or of the index itself; a write gets a
 * copy of the top-level struct in its own memory, so that what the
 * executor fills in as it inserts (the states of the expressions, whether
 * an update left the index's columns unchanged, an access method's insert
 * cache) is the write's alone.  A partial index's predicate is kept ready
 * to evaluate too: it calls only immutable functions, built-in ones or the
 * extension's (else the write takes the SQL path), which keep nothing of
 * one evaluation for the next.
 *
 * Two things differ from the executor, neither one a reader or a DDL
 * statement can tell.  An index is opened only for a row it will receive
 * an entry for: a partial index whose predicate the row fails is left
 * closed (the executor opens it, evaluates the predicate and inserts
 * nothing), and an UPDATE opens none until table_tuple_update says the
 * update is not HOT.  And an index opened here keeps its RowExclusiveLock
 * to the end of the transaction, where the executor releases it at the end
 * of the statement: the table's own lock, held to the end either way,
 * already excludes every statement that would conflict with the index's
 * (DROP INDEX and REINDEX lock the table; their CONCURRENTLY forms wait for
 * the table's writers), and one release of all locks at commit costs less
 * than one release per index per write.  The predicate decides on the
 * IndexInfo kept for the table: which indexes a table has, and whether
 * each is ready for inserts, changes only with an invalidation the lock on
 * the table takes in.
 *
 * What is kept may be dropped while a write still uses its copies: firing
 * the ledger's triggers opens the journal, which takes in pending
 * invalidations.  So the memory of what was kept is then handed to the
 * transaction, and freed at its end.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/xact.h"
#include "catalog/index.h"
#include "executor/executor.h"
#include "optimizer/optimizer.h"
#include "utils/inval.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "compat.h"
#include "write_indexes.h"

/* One index's IndexInfo, with or without the unique check's operators. */
typedef struct KeptIndexInfo
{
	Oid			index;
	Oid			table;
	bool		speculative;
	IndexInfo  *info;
	ExprState  *predicate;		/* ready to evaluate, or NULL */
} KeptIndexInfo;

static MemoryContext kept_context = NULL;
static KeptIndexInfo *kept = NULL;
static int	nkept = 0;
static int	kept_capacity = 0;
static bool callback_registered = false;

/* A relcache invalidation: drop everything kept for that relation's table. */
static void
ForgetIndexInfos(Datum arg, Oid relid)
{
	bool		ours = !OidIsValid(relid);

	if (kept_context == NULL)
		return;
	for (int i = 0; i < nkept && !ours; i++)
		ours = kept[i].index == relid || kept[i].table == relid;
	if (!ours)
		return;
	/* a write firing triggers may still hold copies pointing into it */
	if (IsTransactionState())
		MemoryContextSetParent(kept_context, TopTransactionContext);
	else
		MemoryContextDelete(kept_context);
	kept_context = NULL;
	kept = NULL;
	nkept = 0;
	kept_capacity = 0;
}

/* The IndexInfo kept for index, or NULL when none is kept yet. */
static const KeptIndexInfo *
FindKept(Oid index, bool speculative)
{
	for (int i = 0; i < nkept; i++)
		if (kept[i].index == index && kept[i].speculative == speculative)
			return &kept[i];
	return NULL;
}

/*
 * The IndexInfo of index, opened on table, built as ExecOpenIndices builds
 * it, once; and its predicate as ExecInsertIndexTuples prepares it.
 */
static const KeptIndexInfo *
KeptInfo(Relation table, Relation index, bool speculative)
{
	MemoryContext building;
	MemoryContext caller;
	KeptIndexInfo entry;
	const KeptIndexInfo *found = FindKept(RelationGetRelid(index), speculative);

	if (found != NULL)
		return found;

	if (!callback_registered)
	{
		CacheRegisterRelcacheCallback(ForgetIndexInfos, (Datum) 0);
		callback_registered = true;
	}
	if (kept_context == NULL)
		kept_context = AllocSetContextCreate(CacheMemoryContext, "idempotent_pay index infos",
											 ALLOCSET_SMALL_SIZES);
	building = kept_context;
	caller = MemoryContextSwitchTo(building);
	entry.index = RelationGetRelid(index);
	entry.table = RelationGetRelid(table);
	entry.speculative = speculative;
	entry.info = BuildIndexInfo(index);
	if (speculative && entry.info->ii_Unique && !index->rd_index->indisexclusion)
		BuildSpeculativeIndexInfo(index, entry.info);
	entry.predicate = entry.info->ii_Predicate == NIL ? NULL :
		ExecInitQual((List *) expression_planner((Expr *) entry.info->ii_Predicate), NULL);
	MemoryContextSwitchTo(caller);

	/* dropped while it was built: good for this write, kept for none */
	if (kept_context != building)
		return memcpy(palloc(sizeof(KeptIndexInfo)), &entry, sizeof(KeptIndexInfo));
	if (nkept == kept_capacity)
	{
		kept_capacity = Max(8, kept_capacity * 2);
		kept = kept == NULL ?
			MemoryContextAlloc(kept_context, kept_capacity * sizeof(KeptIndexInfo)) :
			repalloc(kept, kept_capacity * sizeof(KeptIndexInfo));
	}
	kept[nkept] = entry;
	return &kept[nkept++];
}

/* Whether row, in estate's per-tuple context, satisfies entry's predicate. */
static bool
RowSatisfiesPredicate(const KeptIndexInfo *entry, TupleTableSlot *row, EState *estate)
{
	ExprContext *econtext = GetPerTupleExprContext(estate);

	econtext->ecxt_scantuple = row;
	return ExecQual(entry->predicate, econtext);
}

/*
 * What ExecOpenIndices does for result's relation, for the indexes row
 * gets an entry in: open and lock each, with its IndexInfo -- the kept
 * one's copy, in the caller's memory, holding nothing of an earlier write.
 */
void
PayOpenIndices(ResultRelInfo *result, bool speculative, TupleTableSlot *row, EState *estate)
{
	Relation	table = result->ri_RelationDesc;
	List	   *oids;
	ListCell   *lc;
	int			n = 0;

	result->ri_NumIndices = 0;
	if (!RelationGetForm(table)->relhasindex)
		return;
	oids = RelationGetIndexList(table);
	if (oids == NIL)
		return;

	result->ri_IndexRelationDescs = palloc(list_length(oids) * sizeof(Relation));
	result->ri_IndexRelationInfo = palloc(list_length(oids) * sizeof(IndexInfo *));
	foreach(lc, oids)
	{
		const KeptIndexInfo *entry = FindKept(lfirst_oid(lc), speculative);
		Relation	index = NULL;
		IndexInfo  *info;

		if (entry == NULL)
		{
			/* built from the index's catalog rows, read under its lock */
			index = index_open(lfirst_oid(lc), RowExclusiveLock);
			entry = KeptInfo(table, index, speculative);
		}
		if (entry->predicate != NULL && !RowSatisfiesPredicate(entry, row, estate))
		{
			if (index != NULL)
				index_close(index, NoLock);
			continue;
		}
		if (index == NULL)
			index = index_open(lfirst_oid(lc), RowExclusiveLock);
		info = palloc(sizeof(IndexInfo));
		memcpy(info, entry->info, sizeof(IndexInfo));
		info->ii_ExpressionsState = NIL;
		info->ii_PredicateState = entry->predicate;
		info->ii_CheckedUnchanged = false;
		info->ii_IndexUnchanged = false;
		info->ii_AmCache = NULL;
		info->ii_Context = CurrentMemoryContext;
		result->ri_IndexRelationDescs[n] = index;
		result->ri_IndexRelationInfo[n] = info;
		n++;
	}
	result->ri_NumIndices = n;
	list_free(oids);
}

/*
 * What ExecCloseIndices does, but for the lock: each index keeps it to the
 * end of the transaction, as its table does.
 */
void
PayCloseIndices(ResultRelInfo *result)
{
	for (int i = 0; i < result->ri_NumIndices; i++)
	{
		PayIndexInsertCleanup(result->ri_IndexRelationDescs[i], result->ri_IndexRelationInfo[i]);
		index_close(result->ri_IndexRelationDescs[i], NoLock);
	}
	result->ri_NumIndices = 0;
}
