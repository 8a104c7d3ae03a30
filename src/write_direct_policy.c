/*-------------------------------------------------------------------------
 *
 * write_direct_policy.c
 *	  The one place that decides whether the API's writes of the ledger and
 *	  the journal trigger's rows may bypass the executor.
 *
 * A direct write (write_direct.c) is made only when nothing the executor
 * would do is left undone, and nothing a DBA wrote in SQL or a procedural
 * language would run.  The tables are judged once per catalog generation
 * (catalog.c bumps it on any change to them, their indexes, constraints,
 * domains or the extension's trigger functions); the session is judged at
 * every write.  What sends a write back to SQL:
 *
 * - on the ledger: a rule, row security, a CHECK constraint, a generated or
 *	 identity column, partitioning or inheritance children, any trigger but
 *	 the extension's own (each unconditional, as installed), a column the
 *	 API writes of another type (amount and currency may be domains, whose
 *	 checks are run), a domain on any other column, a default, domain check
 *	 or index expression or predicate that calls an SQL or procedural
 *	 function or runs a subquery, an index of an access method or operator
 *	 family that is not built in, or with deferred uniqueness; a ledger of
 *	 before 1.2; and whatever sends the journal's rows to SQL;
 * - on the journal: a column the trigger does not fill (but a second
 *	 charge's kind, NULL without a default), or of another type or typmod, a
 *	 generated or identity column, an INSERT trigger but the journal's own
 *	 guard, a rule, row security, partitioning, or a CHECK constraint or
 *	 index that could look a name up;
 * - in the session: replica mode, a read-only transaction or a standby,
 *	 parallel mode, a module watching the executor's permission checks
 *	 (ExecutorCheckPerms_hook: pgaudit, sepgsql), and the owner lacking any
 *	 privilege the statement would need.
 *
 * A write whose defaults, domain checks or indexes call only built-in
 * functions, one of which could resolve a name at run time, goes direct
 * with search_path pinned, as the SQL statement would run.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/transam.h"
#include "access/xact.h"
#include "catalog/pg_am.h"
#include "catalog/pg_class.h"
#include "catalog/pg_constraint.h"
#include "catalog/pg_language.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_trigger.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "rewrite/rewriteHandler.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include "catalog.h"
#include "compat.h"
#include "write_direct_policy.h"

static PayDirectPolicy policy;
/* the catalog the policy is being worked out for */
static const PayCatalog *catalog;

/*
 * The journal trigger's own verdict on the journal, kept apart from the
 * policy: the trigger asks for it inside a direct write of the ledger,
 * which uses what the policy keeps (the trigger functions it is firing)
 * and must not see it emptied.
 */
static uint64 journal_generation = 0;
static bool journal_append_direct = false;

/*
 * How far an expression may be evaluated by the API's direct writes
 * (write_direct.c) -- which run no SQL, and, on the hot path, keep the caller's
 * search_path:
 *
 * PAY_EXPRESSION_PLAIN: nothing in it can look at search_path -- constants,
 *	  columns, IS [NOT] NULL, AND/OR/NOT, the clock functions and the
 *	  extension's own C functions.  Everything the extension installs is.
 * PAY_EXPRESSION_BUILT_IN: it calls only built-in functions (and ours), but
 *	  one may resolve a name at run time (a cast to regclass, nextval of a
 *	  name, current_schema): direct writes evaluate it with search_path
 *	  pinned, as the SQL statement would.
 * PAY_EXPRESSION_FOREIGN: it calls an SQL or procedural function, or runs a
 *	  subquery or a domain's checks: only the executor evaluates it.
 */
static PayExpressionKind
FunctionKind(Oid function)
{
	HeapTuple	tuple;
	Form_pg_proc proc;
	bool		ours;

	if (function == F_NOW || function == F_STATEMENT_TIMESTAMP ||
		function == F_CLOCK_TIMESTAMP || function == F_TRANSACTION_TIMESTAMP)
		return PAY_EXPRESSION_PLAIN;
	if (function < FirstNormalObjectId)
		return PAY_EXPRESSION_BUILT_IN;
	tuple = SearchSysCache1(PROCOID, ObjectIdGetDatum(function));
	if (!HeapTupleIsValid(tuple))
		return PAY_EXPRESSION_FOREIGN;
	proc = (Form_pg_proc) GETSTRUCT(tuple);
	ours = proc->pronamespace == catalog->namespace && proc->prolang == ClanguageId;
	ReleaseSysCache(tuple);
	return ours ? PAY_EXPRESSION_PLAIN : PAY_EXPRESSION_FOREIGN;
}

static bool
NoteFunctionKind(Oid function, void *context)
{
	PayExpressionKind *kind = (PayExpressionKind *) context;

	*kind = Max(*kind, FunctionKind(function));
	return *kind == PAY_EXPRESSION_FOREIGN;
}

static bool
NoteExpressionKind(Node *node, void *context)
{
	PayExpressionKind *kind = (PayExpressionKind *) context;

	if (node == NULL)
		return false;
	/*
	 * A domain's checks, a subquery, or an SQL/JSON query function's hidden
	 * coercion are more than a function call.
	 */
	if (IsA(node, CoerceToDomain) || IsA(node, SubLink) || IsA(node, SubPlan) ||
		IsA(node, NextValueExpr) || PayIsSqlJsonQuery(node))
	{
		*kind = PAY_EXPRESSION_FOREIGN;
		return true;
	}
	if (!IsA(node, Const) && !IsA(node, Var) && !IsA(node, NullTest) &&
		!IsA(node, BoolExpr) && !IsA(node, RelabelType) && !IsA(node, CoerceToDomainValue) &&
		!IsA(node, FuncExpr) && !IsA(node, List))
		*kind = Max(*kind, PAY_EXPRESSION_BUILT_IN);	/* operators, casts, ... */
	if (check_functions_in_node(node, NoteFunctionKind, context))
		return true;
	return expression_tree_walker(node, NoteExpressionKind, context);
}

static PayExpressionKind
ExpressionKindOf(Node *expr)
{
	PayExpressionKind kind = PAY_EXPRESSION_PLAIN;

	(void) NoteExpressionKind(expr, &kind);
	return kind;
}

/*
 * The kind of a domain's CHECK constraints taken together (NOT NULL is part
 * of the type); a domain with a typmod, or over another domain, is not
 * looked into: foreign.
 */
static PayExpressionKind
DomainKind(Oid domain)
{
	Relation	constraints;
	SysScanDesc scan;
	ScanKeyData key;
	HeapTuple	tuple;
	PayExpressionKind kind = PAY_EXPRESSION_PLAIN;
	bool		simple;

	tuple = SearchSysCache1(TYPEOID, ObjectIdGetDatum(domain));
	if (!HeapTupleIsValid(tuple))
		return PAY_EXPRESSION_FOREIGN;
	simple = ((Form_pg_type) GETSTRUCT(tuple))->typtype == TYPTYPE_DOMAIN &&
		((Form_pg_type) GETSTRUCT(tuple))->typtypmod == -1 &&
		get_typtype(((Form_pg_type) GETSTRUCT(tuple))->typbasetype) != TYPTYPE_DOMAIN;
	ReleaseSysCache(tuple);
	if (!simple)
		return PAY_EXPRESSION_FOREIGN;

	constraints = table_open(ConstraintRelationId, AccessShareLock);
	ScanKeyInit(&key, Anum_pg_constraint_contypid, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(domain));
	scan = systable_beginscan(constraints, ConstraintTypidIndexId, true, NULL, 1, &key);
	while (kind != PAY_EXPRESSION_FOREIGN && HeapTupleIsValid(tuple = systable_getnext(scan)))
	{
		Form_pg_constraint constraint = (Form_pg_constraint) GETSTRUCT(tuple);
		bool		isnull;
		Datum		bin;

		if (constraint->contype != CONSTRAINT_CHECK)
			continue;
		bin = heap_getattr(tuple, Anum_pg_constraint_conbin, RelationGetDescr(constraints),
						   &isnull);
		kind = isnull ? PAY_EXPRESSION_FOREIGN :
			Max(kind, ExpressionKindOf(stringToNode(TextDatumGetCString(bin))));
	}
	systable_endscan(scan);
	table_close(constraints, AccessShareLock);
	return kind;
}

/*
 * What maintaining rel's indexes evaluates: their expressions and
 * predicates; an index of an access method or operator family that is not
 * built-in, or with deferred uniqueness (a recheck the executor would
 * queue), counts as foreign.  Looked at here, with the rest of the table,
 * because a new index invalidates the table: the list the writes open after
 * their lock is the list judged.
 */
static PayExpressionKind
IndexesKind(Relation rel)
{
	List	   *indexes = RelationGetIndexList(rel);
	PayExpressionKind kind = PAY_EXPRESSION_PLAIN;
	ListCell   *cell;

	foreach(cell, indexes)
	{
		Relation	index = index_open(lfirst_oid(cell), AccessShareLock);

		if (index->rd_rel->relam >= FirstNormalObjectId || !index->rd_index->indimmediate)
			kind = PAY_EXPRESSION_FOREIGN;
		for (int k = 0; k < IndexRelationGetNumberOfKeyAttributes(index); k++)
			if (index->rd_opfamily[k] >= FirstNormalObjectId)
				kind = PAY_EXPRESSION_FOREIGN;
		if (kind != PAY_EXPRESSION_FOREIGN)
			kind = Max(kind, Max(ExpressionKindOf((Node *) RelationGetIndexExpressions(index)),
								 ExpressionKindOf((Node *) RelationGetIndexPredicate(index))));
		index_close(index, AccessShareLock);
		if (kind == PAY_EXPRESSION_FOREIGN)
			break;
	}
	list_free(indexes);
	return kind;
}

/*
 * Whether trigger is the journal's guard as installed (pay_journal_guard):
 * the extension's pay_guard with no arguments, a plain BEFORE row trigger
 * with no condition.  On INSERT it lets the extension's own rows pass and
 * changes none, so a direct insert, which is the extension's own, need not
 * fire it.
 */
static bool
IsJournalGuard(const Trigger *trigger)
{
	return trigger->tgfoid == catalog->guard_function && trigger->tgnargs == 0 &&
		TRIGGER_FOR_ROW(trigger->tgtype) && TRIGGER_FOR_BEFORE(trigger->tgtype) &&
		trigger->tgqual == NULL && trigger->tgnattr == 0 &&
		trigger->tgoldtable == NULL && trigger->tgnewtable == NULL &&
		!OidIsValid(trigger->tgconstraint);
}

/*
 * Whether journal rows may go straight into the journal's heap and indexes:
 * only when nothing the executor would do on INSERT is left undone -- every
 * column the trigger fills is of exactly the type it is filled with (no
 * domain, no typmod to check), every other column (a second charge's kind,
 * which the trigger leaves NULL) has no default and no domain, so that the
 * INSERT's own value for it would be a plain NULL too, no generated or
 * identity column, no INSERT trigger but the journal's guard (IsJournalGuard),
 * no rule, no row security, not partitioned and no partition, and no CHECK
 * constraint or index that could look at search_path (PAY_EXPRESSION_PLAIN).
 * NOT NULL and CHECK constraints and the indexes are applied by
 * write_direct.c itself.
 */
static bool
JournalAllowsDirectInsert(Relation journal)
{
	TupleDesc	tupdesc = RelationGetDescr(journal);
	TriggerDesc *triggers;

	for (int a = 0; a < tupdesc->natts; a++)
	{
		Form_pg_attribute attr = TupleDescAttr(tupdesc, a);
		bool		filled = false;

		if (attr->attisdropped)
			continue;
		/* generated or identity: the INSERT, which names every column, fails */
		if (attr->attgenerated || attr->attidentity)
			return false;
		for (int i = 0; i < JOURNAL_COLUMNS && !filled; i++)
			filled = catalog->journal_attnums[i] == attr->attnum;
		if (!filled && (attr->atthasdef || get_typtype(attr->atttypid) == TYPTYPE_DOMAIN))
			return false;
	}

	/* no domain or typmod whose check the executor's coercion would make */
	for (int i = 0; i < JOURNAL_COLUMNS; i++)
	{
		Form_pg_attribute attr;
		Oid			expected = PayJournalColumnType(catalog, i);

		if (catalog->journal_attnums[i] == InvalidAttrNumber)
			continue;			/* an older version's journal: not filled */
		attr = TupleDescAttr(tupdesc, catalog->journal_attnums[i] - 1);
		if (attr->atttypid != expected || attr->atttypmod != -1)
			return false;
	}

	/* CHECKs and indexes are evaluated where the caller's path is in force */
	for (int i = 0; tupdesc->constr && i < tupdesc->constr->num_check; i++)
		if (ExpressionKindOf(stringToNode(tupdesc->constr->check[i].ccbin)) !=
			PAY_EXPRESSION_PLAIN)
			return false;
	if (IndexesKind(journal) != PAY_EXPRESSION_PLAIN)
		return false;

	/*
	 * Read after every catalog lookup above: one may have taken in an
	 * invalidation of the journal, whose rebuild frees the old trigdesc.
	 */
	triggers = journal->trigdesc;
	for (int i = 0; triggers && i < triggers->numtriggers; i++)
	{
		Trigger    *trigger = &triggers->triggers[i];

		if (TRIGGER_FOR_INSERT(trigger->tgtype) && !IsJournalGuard(trigger))
			return false;
	}

	return journal->rd_rel->relkind == RELKIND_RELATION &&
		!journal->rd_rel->relispartition &&
		!journal->rd_rel->relhasrules &&
		!journal->rd_rel->relrowsecurity &&
		!(tupdesc->constr && tupdesc->constr->has_generated_stored);
}

/*
 * A column the direct writes set: of exactly the type they write, or for
 * amount and currency a domain of its own, whose checks write_direct.c runs.
 */
static PayExpressionKind
LedgerColumnKind(Relation ledger, LedgerColumn column)
{
	Form_pg_attribute attr;
	Oid			expected = PayLedgerColumnType(catalog, column);

	if (catalog->ledger_attnums[column] == InvalidAttrNumber)
		return PAY_EXPRESSION_FOREIGN;
	attr = TupleDescAttr(RelationGetDescr(ledger), catalog->ledger_attnums[column] - 1);
	if (attr->atttypmod != -1)
		return PAY_EXPRESSION_FOREIGN;
	if (attr->atttypid == expected)
		return PAY_EXPRESSION_PLAIN;
	if (column == LEDGER_AMOUNT || column == LEDGER_CURRENCY)
		return DomainKind(attr->atttypid);
	return PAY_EXPRESSION_FOREIGN;
}

/*
 * Whether the API may write ledger rows itself, through the heap and index
 * access methods (write_direct.c), and what it then evaluates: not at all
 * (PAY_EXPRESSION_FOREIGN) unless the ledger is of 1.2, not partitioned,
 * without inheritance children (an UPDATE would reach them), with no rule,
 * no row security, no generated or identity column, no CHECK constraint on
 * the table, no trigger but the extension's own (each an unconditional row
 * trigger, as installed), the columns the API writes of exactly their types
 * (amount and currency may be domains), every other column of a base type
 * (no domain default or check to apply), and defaults, domain checks and
 * indexes that call no SQL or procedural function; the defaults are kept in
 * policy.ledger_defaults.
 */
static PayExpressionKind
LedgerDirectWriteKind(Relation ledger)
{
	TupleDesc	tupdesc = RelationGetDescr(ledger);
	TriggerDesc *triggers;
	MemoryContext old_context;
	PayExpressionKind kind = PAY_EXPRESSION_PLAIN;
	static const LedgerColumn written[] = {
		LEDGER_BIZNO, LEDGER_STATUS, LEDGER_AMOUNT, LEDGER_CURRENCY, LEDGER_CHANNEL_REF,
		LEDGER_LAST_ERROR, LEDGER_NOTE, LEDGER_RESPONSE
	};

	if (ledger->rd_rel->relkind != RELKIND_RELATION || ledger->rd_rel->relispartition ||
		ledger->rd_rel->relhassubclass ||
		ledger->rd_rel->relhasrules || ledger->rd_rel->relrowsecurity ||
		(tupdesc->constr && (tupdesc->constr->num_check > 0 ||
							 tupdesc->constr->has_generated_stored)) ||
		catalog->ledger_attnums[LEDGER_PARENT] == InvalidAttrNumber ||
		catalog->ledger_attnums[LEDGER_REFUND_KEY] == InvalidAttrNumber)
		return PAY_EXPRESSION_FOREIGN;

	for (int i = 0; i < (int) lengthof(written); i++)
		kind = Max(kind, LedgerColumnKind(ledger, written[i]));
	kind = Max(kind, IndexesKind(ledger));
	if (kind == PAY_EXPRESSION_FOREIGN)
		return kind;

	/* read after the lookups above, as in JournalAllowsDirectInsert */
	triggers = ledger->trigdesc;

	for (int i = 0; triggers && i < triggers->numtriggers; i++)
	{
		Trigger    *trigger = &triggers->triggers[i];

		if ((trigger->tgfoid != catalog->guard_function &&
			 trigger->tgfoid != catalog->bookkeeping_function &&
			 trigger->tgfoid != catalog->journal_function) ||
			trigger->tgqual != NULL || trigger->tgnattr != 0 ||
			trigger->tgoldtable != NULL || trigger->tgnewtable != NULL ||
			OidIsValid(trigger->tgconstraint))
			return PAY_EXPRESSION_FOREIGN;
	}
	if (triggers && (triggers->trig_insert_before_statement ||
					 triggers->trig_insert_after_statement ||
					 triggers->trig_update_before_statement ||
					 triggers->trig_update_after_statement ||
					 triggers->trig_insert_instead_row ||
					 triggers->trig_update_instead_row))
		return PAY_EXPRESSION_FOREIGN;

	old_context = MemoryContextSwitchTo(policy.context);
	policy.ledger_defaults = palloc0(sizeof(Expr *) * tupdesc->natts);
	MemoryContextSwitchTo(old_context);
	for (int a = 0; a < tupdesc->natts; a++)
	{
		Form_pg_attribute attr = TupleDescAttr(tupdesc, a);
		Node	   *expr;

		if (attr->attisdropped)
			continue;
		if (attr->attidentity || attr->attgenerated)
			return PAY_EXPRESSION_FOREIGN;
		if (attr->attnum != catalog->ledger_attnums[LEDGER_AMOUNT] &&
			attr->attnum != catalog->ledger_attnums[LEDGER_CURRENCY] &&
			get_typtype(attr->atttypid) == TYPTYPE_DOMAIN)
			return PAY_EXPRESSION_FOREIGN;
		if (!attr->atthasdef)
			continue;
		expr = build_column_default(ledger, attr->attnum);
		if (expr == NULL)
			continue;
		kind = Max(kind, ExpressionKindOf(expr));
		if (kind == PAY_EXPRESSION_FOREIGN)
			return kind;
		old_context = MemoryContextSwitchTo(policy.context);
		policy.ledger_defaults[a] = expression_planner(copyObject((Expr *) expr));
		MemoryContextSwitchTo(old_context);
	}
	return kind;
}

/* Work the policy out for the tables as they are now. */
static void
DecidePolicy(void)
{
	Relation	ledger;
	Relation	journal;
	PayExpressionKind kind;

	if (policy.context == NULL)
		policy.context = AllocSetContextCreate(CacheMemoryContext,
											   "idempotent_pay direct writes",
											   ALLOCSET_SMALL_SIZES);
	MemoryContextReset(policy.context);
	policy.ledger_kind = PAY_EXPRESSION_FOREIGN;
	policy.journal_direct = false;
	policy.ledger_defaults = NULL;
	policy.ntriggers = 0;
	policy.trigger_capacity = 0;
	policy.trigger_oids = NULL;
	policy.trigger_functions = NULL;
	policy.default_states = NULL;
	policy.amount_domain_cache = NULL;
	policy.currency_domain_cache = NULL;

	ledger = table_open(catalog->ledger, AccessShareLock);
	kind = LedgerDirectWriteKind(ledger);
	table_close(ledger, NoLock);

	journal = table_open(catalog->journal, AccessShareLock);
	policy.journal_direct = JournalAllowsDirectInsert(journal);
	table_close(journal, NoLock);

	/*
	 * A journal row inserted by SQL may fire a DBA's trigger on the journal,
	 * which would see pg_trigger_depth() one lower under a direct write of
	 * the ledger (the trigger manager's depth is its own): SQL for both.
	 */
	policy.ledger_kind = policy.journal_direct ? kind : PAY_EXPRESSION_FOREIGN;
}

/*
 * The policy for the catalog as it is now, worked out again after any
 * change the catalog saw; a change while it is worked out means once more.
 */
PayDirectPolicy *
PayDirectPolicyGet(FunctionCallInfo fcinfo)
{
	const PayCatalog *current = PayCatalogGetTables(fcinfo);

	while (policy.generation != current->generation)
	{
		uint64		generation = current->generation;

		catalog = current;
		DecidePolicy();
		current = PayCatalogGetTables(fcinfo);
		if (current->generation == generation)
			policy.generation = generation;
	}
	return &policy;
}

/*
 * Whether the API may write the ledger by operation through the access
 * methods now.  Asked first before the ledger is locked (locked NULL), to
 * spare the write's set-up when the session rules it out, then with the
 * ledger locked, on the catalog and policy the lock brought in: the
 * ledger is still the one judged, and the owner has every privilege the
 * statement would need -- the executor wants all of them, and its error is
 * the statement's to raise.
 */
bool
PayDirectLedgerWriteAllowed(const PayDirectPolicy *decided, const PayCatalog *current,
							CmdType operation, Relation locked)
{
	AclMode		privileges = operation == CMD_INSERT ? ACL_INSERT : ACL_SELECT | ACL_UPDATE;

	if (decided->ledger_kind == PAY_EXPRESSION_FOREIGN)
		return false;
	/* a read-only transaction or a standby: the executor's refusal (25006) */
	if (SessionReplicationRole == SESSION_REPLICATION_ROLE_REPLICA ||
		XactReadOnly || IsInParallelMode() || ExecutorCheckPerms_hook != NULL)
		return false;
	if (locked == NULL)
		return true;
	return RelationGetRelid(locked) == current->ledger &&
		pg_class_aclmask(current->ledger, GetUserId(), privileges, ACLMASK_ALL) == privileges;
}

/*
 * Whether the journal trigger may append its row to journal, which it has
 * locked, through the access methods; current is the catalog as that lock
 * brought it in.
 */
bool
PayDirectJournalAppendAllowed(const PayCatalog *current, Relation journal)
{
	if (journal_generation != current->generation)
	{
		catalog = current;
		journal_append_direct = JournalAllowsDirectInsert(journal);
		journal_generation = current->generation;
	}
	/* another module that checks the executor's permissions sees the INSERT */
	return journal_append_direct && ExecutorCheckPerms_hook == NULL;
}

/*
 * Whether the API may read the ledger through its indexes instead of a
 * SELECT (PayDirectFindOrder): where the tables' verdict lets writes go
 * direct (no row security, no inheritance child or partition, whose rows
 * a SELECT of the ledger would read), no module watches the executor's
 * permission checks, and the owner may SELECT the ledger, as the statement
 * needs (column privileges alone leave the statement to judge them).
 * Asked before the ledger is locked (locked NULL) and again with it
 * locked, as PayDirectLedgerWriteAllowed is.
 */
bool
PayDirectLedgerReadAllowed(const PayDirectPolicy *decided, const PayCatalog *current,
						   Relation locked)
{
	if (decided->ledger_kind == PAY_EXPRESSION_FOREIGN || ExecutorCheckPerms_hook != NULL)
		return false;
	if (locked == NULL)
		return true;
	return RelationGetRelid(locked) == current->ledger &&
		pg_class_aclcheck(current->ledger, GetUserId(), ACL_SELECT) == ACLCHECK_OK;
}
