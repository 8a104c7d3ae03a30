/*-------------------------------------------------------------------------
 *
 * write_direct.c
 *	  Everything that bypasses the executor: the probes of the ledger's
 *	  primary key and of a business action, a claim's lock of a row (as
 *	  SELECT ... FOR UPDATE locks it), the journal trigger's rows, the card
 *	  flow's reads and inserts of its steps, and the API's two hot writes
 *	  of the ledger through the table and index access methods: a new
 *	  payment, as
 *
 *		INSERT INTO pay_ledger (bizno, status, amount, currency)
 *		VALUES (...) ON CONFLICT DO NOTHING
 *
 *	  and settling one, as
 *
 *		UPDATE pay_ledger SET status = target,
 *			channel_ref = COALESCE(ref, channel_ref),
 *			last_error = COALESCE(error, last_error), note = error,
 *			response = response
 *		WHERE bizno = key AND status = 'PROCESSING'
 *			AND attempt = COALESCE(attempt, attempt)
 *
 *	  would run them, without planning, starting and ending a statement per
 *	  call (write_sql.c keeps those statements for every other case).
 *
 * Only when nothing the executor would do is left undone, and nothing a DBA
 * wrote in SQL or a procedural language would run (write_direct_policy.c
 * decides; write.c asks it): the triggers are the
 * extension's own and are fired here as the trigger manager fires them --
 * BEFORE row triggers in name order, each seeing the tuple the one before
 * returned, a NULL skipping the write, then the AFTER row trigger (the
 * journal) once the row is in; defaults are computed, domain checks, NOT
 * NULL constraints and publications' replica identity enforced, and every
 * index maintained, its predicates and expressions evaluated.  As
 * installed, nothing evaluated can look at search_path, which stays the
 * caller's (so the functions need no SET clause, a saving of its own);
 * once a DBA adds a default, domain check or index expression that could (a
 * cast to regclass, say), search_path is pinned for the write as for SQL.
 * Anything a DBA adds that this cannot honour -- a trigger, a rule, a CHECK
 * constraint, row security, a function of the DBA's in a default, domain
 * check or index -- sends every write back to the planned statements, so
 * the DBA's objects act on the API's writes as on any other; so do replica
 * mode and a read-only transaction, where the executor decides.
 *
 * Concurrency is the executor's, step by step:
 * - the INSERT follows ON CONFLICT's speculative insertion: insert the
 *	 heap tuple speculatively, insert the index entries, and confirm it, or
 *	 kill it on a conflict and check the unique indexes (waiting for an
 *	 in-progress inserter of the same key) before trying again; a
 *	 conflicting row the transaction's snapshot cannot see is a
 *	 serialization failure under REPEATABLE READ and SERIALIZABLE.
 * - the UPDATE reads the row under a new statement's snapshot, fires the
 *	 BEFORE UPDATE triggers on it and updates that version, waiting for a
 *	 concurrent writer as any update waits.  The executor locks the row
 *	 before its BEFORE UPDATE triggers (a WAL record of its own) so that
 *	 they see the version it will update; here the update itself proves
 *	 it: when a concurrent transaction changed the row meanwhile, the update
 *	 fails, and in READ COMMITTED the latest version is then locked,
 *	 following the chain of newer versions and checking the WHERE clause
 *	 on it (what EvalPlanQual does for this one-table statement), and the
 *	 triggers fire again on it before it is updated; a concurrent update
 *	 or delete is a serialization failure otherwise.  The ledger's own
 *	 BEFORE triggers (the only ones a direct write fires) write nothing, so
 *	 firing them again is as firing them once on the version updated.
 *	 Unless the update is HOT, its index entries are inserted.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/transam.h"
#include "access/xact.h"
#include "catalog/index.h"
#include "catalog/pg_am.h"
#include "catalog/pg_collation.h"
#include "catalog/pg_opfamily.h"
#include "catalog/pg_trigger.h"
#include "commands/trigger.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "nodes/bitmapset.h"
#include "pgstat.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/resowner.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "card.h"
#include "catalog.h"
#include "compat.h"
#include "write_direct.h"
#include "write_direct_policy.h"
#include "write_indexes.h"

/*
 * A table opened as a result relation for one kind of write of a batch
 * segment (PayDirectSegmentBegin): its executor state, result relation,
 * tuple slots and indexes (OpenResultIndexes), set up by the segment's
 * first such write and reused by the next ones while the catalog
 * generation it was set up at stands -- any invalidation of the ledger,
 * its primary key or the journal, trigger or index or privilege changed,
 * a VACUUM, ends it, and the next write sets it up again.  Each write
 * still takes its own snapshot and command, checks the policy and the
 * privileges and fires the triggers, as a statement would.
 */
typedef struct SharedResult
{
	bool		open;
	bool		in_use;			/* by a write not ended yet */
	uint64		generation;		/* the catalog's it was set up at */
	Relation	rel;			/* a reference of its own */
	Relation	pkey;			/* the ledger's primary key, or NULL */
	EState	   *estate;
	ResultRelInfo *result;
	TupleTableSlot *slot;
	TupleTableSlot *newslot;
	TupleTableSlot *conflict_slot;
	bool		indexes_open;	/* opened for the segment */
	bool		indexes_per_row;	/* opened for each write */
	/* the predicates of the partial indexes left closed while indexes_open */
	int			nclosed;
	ExprState **closed_predicates;
} SharedResult;

/*
 * The batch segment running, if any: its subtransaction's resource owner,
 * which owns every reference and pin of the shared results, and the memory
 * they live in, a child of the subtransaction's, which its abort frees.
 */
static struct
{
	bool		active;
	ResourceOwner owner;
	MemoryContext context;
	SharedResult ledger_insert;
	SharedResult ledger_update;
	SharedResult journal;
} segment;

/* The state of one direct write: the ledger opened as a result relation. */
typedef struct DirectWrite
{
	Relation	ledger;
	EState	   *estate;
	ResultRelInfo *result;
	const PayCatalog *catalog;
	PayDirectPolicy *policy;
	int			search_path_level;	/* PayPinSearchPath's, or -1 */
	SharedResult *shared;		/* the segment's, or NULL: set up for this write */
} DirectWrite;

static bool DirectInsert(FunctionCallInfo fcinfo, Datum bizno, PayStatus status,
						 const PaymentAmount *amount, bool *inserted, LedgerRow *row);
static void CopyLedgerRow(const PayCatalog *catalog, TupleTableSlot *slot, LedgerRow *row);

/*
 * The trigger functions as fired here, one FmgrInfo per trigger, kept while
 * the policy stands (the functions cache what they derive from the
 * trigger's arguments in fn_extra, as they do per statement); the arrays
 * grow with the ledger's triggers.
 */
static FmgrInfo *
TriggerFunction(PayDirectPolicy *policy, Trigger *trigger)
{
	for (int i = 0; i < policy->ntriggers; i++)
		if (policy->trigger_oids[i] == trigger->tgoid)
			return &policy->trigger_functions[i];
	if (policy->ntriggers == policy->trigger_capacity)
	{
		/* an FmgrInfo moves with the array: none is handed out across calls */
		policy->trigger_capacity = Max(8, 2 * policy->trigger_capacity);
		policy->trigger_oids = policy->trigger_oids == NULL ?
			MemoryContextAlloc(policy->context, policy->trigger_capacity * sizeof(Oid)) :
			repalloc(policy->trigger_oids, policy->trigger_capacity * sizeof(Oid));
		policy->trigger_functions = policy->trigger_functions == NULL ?
			MemoryContextAlloc(policy->context, policy->trigger_capacity * sizeof(FmgrInfo)) :
			repalloc(policy->trigger_functions, policy->trigger_capacity * sizeof(FmgrInfo));
	}
	fmgr_info_cxt(trigger->tgfoid, &policy->trigger_functions[policy->ntriggers],
				  policy->context);
	policy->trigger_oids[policy->ntriggers] = trigger->tgoid;
	return &policy->trigger_functions[policy->ntriggers++];
}

/*
 * Fire the ledger's row triggers of one timing for one event, as the trigger
 * manager does outside replica mode.  BEFORE: returns the tuple to write,
 * or NULL when a trigger skipped the write.
 */
static HeapTuple
FireRowTriggers(DirectWrite *write, TriggerEvent timing, TriggerEvent event,
				HeapTuple oldtuple, HeapTuple newtuple, Bitmapset *updatedcols)
{
	Relation	ledger = write->ledger;

	/*
	 * The result relation's copy, as the trigger manager reads it: a trigger
	 * that opens a relation may take in an invalidation of the ledger, whose
	 * rebuild frees ledger->trigdesc while this loop walks it.
	 */
	TriggerDesc *triggers = write->result->ri_TrigDesc;
	int			type_timing = timing == TRIGGER_EVENT_BEFORE ? TRIGGER_TYPE_BEFORE : TRIGGER_TYPE_AFTER;
	int			type_event = event == TRIGGER_EVENT_INSERT ? TRIGGER_TYPE_INSERT : TRIGGER_TYPE_UPDATE;

	for (int i = 0; triggers != NULL && i < triggers->numtriggers; i++)
	{
		Trigger    *trigger = &triggers->triggers[i];
		TriggerData data;
		LOCAL_FCINFO(fcinfo, 0);
		PgStat_FunctionCallUsage usage;
		Datum		result;

		if (!TRIGGER_TYPE_MATCHES(trigger->tgtype, TRIGGER_TYPE_ROW, type_timing, type_event) ||
			trigger->tgenabled == TRIGGER_FIRES_ON_REPLICA ||
			trigger->tgenabled == TRIGGER_DISABLED)
			continue;

		MemSet(&data, 0, sizeof(data));
		data.type = T_TriggerData;
		data.tg_event = event | TRIGGER_EVENT_ROW | timing;
		data.tg_relation = ledger;
		data.tg_trigtuple = event == TRIGGER_EVENT_INSERT ? newtuple : oldtuple;
		data.tg_newtuple = event == TRIGGER_EVENT_INSERT ? NULL : newtuple;
		data.tg_trigger = trigger;
		data.tg_updatedcols = updatedcols;

		InitFunctionCallInfoData(*fcinfo, TriggerFunction(write->policy, trigger), 0, InvalidOid,
								 (Node *) &data, NULL);
		pgstat_init_function_usage(fcinfo, &usage);
		result = FunctionCallInvoke(fcinfo);
		pgstat_end_function_usage(&usage, true);
		if (fcinfo->isnull)
			ereport(ERROR,
					(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
					 errmsg("trigger function %u returned null value",
							fcinfo->flinfo->fn_oid)));
		if (timing == TRIGGER_EVENT_BEFORE)
		{
			newtuple = (HeapTuple) DatumGetPointer(result);
			if (newtuple == NULL)
				return NULL;
		}
	}
	return newtuple;
}

/*
 * The segment's shared result for a write made under the current resource
 * owner, or NULL: outside a segment, in a subtransaction of an input's
 * own, whose end would release the references it took or report them, and
 * while another write uses it.
 */
static SharedResult *
SegmentResult(SharedResult *shared)
{
	/* a write made inside another's (a trigger's) has its own */
	if (!segment.active || CurrentResourceOwner != segment.owner || shared->in_use)
		return NULL;
	if (segment.context == NULL)
		segment.context = AllocSetContextCreate(CurTransactionContext, "pay batch segment",
												ALLOCSET_DEFAULT_SIZES);
	return shared;
}

/* Set up shared for rel, opened and locked: the reference is shared's now. */
static void
OpenSharedResult(SharedResult *shared, Relation rel, uint64 generation)
{
	MemoryContext caller_context = MemoryContextSwitchTo(segment.context);

	memset(shared, 0, sizeof(SharedResult));
	shared->rel = rel;
	shared->estate = CreateExecutorState();
	shared->result = makeNode(ResultRelInfo);
	InitResultRelInfo(shared->result, rel, 0, NULL, 0);
	shared->generation = generation;
	shared->open = true;
	MemoryContextSwitchTo(caller_context);
}

static void
CloseSharedResult(SharedResult *shared)
{
	if (!shared->open)
		return;
	PayCloseIndices(shared->result);
	if (shared->pkey != NULL)
		index_close(shared->pkey, NoLock);
	ExecResetTupleTable(shared->estate->es_tupleTable, false);
	FreeExecutorState(shared->estate);
	table_close(shared->rel, NoLock);
	memset(shared, 0, sizeof(SharedResult));
}

/*
 * A slot of the write's result relation: the shared result's own (kept),
 * made once, or a new one of the write's.
 */
static TupleTableSlot *
ResultSlot(SharedResult *shared, EState *estate, Relation rel, TupleTableSlot **kept,
		   const TupleTableSlotOps *ops)
{
	MemoryContext caller_context;

	if (shared == NULL)
		return ops == NULL ? table_slot_create(rel, &estate->es_tupleTable) :
			ExecInitExtraTupleSlot(estate, RelationGetDescr(rel), ops);
	if (*kept == NULL)
	{
		caller_context = MemoryContextSwitchTo(segment.context);
		*kept = ops == NULL ? table_slot_create(rel, &estate->es_tupleTable) :
			ExecInitExtraTupleSlot(estate, RelationGetDescr(rel), ops);
		MemoryContextSwitchTo(caller_context);
	}
	return *kept;
}

/*
 * The predicates of the indexes of result's table that PayOpenIndices left
 * closed, for the row it opened them for, ready to evaluate on the next
 * rows (as ExecInsertIndexTuples prepares a predicate); false when one of
 * them is no partial index.
 */
static bool
NoteClosedIndexes(SharedResult *shared, ResultRelInfo *result, EState *estate)
{
	List	   *indexes = RelationGetIndexList(result->ri_RelationDesc);
	ListCell   *lc;
	bool		partial = true;

	shared->closed_predicates = palloc(sizeof(ExprState *) * Max(list_length(indexes), 1));
	shared->nclosed = 0;
	foreach(lc, indexes)
	{
		bool		opened = false;
		Relation	index;
		List	   *predicate;

		for (int i = 0; i < result->ri_NumIndices && !opened; i++)
			opened = RelationGetRelid(result->ri_IndexRelationDescs[i]) == lfirst_oid(lc);
		if (opened)
			continue;
		/* the lock the executor takes on every index of a result relation */
		index = index_open(lfirst_oid(lc), RowExclusiveLock);
		predicate = RelationGetIndexPredicate(index);
		index_close(index, NoLock);
		if (predicate == NIL)
		{
			partial = false;
			break;
		}
		shared->closed_predicates[shared->nclosed++] = ExecPrepareQual(predicate, estate);
	}
	list_free(indexes);
	return partial;
}

/* Whether row satisfies the predicate of an index the segment left closed. */
static bool
WantsClosedIndex(SharedResult *shared, TupleTableSlot *row, EState *estate)
{
	ExprContext *econtext = GetPerTupleExprContext(estate);

	econtext->ecxt_scantuple = row;
	for (int i = 0; i < shared->nclosed; i++)
		if (ExecQual(shared->closed_predicates[i], econtext))
			return true;
	return false;
}

/*
 * Open the indexes of result for row, as PayOpenIndices does.  A shared
 * result opens them once, for its first row, and keeps them open while
 * each next row fails the predicate of every partial index left closed
 * (ExecInsertIndexTuples evaluates the predicates of those opened on each
 * row anyway): a ledger of payments has no entry in the index of refunds.
 * Otherwise they are opened for each write and closed at its end.
 */
static void
OpenResultIndexes(SharedResult *shared, ResultRelInfo *result, bool speculative,
				  TupleTableSlot *row, EState *estate)
{
	MemoryContext caller_context;

	if (shared == NULL || shared->indexes_per_row)
	{
		PayOpenIndices(result, speculative, row, estate);
		return;
	}
	if (shared->indexes_open)
	{
		if (!WantsClosedIndex(shared, row, estate))
			return;
		/* an entry in an index left closed: opened for each write from now on */
		PayCloseIndices(result);
		shared->indexes_open = false;
		shared->indexes_per_row = true;
		PayOpenIndices(result, speculative, row, estate);
		return;
	}
	caller_context = MemoryContextSwitchTo(segment.context);
	PayOpenIndices(result, speculative, row, estate);
	shared->indexes_open = NoteClosedIndexes(shared, result, estate);
	shared->indexes_per_row = !shared->indexes_open;
	MemoryContextSwitchTo(caller_context);
}

/* The end of one write of a result, shared or not (then freed). */
static void
EndResultWrite(SharedResult *shared, EState *estate, ResultRelInfo *result)
{
	if (shared == NULL)
	{
		PayCloseIndices(result);
		ExecResetTupleTable(estate->es_tupleTable, false);
		FreeExecutorState(estate);
		return;
	}
	shared->in_use = false;
	if (!shared->indexes_open)
		PayCloseIndices(result);
	/* the buffer pins and tuples of this write */
	if (shared->slot != NULL)
		ExecClearTuple(shared->slot);
	if (shared->newslot != NULL)
		ExecClearTuple(shared->newslot);
	if (shared->conflict_slot != NULL)
		ExecClearTuple(shared->conflict_slot);
	ResetPerTupleExprContext(estate);
}

/*
 * A batch segment begins, in its subtransaction: the direct writes made
 * under its resource owner until PayDirectSegmentEnd share one executor
 * state per table and kind of write.  false (and nothing shared) inside
 * another segment: a batch called by an input of a batch.
 */
bool
PayDirectSegmentBegin(void)
{
	if (segment.active)
		return false;
	memset(&segment, 0, sizeof(segment));
	segment.active = true;
	segment.owner = CurrentResourceOwner;
	return true;
}

/* The segment's inputs are done: close what they shared, before it commits. */
void
PayDirectSegmentEnd(void)
{
	CloseSharedResult(&segment.ledger_insert);
	CloseSharedResult(&segment.ledger_update);
	CloseSharedResult(&segment.journal);
	if (segment.context != NULL)
		MemoryContextDelete(segment.context);
	memset(&segment, 0, sizeof(segment));
}

/*
 * The segment failed: forget what it shared.  The abort of its
 * subtransaction, which follows, releases the references, pins and locks
 * of its resource owner and frees its memory, as it does for a statement's.
 */
void
PayDirectSegmentAbandon(void)
{
	memset(&segment, 0, sizeof(segment));
}

/*
 * Open the ledger for a direct write, or return false (nothing opened) when
 * the write must go through SQL (PayDirectLedgerWriteAllowed).  When
 * anything the write evaluates could look a name up, search_path is pinned
 * as for SQL until EndDirectWrite.
 */
static bool
BeginDirectWrite(FunctionCallInfo fcinfo, CmdType operation, DirectWrite *write)
{
	const PayCatalog *catalog = PayCatalogGetTables(fcinfo);
	SharedResult *shared;
	bool		reused;

	if (!PayDirectLedgerWriteAllowed(PayDirectPolicyGet(fcinfo), catalog, operation, NULL))
		return false;

	shared = SegmentResult(operation == CMD_INSERT ? &segment.ledger_insert :
						   &segment.ledger_update);
	/* the segment's result, set up for the tables as they still are */
	reused = shared != NULL && shared->open && shared->generation == catalog->generation;
	/*
	 * The lock the statement would take, kept to the end of the transaction
	 * (the segment's first write took it)
	 */
	write->ledger = reused ? shared->rel : table_open(catalog->ledger, RowExclusiveLock);
	/* what the lock brought in: the ledger (and its indexes) as they are now */
	write->policy = PayDirectPolicyGet(fcinfo);
	write->catalog = catalog = PayCatalogGetTables(fcinfo);
	if (!PayDirectLedgerWriteAllowed(write->policy, catalog, operation, write->ledger))
	{
		if (!reused)
			table_close(write->ledger, NoLock);
		return false;
	}
	if (reused && shared->generation != catalog->generation)
	{
		/* the checks took a change of the tables in: the result anew */
		reused = false;
		write->ledger = table_open(catalog->ledger, RowExclusiveLock);
	}
	/* as the executor checks a result relation before it reads a row */
	CheckCmdReplicaIdentity(write->ledger, operation);

	write->shared = shared;
	if (shared != NULL && !reused)
	{
		CloseSharedResult(shared);
		OpenSharedResult(shared, write->ledger, catalog->generation);
	}
	if (shared != NULL)
	{
		shared->in_use = true;
		write->estate = shared->estate;
		write->result = shared->result;
	}
	else
	{
		write->estate = CreateExecutorState();
		write->result = makeNode(ResultRelInfo);
		/* its indexes are opened once the row written is known (PayOpenIndices) */
		InitResultRelInfo(write->result, write->ledger, 0, NULL, 0);
	}
	/* a DBA's default, domain check or index may look a name up */
	write->search_path_level = write->policy->ledger_kind == PAY_EXPRESSION_PLAIN ? -1 :
		PayPinSearchPath(catalog);

	/* a statement's snapshot and command, as SPI takes them */
	CommandCounterIncrement();
	PushActiveSnapshot(GetTransactionSnapshot());
	write->estate->es_snapshot = GetActiveSnapshot();
	write->estate->es_output_cid = GetCurrentCommandId(true);
	return true;
}

/* The end of a direct write: later reads of the transaction see it. */
static void
EndDirectWrite(DirectWrite *write)
{
	PopActiveSnapshot();
	EndResultWrite(write->shared, write->estate, write->result);
	if (write->shared == NULL)
		table_close(write->ledger, NoLock);
	if (write->search_path_level >= 0)
		AtEOXact_GUC(true, write->search_path_level);
	CommandCounterIncrement();
}

/* A trigger of this command changed the row this command is to update. */
static void
RaiseTriggeredChange(void)
{
	ereport(ERROR,
			(errcode(ERRCODE_TRIGGERED_DATA_CHANGE_VIOLATION),
			 errmsg("tuple to be updated was already modified by an operation triggered by the current command")));
}

static void
RaiseSerializationFailure(const char *what)
{
	ereport(ERROR,
			(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
			 errmsg("could not serialize access due to concurrent %s", what),
			 errhint("Another transaction changed this payment meanwhile: retry the whole transaction.")));
}

/*
 * The domain check of amount or currency, when its column is of a domain
 * (the policy trusts its checks): what the executor's coercion does.
 */
static void
CheckDomain(DirectWrite *write, LedgerColumn column, Datum value, bool isnull, void **cache)
{
	Oid			type = TupleDescAttr(RelationGetDescr(write->ledger),
									 write->catalog->ledger_attnums[column] - 1)->atttypid;

	/* a cache exists once a check ran: the type is a domain */
	if (*cache != NULL || get_typtype(type) == TYPTYPE_DOMAIN)
		domain_check(value, isnull, type, cache, write->policy->context);
}

/*
 * The new payment's row: the four values, every other column its default.
 */
static HeapTuple
FormNewRow(DirectWrite *write, Datum bizno, PayStatus status, bool amount_null,
		   Datum amount, bool currency_null, Datum currency)
{
	TupleDesc	tupdesc = RelationGetDescr(write->ledger);
	const AttrNumber *col = write->catalog->ledger_attnums;
	ExprContext *econtext = GetPerTupleExprContext(write->estate);
	Datum	   *values = palloc(sizeof(Datum) * tupdesc->natts);
	bool	   *nulls = palloc(sizeof(bool) * tupdesc->natts);

	if (write->policy->default_states == NULL)
	{
		MemoryContext old_context = MemoryContextSwitchTo(write->policy->context);
		ExprState **states = palloc0(sizeof(ExprState *) * tupdesc->natts);

		for (int a = 0; a < tupdesc->natts; a++)
			if (write->policy->ledger_defaults[a] != NULL)
				states[a] = ExecInitExpr(write->policy->ledger_defaults[a], NULL);
		MemoryContextSwitchTo(old_context);
		write->policy->default_states = states; /* only once complete */
	}

	for (int a = 0; a < tupdesc->natts; a++)
	{
		nulls[a] = true;
		values[a] = (Datum) 0;
		if (write->policy->default_states[a] != NULL)
			values[a] = ExecEvalExprSwitchContext(write->policy->default_states[a], econtext,
												  &nulls[a]);
	}
	values[col[LEDGER_BIZNO] - 1] = bizno;
	nulls[col[LEDGER_BIZNO] - 1] = false;
	values[col[LEDGER_STATUS] - 1] = PayStatusGetDatum(write->catalog, status);
	nulls[col[LEDGER_STATUS] - 1] = false;
	values[col[LEDGER_AMOUNT] - 1] = amount;
	nulls[col[LEDGER_AMOUNT] - 1] = amount_null;
	values[col[LEDGER_CURRENCY] - 1] = currency;
	nulls[col[LEDGER_CURRENCY] - 1] = currency_null;
	CheckDomain(write, LEDGER_AMOUNT, amount, amount_null, &write->policy->amount_domain_cache);
	CheckDomain(write, LEDGER_CURRENCY, currency, currency_null, &write->policy->currency_domain_cache);
	return heap_form_tuple(tupdesc, values, nulls);
}

/*
 * Under REPEATABLE READ and SERIALIZABLE, a conflicting row the snapshot
 * cannot see was committed after it began: ON CONFLICT DO NOTHING fails
 * there rather than do nothing about a row the transaction never saw.
 */
static void
CheckConflictVisible(DirectWrite *write, ItemPointer conflict)
{
	TupleTableSlot *slot;
	bool		isnull;
	TransactionId xmin;

	if (!IsolationUsesXactSnapshot())
		return;
	slot = ResultSlot(write->shared, write->estate, write->ledger,
					  write->shared != NULL ? &write->shared->conflict_slot : NULL, NULL);
	if (!table_tuple_fetch_row_version(write->ledger, conflict, SnapshotAny, slot))
		elog(ERROR, "failed to fetch conflicting tuple for ON CONFLICT");
	if (!table_tuple_satisfies_snapshot(write->ledger, slot, write->estate->es_snapshot))
	{
		xmin = DatumGetTransactionId(slot_getsysattr(slot, MinTransactionIdAttributeNumber,
													 &isnull));
		if (!TransactionIdIsCurrentTransactionId(xmin))
			RaiseSerializationFailure("update");
	}
	ExecClearTuple(slot);
}

/*
 * Insert the row in slot as INSERT ... ON CONFLICT DO NOTHING inserts it,
 * its index entries with it; false when a row with one of its unique keys
 * exists.
 *
 * The executor checks the unique indexes before it inserts, to spare a
 * speculative insertion it would have to kill.  The API inserts a row only
 * after its probe found none, so a conflict is rare: the check is made
 * after one, where it waits for the other inserter and finds its row, as
 * the executor's own retry does.
 */
static bool
InsertSpeculatively(DirectWrite *write, TupleTableSlot *slot)
{
	bool		after_conflict = false;

	for (;;)
	{
		ItemPointerData conflict;
		TransactionId xid;
		uint32		token;
		bool		speculative_conflict = false;

		CHECK_FOR_INTERRUPTS();
		/* waits for an in-progress inserter of the same key */
		if (after_conflict &&
			!PayExecCheckIndexConstraints(write->result, slot, write->estate, &conflict, NIL))
		{
			CheckConflictVisible(write, &conflict);
			return false;
		}
		xid = GetCurrentTransactionId();
		token = SpeculativeInsertionLockAcquire(xid);
		table_tuple_insert_speculative(write->ledger, slot, write->estate->es_output_cid,
									   0, NULL, token);
		PayExecInsertIndexTuples(write->result, slot, write->estate, false, true,
								 &speculative_conflict, NIL, false);
		table_tuple_complete_speculative(write->ledger, slot, token, !speculative_conflict);
		SpeculativeInsertionLockRelease(xid);
		if (!speculative_conflict)
			return true;
		after_conflict = true;
	}
}

/*
 * Insert a new payment as INSERT ... ON CONFLICT DO NOTHING; *inserted is
 * false when a row with one of its unique keys exists (or a trigger skipped
 * it).  Returns false, having done nothing, when the write must go through
 * SQL.
 */
bool
PayDirectInsert(FunctionCallInfo fcinfo, Datum bizno, PayStatus status,
				const PaymentAmount *amount, bool *inserted)
{
	return DirectInsert(fcinfo, bizno, status, amount, inserted, NULL);
}

/* PayDirectInsert's and PayDirectInsertRead's insert; row may be NULL. */
static bool
DirectInsert(FunctionCallInfo fcinfo, Datum bizno, PayStatus status,
			 const PaymentAmount *amount, bool *inserted, LedgerRow *row)
{
	DirectWrite write;
	HeapTuple	tuple;
	TupleTableSlot *slot;

	if (!BeginDirectWrite(fcinfo, CMD_INSERT, &write))
		return false;

	*inserted = false;
	tuple = FormNewRow(&write, bizno, status, !amount->has_amount, amount->amount,
					   !amount->has_currency, amount->currency);
	tuple = FireRowTriggers(&write, TRIGGER_EVENT_BEFORE, TRIGGER_EVENT_INSERT,
							NULL, tuple, NULL);
	if (tuple != NULL)
	{
		slot = ResultSlot(write.shared, write.estate, write.ledger,
						  write.shared != NULL ? &write.shared->slot : NULL, NULL);
		ExecForceStoreHeapTuple(tuple, slot, false);
		if (RelationGetDescr(write.ledger)->constr)
			ExecConstraints(write.result, slot, write.estate);
		OpenResultIndexes(write.shared, write.result, true, slot, write.estate);

		*inserted = InsertSpeculatively(&write, slot);
		if (*inserted)
			FireRowTriggers(&write, TRIGGER_EVENT_AFTER, TRIGGER_EVENT_INSERT, NULL,
							ExecFetchSlotHeapTuple(slot, true, NULL), NULL);
		if (*inserted && row != NULL)
			CopyLedgerRow(write.catalog, slot, row);
	}
	EndDirectWrite(&write);
	return true;
}

/* The WHERE clause of the settling UPDATE, on one version of the row. */
static bool
SettleApplies(DirectWrite *write, const PaySettleWrite *settle, TupleTableSlot *slot)
{
	const AttrNumber *col = write->catalog->ledger_attnums;
	bool		isnull;
	Datum		status = slot_getattr(slot, col[LEDGER_STATUS], &isnull);
	Datum		bizno;

	if (isnull || DatumGetObjectId(status) != write->catalog->status_labels[settle->from])
		return false;
	/*
	 * The index condition too, as EvalPlanQual checks it on a newer version,
	 * in the column's collation as the WHERE clause compares.
	 */
	bizno = slot_getattr(slot, col[LEDGER_BIZNO], &isnull);
	if (isnull ||
		!DatumGetBool(DirectFunctionCall2Coll(texteq,
											  TupleDescAttr(RelationGetDescr(write->ledger),
															col[LEDGER_BIZNO] - 1)->attcollation,
											  bizno, settle->bizno)))
		return false;
	if (!settle->attempt_null)
	{
		Datum		attempt = slot_getattr(slot, col[LEDGER_ATTEMPT], &isnull);

		if (isnull || DatumGetInt32(attempt) != settle->attempt)
			return false;
	}
	return true;
}

/*
 * Find the row of bizno visible to snapshot through the ledger's primary
 * key pkey, into slot (which keeps its buffer pinned); false when there is
 * none.  The one probe of the ledger: PayDirectProbe's and the settling
 * UPDATE's.
 */
static bool
FetchByKey(Relation ledger, Relation pkey, Snapshot snapshot, Datum bizno,
				  TupleTableSlot *slot)
{
	IndexScanDesc scan;
	ScanKeyData key;
	bool		found;

	ScanKeyEntryInitialize(&key, 0, 1, BTEqualStrategyNumber, InvalidOid,
						   pkey->rd_indcollation[0], F_TEXTEQ, bizno);
	scan = PayIndexBeginScan(ledger, pkey, snapshot, 1, 0);
	index_rescan(scan, &key, 1, NULL, 0);
	found = index_getnext_slot(scan, ForwardScanDirection, slot);
	index_endscan(scan);
	return found;
}

/* The row of bizno visible to the settling UPDATE's snapshot, into slot. */
static bool
FetchRow(DirectWrite *write, Datum bizno, TupleTableSlot *slot)
{
	SharedResult *shared = write->shared;
	Relation	pkey;
	bool		found;

	if (shared != NULL && shared->pkey == NULL)
		shared->pkey = index_open(write->catalog->ledger_pkey, AccessShareLock);
	pkey = shared != NULL ? shared->pkey :
		index_open(write->catalog->ledger_pkey, AccessShareLock);
	found = FetchByKey(write->ledger, pkey, write->estate->es_snapshot, bizno, slot);
	if (shared == NULL)
		index_close(pkey, NoLock);	/* held to the end, as the executor holds it */
	return found;
}

/*
 * After a concurrent writer changed the row in slot: lock its latest
 * version, as the executor does when an UPDATE meets a concurrent update
 * (following the chain in READ COMMITTED, a serialization failure
 * otherwise); on return slot holds the locked version.  false when there is
 * nothing to update: deleted, or no longer matching.
 */
static bool
LockRowForUpdate(DirectWrite *write, const PaySettleWrite *settle, TupleTableSlot *slot,
				 LockTupleMode mode)
{
	ItemPointerData tid = slot->tts_tid;
	TM_FailureData failure;
	TM_Result	result;

	result = table_tuple_lock(write->ledger, &tid, write->estate->es_snapshot, slot,
							  write->estate->es_output_cid, mode, LockWaitBlock,
							  IsolationUsesXactSnapshot() ? 0 : TUPLE_LOCK_FLAG_FIND_LAST_VERSION,
							  &failure);
	switch (result)
	{
		case TM_Ok:
			/* a newer version (READ COMMITTED): the WHERE clause again */
			return !failure.traversed || SettleApplies(write, settle, slot);
		case TM_SelfModified:
			if (failure.cmax != write->estate->es_output_cid)
				RaiseTriggeredChange();
			return false;
		case TM_Updated:
			if (IsolationUsesXactSnapshot())
				RaiseSerializationFailure("update");
			elog(ERROR, "unexpected table_tuple_lock status: %u", result);
			break;
		case TM_Deleted:
			if (IsolationUsesXactSnapshot())
				RaiseSerializationFailure("delete");
			return false;
		default:
			elog(ERROR, "unexpected table_tuple_lock status: %u", result);
	}
	return false;
}

/*
 * Tell the index AMs which indexes the UPDATE left unchanged (the hint for
 * bottom-up deletion), as the executor works it out from the statement's
 * updated columns, which a direct write has no range table entry for.
 */
static void
NoteUnchangedIndexes(ResultRelInfo *result, Bitmapset *updatedcols)
{
	for (int i = 0; i < result->ri_NumIndices; i++)
	{
		IndexInfo  *info = result->ri_IndexRelationInfo[i];
		bool		unchanged = info->ii_Expressions == NIL && info->ii_Predicate == NIL;

		for (int k = 0; unchanged && k < info->ii_NumIndexAttrs; k++)
			unchanged = !bms_is_member(info->ii_IndexAttrNumbers[k] -
									   FirstLowInvalidHeapAttributeNumber, updatedcols);
		info->ii_CheckedUnchanged = true;
		info->ii_IndexUnchanged = unchanged;
	}
}

/*
 * Settle a PROCESSING payment as the UPDATE above; *settled is false when
 * no row matched (or a trigger skipped it).  Returns false, having done
 * nothing, when the write must go through SQL.
 */
bool
PayDirectSettle(FunctionCallInfo fcinfo, const PaySettleWrite *settle, bool *settled)
{
	DirectWrite write;
	const AttrNumber *col;
	TupleTableSlot *slot;
	HeapTuple	oldtuple;
	HeapTuple	newtuple;
	Bitmapset  *updatedcols = NULL;
	int			columns[5];
	Datum		values[5];
	bool		nulls[5];
	LockTupleMode mode;
	TM_FailureData failure;
	PayUpdateIndexes update_indexes;

	if (!BeginDirectWrite(fcinfo, CMD_UPDATE, &write))
		return false;

	*settled = false;
	col = write.catalog->ledger_attnums;
	columns[0] = col[LEDGER_STATUS];
	columns[1] = col[LEDGER_CHANNEL_REF];
	columns[2] = col[LEDGER_LAST_ERROR];
	columns[3] = col[LEDGER_NOTE];
	columns[4] = col[LEDGER_RESPONSE];
	for (int i = 0; i < 5; i++)
		updatedcols = bms_add_member(updatedcols, columns[i] - FirstLowInvalidHeapAttributeNumber);
	mode = bms_overlap(updatedcols, RelationGetIndexAttrBitmap(write.ledger, INDEX_ATTR_BITMAP_KEY)) ?
		LockTupleExclusive : LockTupleNoKeyExclusive;

	slot = ResultSlot(write.shared, write.estate, write.ledger,
					  write.shared != NULL ? &write.shared->slot : NULL, NULL);
	if (!FetchRow(&write, settle->bizno, slot) || !SettleApplies(&write, settle, slot))
	{
		EndDirectWrite(&write);
		return true;
	}
	for (;;)
	{
		bool		isnull = false;
		TupleTableSlot *newslot;
		TM_Result	result;

		oldtuple = ExecFetchSlotHeapTuple(slot, true, NULL);
		values[0] = PayStatusGetDatum(write.catalog, settle->target);
		nulls[0] = false;
		values[1] = settle->channel_ref_null ?
			heap_getattr(oldtuple, col[LEDGER_CHANNEL_REF], RelationGetDescr(write.ledger), &isnull) :
			settle->channel_ref;
		nulls[1] = settle->channel_ref_null && isnull;
		values[2] = settle->last_error_null ?
			heap_getattr(oldtuple, col[LEDGER_LAST_ERROR], RelationGetDescr(write.ledger), &isnull) :
			settle->last_error;
		nulls[2] = settle->last_error_null && isnull;
		values[3] = settle->last_error;
		nulls[3] = settle->last_error_null;
		values[4] = settle->response;
		nulls[4] = settle->response_null;
		newtuple = heap_modify_tuple_by_cols(oldtuple, RelationGetDescr(write.ledger),
											 5, columns, values, nulls);
		newtuple = FireRowTriggers(&write, TRIGGER_EVENT_BEFORE, TRIGGER_EVENT_UPDATE,
								   oldtuple, newtuple, updatedcols);
		if (newtuple == NULL)
			break;				/* a trigger skipped the write */

		newslot = ResultSlot(write.shared, write.estate, write.ledger,
							 write.shared != NULL ? &write.shared->newslot : NULL, NULL);
		ExecForceStoreHeapTuple(newtuple, newslot, false);
		if (RelationGetDescr(write.ledger)->constr)
			ExecConstraints(write.result, newslot, write.estate);
		result = table_tuple_update(write.ledger, &slot->tts_tid, newslot,
									write.estate->es_output_cid, write.estate->es_snapshot,
									InvalidSnapshot, true, &failure, &mode, &update_indexes);
		if (result == TM_SelfModified)
		{
			/* changed by this command: by a trigger, or settled by it already */
			if (failure.cmax != write.estate->es_output_cid)
				RaiseTriggeredChange();
			break;
		}
		if (result == TM_Updated || result == TM_Deleted)
		{
			/* a concurrent writer was first: its version, locked, decides */
			if (!LockRowForUpdate(&write, settle, slot, mode))
				break;
			continue;
		}
		if (result != TM_Ok)
			elog(ERROR, "unexpected table_tuple_update status: %u", result);
		if (PayUpdateIndexesAny(update_indexes))
		{
			OpenResultIndexes(write.shared, write.result, false, newslot, write.estate);
			NoteUnchangedIndexes(write.result, updatedcols);
			PayExecInsertIndexTuples(write.result, newslot, write.estate, true, false, NULL, NIL,
									 PayUpdateIndexesOnlySummarizing(update_indexes));
		}
		FireRowTriggers(&write, TRIGGER_EVENT_AFTER, TRIGGER_EVENT_UPDATE, oldtuple,
						ExecFetchSlotHeapTuple(newslot, true, NULL), updatedcols);
		*settled = true;
		break;
	}
	EndDirectWrite(&write);
	return true;
}

/*
 * The plain read of the row of bizno: a probe of the primary key under the
 * snapshot a new statement would take (a fresh one in READ COMMITTED, the
 * transaction's otherwise), with the predicate locks of SERIALIZABLE taken
 * by the index and heap access methods.  false when there is no row.  As
 * the executor would for a SELECT of the row, it needs SELECT on the ledger
 * (or on all its columns) and keeps its lock until the transaction ends, so
 * that no ALTER TABLE rewrites the ledger under a transaction that read it.
 */
bool
PayDirectProbe(FunctionCallInfo fcinfo, Datum bizno, LedgerRow *row)
{
	Relation	ledger = table_open(PayCatalogGetTables(fcinfo)->ledger, AccessShareLock);
	/* the columns as they are now that the ledger is locked */
	const PayCatalog *catalog = PayCatalogGetTables(fcinfo);
	Relation	pkey;
	TupleTableSlot *slot;
	Snapshot	snapshot;
	bool		found;

	if (pg_class_aclcheck(catalog->ledger, GetUserId(), ACL_SELECT) != ACLCHECK_OK &&
		pg_attribute_aclcheck_all(catalog->ledger, GetUserId(), ACL_SELECT,
								  ACLMASK_ALL) != ACLCHECK_OK)
		aclcheck_error(ACLCHECK_NO_PRIV, OBJECT_TABLE, RelationGetRelationName(ledger));
	pkey = index_open(catalog->ledger_pkey, AccessShareLock);
	slot = table_slot_create(ledger, NULL);

	/* see this transaction's own earlier writes, as a statement would */
	CommandCounterIncrement();
	snapshot = RegisterSnapshot(GetTransactionSnapshot());

	found = FetchByKey(ledger, pkey, snapshot, bizno, slot);
	if (found)
		CopyLedgerRow(catalog, slot, row);
	UnregisterSnapshot(snapshot);
	ExecDropSingleTupleTableSlot(slot);
	index_close(pkey, NoLock);
	table_close(ledger, NoLock);
	return found;
}

/*
 * Append one row to the journal, already opened and locked, as logical
 * replication's apply inserts a row: NOT NULL and CHECK constraints, heap,
 * then every index.  values and nulls are indexed by JournalColumn (a
 * column the journal lacks, of a version before the answer's, is left
 * out).  The journal's one INSERT trigger, its guard (the policy allows no
 * other), is not fired: on INSERT it refuses only a row the extension's
 * own code is not writing, and returns this one unchanged.
 */
void
PayDirectJournalInsert(const PayCatalog *catalog, Relation journal,
					   const Datum *values, const bool *nulls)
{
	TupleDesc	tupdesc = RelationGetDescr(journal);
	SharedResult *shared = SegmentResult(&segment.journal);
	EState	   *estate;
	ResultRelInfo *result_rel;
	TupleTableSlot *slot;

	/* the segment's result, set up for the journal as it still is */
	if (shared != NULL && shared->open &&
		(shared->generation != catalog->generation || shared->rel != journal))
		CloseSharedResult(shared);
	if (shared != NULL && !shared->open)
		OpenSharedResult(shared, table_open(RelationGetRelid(journal), RowExclusiveLock),
						 catalog->generation);
	if (shared != NULL)
	{
		shared->in_use = true;
		estate = shared->estate;
		result_rel = shared->result;
	}
	else
	{
		estate = CreateExecutorState();
		result_rel = makeNode(ResultRelInfo);
		InitResultRelInfo(result_rel, journal, 0, NULL, 0);
	}
	slot = ResultSlot(shared, estate, journal, shared != NULL ? &shared->slot : NULL,
					  &TTSOpsVirtual);

	ExecClearTuple(slot);
	memset(slot->tts_isnull, true, sizeof(bool) * tupdesc->natts);
	for (int i = 0; i < JOURNAL_COLUMNS; i++)
	{
		if (catalog->journal_attnums[i] == InvalidAttrNumber)
			continue;
		slot->tts_values[catalog->journal_attnums[i] - 1] = values[i];
		slot->tts_isnull[catalog->journal_attnums[i] - 1] = nulls[i];
	}
	ExecStoreVirtualTuple(slot);

	if (tupdesc->constr)
		ExecConstraints(result_rel, slot, estate);
	table_tuple_insert(journal, slot, GetCurrentCommandId(true), 0, NULL);
	OpenResultIndexes(shared, result_rel, false, slot, estate);
	PayExecInsertIndexTuples(result_rel, slot, estate, false, false, NULL, NIL, false);

	EndResultWrite(shared, estate, result_rel);
}

/*
 * Copy the columns a LedgerRow holds out of the ledger row in slot, into
 * the current memory context.
 */
static void
CopyLedgerRow(const PayCatalog *catalog, TupleTableSlot *slot, LedgerRow *row)
{
	const AttrNumber *col = catalog->ledger_attnums;
	bool		isnull;

	row->bizno = datumCopy(slot_getattr(slot, col[LEDGER_BIZNO], &isnull), false, -1);
	row->status = PayStatusFromLabel(catalog,
									 DatumGetObjectId(slot_getattr(slot, col[LEDGER_STATUS],
																   &isnull)));
	row->amount = slot_getattr(slot, col[LEDGER_AMOUNT], &row->amount_null);
	if (!row->amount_null)
		row->amount = datumCopy(row->amount, false, -1);
	row->currency = slot_getattr(slot, col[LEDGER_CURRENCY], &row->currency_null);
	if (!row->currency_null)
		row->currency = datumCopy(row->currency, false, -1);
	row->attempt = DatumGetInt32(slot_getattr(slot, col[LEDGER_ATTEMPT], &isnull));
	row->channel_ref = slot_getattr(slot, col[LEDGER_CHANNEL_REF], &row->channel_ref_null);
	if (!row->channel_ref_null)
		row->channel_ref = datumCopy(row->channel_ref, false, -1);
	row->response_null = true;
	if (col[LEDGER_RESPONSE] != InvalidAttrNumber)
		row->response = slot_getattr(slot, col[LEDGER_RESPONSE], &row->response_null);
	if (!row->response_null)
		row->response = datumCopy(row->response, false, -1);
}

/*
 * PayDirectInsert, and when the row went in, the row as written (after the
 * BEFORE triggers: what a probe of its bizNo would read next, since the
 * ledger's own AFTER trigger, the only one a direct write fires, does not
 * change it) in *row.
 */
bool
PayDirectInsertRead(FunctionCallInfo fcinfo, Datum bizno, PayStatus status,
					const PaymentAmount *amount, bool *inserted, LedgerRow *row)
{
	return DirectInsert(fcinfo, bizno, status, amount, inserted, row);
}

/* Whether index clause qual is implied by prefix = $1 AND biz_id = $2. */
static bool
ImpliedByOrderEquality(const PayCatalog *catalog, Node *qual)
{
	const AttrNumber *col = catalog->ledger_attnums;
	NullTest   *test = (NullTest *) qual;
	Var		   *var;

	if (!IsA(qual, NullTest) || test->nulltesttype != IS_NOT_NULL || test->argisrow ||
		!IsA(test->arg, Var))
		return false;
	var = (Var *) test->arg;
	return var->varattno == col[LEDGER_PREFIX] || var->varattno == col[LEDGER_BIZ_ID];
}

/*
 * Whether index of ledger answers "prefix = $1 AND biz_id = $2" with the
 * rows the statement selects, as the planner would use it: a valid unique
 * btree on exactly (prefix, biz_id), of text's default operator family,
 * each key in its column's collation (the collation the WHERE clause
 * compares in), no expression, a predicate the clause implies (the
 * ledger's own: biz_id IS NOT NULL).
 */
static bool
AnswersOrderEquality(const PayCatalog *catalog, Relation ledger, Relation index)
{
	const AttrNumber *col = catalog->ledger_attnums;
	Form_pg_index form = index->rd_index;
	TupleDesc	tupdesc = RelationGetDescr(ledger);
	List	   *predicate;
	ListCell   *lc;

	if (index->rd_rel->relam != BTREE_AM_OID || !form->indisvalid || !form->indisunique ||
		form->indnkeyatts != 2 ||
		form->indkey.values[0] != col[LEDGER_PREFIX] ||
		form->indkey.values[1] != col[LEDGER_BIZ_ID] ||
		RelationGetIndexExpressions(index) != NIL)
		return false;
	for (int k = 0; k < 2; k++)
		if (index->rd_opfamily[k] != TEXT_BTREE_FAM_OID ||
			index->rd_indcollation[k] !=
			TupleDescAttr(tupdesc, form->indkey.values[k] - 1)->attcollation)
			return false;
	predicate = RelationGetIndexPredicate(index);
	foreach(lc, predicate)
		if (!ImpliedByOrderEquality(catalog, lfirst(lc)))
			return false;
	return true;
}

/*
 * The ledger's index of business actions (AnswersOrderEquality), found
 * once per catalog generation (an index created or dropped is an
 * invalidation of the ledger); InvalidOid when it has none.
 */
static Oid
OrderIndex(const PayCatalog *catalog, Relation ledger)
{
	static Oid	order_index = InvalidOid;
	static uint64 order_index_generation = 0;
	List	   *indexes;
	ListCell   *lc;

	if (order_index_generation == catalog->generation)
		return order_index;
	order_index = InvalidOid;
	indexes = RelationGetIndexList(ledger);
	foreach(lc, indexes)
	{
		Relation	index = index_open(lfirst_oid(lc), AccessShareLock);
		bool		answers = AnswersOrderEquality(catalog, ledger, index);

		index_close(index, NoLock);
		if (answers)
		{
			order_index = lfirst_oid(lc);
			break;
		}
	}
	list_free(indexes);
	order_index_generation = catalog->generation;
	return order_index;
}

/*
 * The row of business action (prefix, biz_id), as
 *
 *		SELECT status, amount, currency, attempt, bizno FROM pay_ledger
 *		WHERE prefix = $1 AND biz_id = $2
 *
 * reads it through the unique index on (prefix, biz_id): under a new
 * statement's snapshot, the predicate locks of SERIALIZABLE taken by the
 * access methods, the ledger and the index locked to the transaction's end
 * as the executor locks them; *found is false when there is no such row.
 * Returns false, having read nothing, when the read must be the statement
 * (PayDirectLedgerReadAllowed; or no index answers it, where the planner
 * would choose another plan).
 */
bool
PayDirectFindOrder(FunctionCallInfo fcinfo, Datum prefix, Datum biz_id, LedgerRow *row,
				   bool *found)
{
	const PayCatalog *catalog = PayCatalogGetTables(fcinfo);
	Relation	ledger;
	Relation	index;
	Oid			index_oid;
	TupleTableSlot *slot;
	Snapshot	snapshot;
	IndexScanDesc scan;
	ScanKeyData keys[2];

	if (!PayDirectLedgerReadAllowed(PayDirectPolicyGet(fcinfo), catalog, NULL))
		return false;
	ledger = table_open(catalog->ledger, AccessShareLock);
	/* the ledger, its indexes and the verdict as they are now it is locked */
	catalog = PayCatalogGetTables(fcinfo);
	if (!PayDirectLedgerReadAllowed(PayDirectPolicyGet(fcinfo), catalog, ledger) ||
		!OidIsValid(index_oid = OrderIndex(catalog, ledger)))
	{
		table_close(ledger, NoLock);
		return false;
	}
	index = index_open(index_oid, AccessShareLock);
	slot = table_slot_create(ledger, NULL);

	/* see this transaction's own earlier writes, as a statement would */
	CommandCounterIncrement();
	snapshot = RegisterSnapshot(GetTransactionSnapshot());

	ScanKeyEntryInitialize(&keys[0], 0, 1, BTEqualStrategyNumber, InvalidOid,
						   index->rd_indcollation[0], F_TEXTEQ, prefix);
	ScanKeyEntryInitialize(&keys[1], 0, 2, BTEqualStrategyNumber, InvalidOid,
						   index->rd_indcollation[1], F_TEXTEQ, biz_id);
	scan = PayIndexBeginScan(ledger, index, snapshot, 2, 0);
	index_rescan(scan, keys, 2, NULL, 0);
	*found = index_getnext_slot(scan, ForwardScanDirection, slot);
	if (*found)
		CopyLedgerRow(catalog, slot, row);
	index_endscan(scan);

	UnregisterSnapshot(snapshot);
	ExecDropSingleTupleTableSlot(slot);
	index_close(index, NoLock);
	table_close(ledger, NoLock);
	return true;
}

/*
 * Whether the card flow's columns an INSERT of its row sets beyond a
 * payment's are of exactly the types it writes (the policy judges a
 * payment's; a column of another type takes the SQL path, where the
 * executor coerces).
 */
static bool
CardColumnsAsInstalled(DirectWrite *write)
{
	static const LedgerColumn card_columns[] = {
		LEDGER_KIND, LEDGER_EXPIRES_IN, LEDGER_PARENT, LEDGER_REFUND_KEY, LEDGER_NOTE
	};
	TupleDesc	tupdesc = RelationGetDescr(write->ledger);

	for (int i = 0; i < (int) lengthof(card_columns); i++)
	{
		AttrNumber	attnum = write->catalog->ledger_attnums[card_columns[i]];
		Form_pg_attribute attr;

		if (attnum == InvalidAttrNumber)
			return false;
		attr = TupleDescAttr(tupdesc, attnum - 1);
		if (attr->atttypid != PayLedgerColumnType(write->catalog, card_columns[i]) ||
			attr->atttypmod != -1)
			return false;
	}
	return true;
}

/*
 * Insert a new row of the card flow as INIT, as write_card.c's
 *
 *		INSERT INTO pay_ledger (bizno, status, amount, currency, kind,
 *			expires_in, parent, refund_key, note)
 *		VALUES (...) ON CONFLICT DO NOTHING
 *
 * would, with PayDirectInsert's speculative insertion: *inserted is false
 * when a row with one of its unique keys exists (or a trigger skipped it).
 * The ledger's BEFORE triggers fire on it as on a payment, the bookkeeping's
 * check of a step (card.c) among them.  Returns false, having done nothing,
 * when the write must go through SQL.
 */
bool
PayDirectInsertCard(FunctionCallInfo fcinfo, const PayCardInsert *insert, bool *inserted)
{
	DirectWrite write;
	const AttrNumber *col;
	HeapTuple	tuple;
	TupleTableSlot *slot;
	int			columns[5];
	Datum		values[5];
	bool		nulls[5];

	if (!BeginDirectWrite(fcinfo, CMD_INSERT, &write))
		return false;
	if (!CardColumnsAsInstalled(&write))
	{
		EndDirectWrite(&write);
		return false;
	}

	*inserted = false;
	col = write.catalog->ledger_attnums;
	tuple = FormNewRow(&write, insert->bizno, PAY_INIT, insert->amount_null, insert->amount,
					   insert->currency_null, insert->currency);
	columns[0] = col[LEDGER_KIND];
	values[0] = CStringGetTextDatum(insert->kind);
	nulls[0] = false;
	columns[1] = col[LEDGER_EXPIRES_IN];
	values[1] = insert->expires_in;
	nulls[1] = insert->expires_in_null;
	columns[2] = col[LEDGER_PARENT];
	values[2] = insert->parent;
	nulls[2] = insert->parent_null;
	columns[3] = col[LEDGER_REFUND_KEY];
	values[3] = insert->key;
	nulls[3] = insert->parent_null;
	columns[4] = col[LEDGER_NOTE];
	values[4] = CStringGetTextDatum(insert->note);
	nulls[4] = false;
	tuple = heap_modify_tuple_by_cols(tuple, RelationGetDescr(write.ledger), 5, columns,
									  values, nulls);
	tuple = FireRowTriggers(&write, TRIGGER_EVENT_BEFORE, TRIGGER_EVENT_INSERT,
							NULL, tuple, NULL);
	if (tuple != NULL)
	{
		/* a batch segment's shared state, where it has one, as DirectInsert */
		slot = ResultSlot(write.shared, write.estate, write.ledger,
						  write.shared != NULL ? &write.shared->slot : NULL, NULL);
		ExecForceStoreHeapTuple(tuple, slot, false);
		if (RelationGetDescr(write.ledger)->constr)
			ExecConstraints(write.result, slot, write.estate);
		OpenResultIndexes(write.shared, write.result, true, slot, write.estate);

		*inserted = InsertSpeculatively(&write, slot);
		if (*inserted)
			FireRowTriggers(&write, TRIGGER_EVENT_AFTER, TRIGGER_EVENT_INSERT, NULL,
							ExecFetchSlotHeapTuple(slot, true, NULL), NULL);
	}
	EndDirectWrite(&write);
	return true;
}

/*
 * The card flow's plain reads (write_card.c) through the access methods:
 * the row of bizno through the primary key (by_step false), or the step of
 * authorization bizno under key through an index led by parent
 * (PayCardParentIndex), its refund_key compared as the WHERE clause
 * compares it, in the column's collation (by the index too when its second
 * column is refund_key).  Under the snapshot a new
 * statement would take, as PayDirectProbe reads, with the ledger's lock
 * kept to the end of the transaction; *found false when there is no row.
 * Returns false, having read nothing, where the executor could read
 * otherwise or refuse: row security on the ledger, a module watching its
 * permission checks, a user without SELECT on the whole ledger -- or when
 * no index is led by parent.
 */
bool
PayDirectReadCardRow(FunctionCallInfo fcinfo, Datum bizno, bool by_step, Datum key,
					 PayCardRow *row, bool *found)
{
	Relation	ledger = table_open(PayCatalogGetTables(fcinfo)->ledger, AccessShareLock);
	/* the columns as they are now that the ledger is locked */
	const PayCatalog *catalog = PayCatalogGetTables(fcinfo);
	const AttrNumber *col = catalog->ledger_attnums;
	Oid			index_oid;
	Relation	index;
	TupleTableSlot *slot;
	IndexScanDesc scan;
	ScanKeyData scankeys[2];
	int			nkeys = 1;
	Snapshot	snapshot;
	Oid			key_collation;

	if (ledger->rd_rel->relrowsecurity || ledger->rd_rel->relhassubclass ||
		ExecutorCheckPerms_hook != NULL ||
		pg_class_aclcheck(catalog->ledger, GetUserId(), ACL_SELECT) != ACLCHECK_OK)
	{
		table_close(ledger, NoLock);
		return false;
	}
	index_oid = by_step ? PayCardParentIndex(catalog, ledger) : catalog->ledger_pkey;
	if (!OidIsValid(index_oid))
	{
		table_close(ledger, NoLock);
		return false;
	}
	key_collation = by_step ?
		TupleDescAttr(RelationGetDescr(ledger), col[LEDGER_REFUND_KEY] - 1)->attcollation :
		InvalidOid;
	index = index_open(index_oid, AccessShareLock);
	slot = table_slot_create(ledger, NULL);

	/* see this transaction's own earlier writes, as a statement would */
	CommandCounterIncrement();
	snapshot = RegisterSnapshot(GetTransactionSnapshot());

	ScanKeyEntryInitialize(&scankeys[0], 0, 1, BTEqualStrategyNumber, InvalidOid,
						   index->rd_indcollation[0], F_TEXTEQ, bizno);
	/* an index on (parent, refund_key), as installed, finds the step itself */
	if (by_step && index->rd_index->indnkeyatts >= 2 &&
		index->rd_index->indkey.values[1] == col[LEDGER_REFUND_KEY] &&
		index->rd_opfamily[1] == TEXT_BTREE_FAM_OID &&
		index->rd_indcollation[1] == key_collation)
		ScanKeyEntryInitialize(&scankeys[nkeys++], 0, 2, BTEqualStrategyNumber, InvalidOid,
							   key_collation, F_TEXTEQ, key);
	scan = PayIndexBeginScan(ledger, index, snapshot, nkeys, 0);
	index_rescan(scan, scankeys, nkeys, NULL, 0);
	*found = false;
	while (index_getnext_slot(scan, ForwardScanDirection, slot))
	{
		bool		isnull;
		Datum		refund_key;

		if (!by_step)
		{
			*found = true;
			break;
		}
		refund_key = slot_getattr(slot, col[LEDGER_REFUND_KEY], &isnull);
		if (!isnull &&
			DatumGetBool(DirectFunctionCall2Coll(texteq, key_collation, refund_key, key)))
		{
			*found = true;
			break;
		}
	}
	index_endscan(scan);
	if (*found)
	{
		bool		isnull;

		row->bizno = datumCopy(slot_getattr(slot, col[LEDGER_BIZNO], &isnull), false, -1);
		row->status = PayStatusFromLabel(catalog,
										 DatumGetObjectId(slot_getattr(slot, col[LEDGER_STATUS],
																	   &isnull)));
		row->amount = slot_getattr(slot, col[LEDGER_AMOUNT], &row->amount_null);
		if (!row->amount_null)
			row->amount = datumCopy(row->amount, false, -1);
		row->currency = slot_getattr(slot, col[LEDGER_CURRENCY], &row->currency_null);
		if (!row->currency_null)
			row->currency = datumCopy(row->currency, false, -1);
		row->kind = slot_getattr(slot, col[LEDGER_KIND], &row->kind_null);
		if (!row->kind_null)
			row->kind = datumCopy(row->kind, false, -1);
		row->expires_in = slot_getattr(slot, col[LEDGER_EXPIRES_IN], &row->expires_in_null);
		if (!row->expires_in_null)
			row->expires_in = datumCopy(row->expires_in, false, sizeof(Interval));
		row->order_null = true;
		if (!by_step)
		{
			bool		prefix_null;

			row->prefix = slot_getattr(slot, col[LEDGER_PREFIX], &prefix_null);
			row->biz_id = slot_getattr(slot, col[LEDGER_BIZ_ID], &row->order_null);
			row->order_null = row->order_null || prefix_null;
			if (!row->order_null)
			{
				row->prefix = datumCopy(row->prefix, false, -1);
				row->biz_id = datumCopy(row->biz_id, false, -1);
			}
		}
	}
	UnregisterSnapshot(snapshot);
	ExecDropSingleTupleTableSlot(slot);
	index_close(index, NoLock);
	table_close(ledger, NoLock);
	return true;
}

/*
 * Lock the row of bizno in ledger as the executor locks the row that
 *
 *		SELECT ... FROM pay_ledger WHERE bizno = $1 FOR <mode>
 *
 * finds through the primary key (ExecLockRows): under a new statement's
 * snapshot (past the command counter), waiting for a concurrent writer; in
 * READ COMMITTED its latest version is locked and the WHERE clause checked
 * again on it, as EvalPlanQual does; under REPEATABLE READ and
 * SERIALIZABLE a concurrent update or delete is a serialization failure; a
 * row this command changed already, or deleted, is not found.  The lock is
 * held to the end of the transaction, the primary key's lock too, as the
 * executor holds it.  On true, slot holds the version locked.  The caller
 * has locked the ledger and judged that the lock may be taken here: the
 * claim's lock of a payment (PayDirectLock) and the bookkeeping's of an
 * authorization (card.c).
 */
bool
PayDirectLockRow(const PayCatalog *catalog, Relation ledger, Datum bizno, LockTupleMode mode,
				 TupleTableSlot *slot)
{
	const AttrNumber *col = catalog->ledger_attnums;
	Relation	pkey = index_open(catalog->ledger_pkey, AccessShareLock);
	Snapshot	snapshot;
	bool		found;

	CommandCounterIncrement();
	snapshot = RegisterSnapshot(GetTransactionSnapshot());
	found = FetchByKey(ledger, pkey, snapshot, bizno, slot);
	if (found)
	{
		ItemPointerData tid = slot->tts_tid;
		TM_FailureData failure;
		TM_Result	result;

		/* the command id of a locking statement, marked used as the executor marks it */
		result = table_tuple_lock(ledger, &tid, snapshot, slot, GetCurrentCommandId(true),
								  mode, LockWaitBlock,
								  TUPLE_LOCK_FLAG_LOCK_UPDATE_IN_PROGRESS |
								  (IsolationUsesXactSnapshot() ? 0 : TUPLE_LOCK_FLAG_FIND_LAST_VERSION),
								  &failure);
		switch (result)
		{
			case TM_Ok:
				if (failure.traversed)
				{
					bool		isnull;
					Datum		locked = slot_getattr(slot, col[LEDGER_BIZNO], &isnull);

					found = !isnull &&
						DatumGetBool(DirectFunctionCall2Coll(texteq, pkey->rd_indcollation[0],
															 locked, bizno));
				}
				break;
			case TM_SelfModified:
				/* changed by this command or a later one: skipped, as the executor skips it */
				found = false;
				break;
			case TM_Updated:
			case TM_Deleted:
				/* READ COMMITTED follows the chain: an update ends here only under a snapshot of the transaction */
				if (IsolationUsesXactSnapshot())
					ereport(ERROR,
							(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
							 errmsg("could not serialize access due to concurrent update")));
				if (result == TM_Updated)
					elog(ERROR, "unexpected table_tuple_lock status: %u", result);
				found = false;
				break;
			case TM_Invisible:
				elog(ERROR, "attempted to lock invisible tuple");
				break;
			default:
				elog(ERROR, "unexpected table_tuple_lock status: %u", result);
		}
	}
	UnregisterSnapshot(snapshot);
	index_close(pkey, NoLock);
	return found;
}

/*
 * The row of bizno locked FOR UPDATE through the access methods
 * (PayDirectLockRow), read in *row as PayDirectProbe reads it; *found is
 * false when there is no row.  Returns false, having locked nothing, where
 * the SQL must take the lock: wherever write_direct_policy.c sends the
 * UPDATE the lock precedes to SQL -- row security, a rule or a DBA's
 * trigger on the ledger, a module watching the executor's permission
 * checks, a read-only transaction, a user without SELECT and UPDATE on the
 * whole ledger (what the statement needs, or column privileges the
 * statement is left to judge).  The ledger is locked ROW SHARE to the end
 * of the transaction, as a statement locking rows locks it.
 */
bool
PayDirectLock(FunctionCallInfo fcinfo, Datum bizno, LedgerRow *row, bool *found)
{
	const PayCatalog *catalog = PayCatalogGetTables(fcinfo);
	Relation	ledger;
	TupleTableSlot *slot;

	if (!PayDirectLedgerWriteAllowed(PayDirectPolicyGet(fcinfo), catalog, CMD_UPDATE, NULL))
		return false;
	ledger = table_open(catalog->ledger, RowShareLock);
	/* the ledger, its indexes and the verdict as they are now it is locked */
	catalog = PayCatalogGetTables(fcinfo);
	if (!PayDirectLedgerWriteAllowed(PayDirectPolicyGet(fcinfo), catalog, CMD_UPDATE, ledger))
	{
		table_close(ledger, NoLock);
		return false;
	}
	slot = table_slot_create(ledger, NULL);
	*found = PayDirectLockRow(catalog, ledger, bizno, LockTupleExclusive, slot);
	if (*found)
		CopyLedgerRow(catalog, slot, row);
	ExecDropSingleTupleTableSlot(slot);
	table_close(ledger, NoLock);
	return true;
}
