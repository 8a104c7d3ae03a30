/*-------------------------------------------------------------------------
 *
 * catalog.c
 *	  The OIDs and names of the extension's own objects, per backend.
 *
 * Every entry point finds the extension through the schema of the function
 * that was called, so nothing depends on the caller's search_path.
 *
 * One mechanism keeps this cache true: the types are looked up again after
 * any change to a type (DROP and CREATE EXTENSION give pay_status new
 * OIDs), the tables after any relcache invalidation of the ledger, its
 * primary key or the journal (ALTER TABLE in any session, CREATE TRIGGER,
 * VACUUM).  Each lookup bumps the generation, by which ledger.c knows to
 * prepare its plans again.  Columns are found by name and checked by type,
 * so a column dropped, added or re-created elsewhere is never written in
 * the wrong place; one that is missing or of another type is refused with
 * an error naming it.  Callers look the tables up after they hold a lock on
 * the table they read, so an invalidation that the lock brings in is seen.
 * A change of any constraint (a domain's CHECK among them) counts as a
 * change of the tables, since it may change whether rows can go straight
 * into them.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/relation.h"
#include "access/table.h"
#include "access/transam.h"
#include "catalog/pg_am.h"
#include "catalog/pg_class.h"
#include "catalog/pg_constraint.h"
#include "catalog/pg_enum.h"
#include "catalog/pg_language.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "rewrite/rewriteHandler.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include "catalog.h"

/* A column the C code reads or writes, and the type it expects. */
typedef struct ColumnSpec
{
	const char *name;
	Oid			type;			/* of the column or its domain's base;
								 * InvalidOid for pay_status */
	bool		optional;		/* absent in an older version's table */
} ColumnSpec;

static const ColumnSpec ledger_columns[LEDGER_COLUMNS] = {
	[LEDGER_BIZNO] = {"bizno", TEXTOID},
	[LEDGER_PREFIX] = {"prefix", TEXTOID},
	[LEDGER_BIZ_ID] = {"biz_id", TEXTOID},
	[LEDGER_STATUS] = {"status", InvalidOid},
	[LEDGER_AMOUNT] = {"amount", NUMERICOID},
	[LEDGER_CURRENCY] = {"currency", TEXTOID},
	[LEDGER_ATTEMPT] = {"attempt", INT4OID},
	[LEDGER_CHANNEL_REF] = {"channel_ref", TEXTOID},
	[LEDGER_LAST_ERROR] = {"last_error", TEXTOID},
	[LEDGER_CREATED_AT] = {"created_at", TIMESTAMPTZOID},
	[LEDGER_UPDATED_AT] = {"updated_at", TIMESTAMPTZOID},
	[LEDGER_PROCESSING_SINCE] = {"processing_since", TIMESTAMPTZOID},
	[LEDGER_NOTE] = {"note", TEXTOID, true},
	[LEDGER_RESPONSE] = {"response", JSONBOID, true},
	[LEDGER_PARENT] = {"parent", TEXTOID, true},
	[LEDGER_REFUND_KEY] = {"refund_key", TEXTOID, true},
};

static const ColumnSpec journal_columns[JOURNAL_COLUMNS] = {
	[JOURNAL_SEQ] = {"seq", INT8OID},
	[JOURNAL_BIZNO] = {"bizno", TEXTOID},
	[JOURNAL_ATTEMPT] = {"attempt", INT4OID},
	[JOURNAL_FROM] = {"from_status", InvalidOid},
	[JOURNAL_TO] = {"to_status", InvalidOid},
	[JOURNAL_AMOUNT] = {"amount", NUMERICOID},
	[JOURNAL_CURRENCY] = {"currency", TEXTOID},
	[JOURNAL_AT] = {"at", TIMESTAMPTZOID},
	[JOURNAL_TXID] = {"txid", XID8OID},
	[JOURNAL_ACTOR] = {"actor", TEXTOID},
	[JOURNAL_NOTE] = {"note", TEXTOID},
};

static PayCatalog catalog;
/* holds catalog.ledger_defaults; emptied at every lookup of the tables */
static MemoryContext tables_context = NULL;
static bool types_valid = false;
static bool tables_valid = false;
static bool callbacks_registered = false;
/* counts the invalidations that hit us, to detect one during a lookup */
static uint64 invalidations = 0;
/* the type cache hash values of pay_status and pay_action */
static uint32 status_type_hash = 0;
static uint32 action_type_hash = 0;
/* the syscache hash values of the ledger's own trigger functions */
static uint32 trigger_function_hashes[3];

/* A type changed (hashvalue 0: all of them), or a schema was renamed. */
static void
ForgetTypes(Datum arg, int cacheid, uint32 hashvalue)
{
	if (cacheid == NAMESPACEOID || hashvalue == 0 ||
		hashvalue == status_type_hash || hashvalue == action_type_hash)
	{
		types_valid = false;
		invalidations++;
	}
}

static void
ForgetTables(Datum arg, Oid relid)
{
	if (relid == InvalidOid || relid == catalog.ledger || relid == catalog.ledger_pkey ||
		relid == catalog.journal || relid == catalog.journal_sequence)
	{
		tables_valid = false;
		invalidations++;
	}
}

/*
 * One of the ledger's own trigger functions changed: ALTER EXTENSION UPDATE
 * points it at another entry point of the library, which direct writes,
 * firing the triggers themselves, must call from then on.
 */
static void
ForgetTriggerFunctions(Datum arg, int cacheid, uint32 hashvalue)
{
	for (size_t i = 0; i < lengthof(trigger_function_hashes); i++)
		if (hashvalue == 0 || hashvalue == trigger_function_hashes[i])
		{
			tables_valid = false;
			invalidations++;
			return;
		}
}

/* A constraint changed: a table's, or a domain's the ledger may use. */
static void
ForgetConstraints(Datum arg, int cacheid, uint32 hashvalue)
{
	tables_valid = false;
	invalidations++;
}

static void
RaiseMissing(const char *kind, const char *name)
{
	ereport(ERROR,
			(errcode(ERRCODE_UNDEFINED_OBJECT),
			 errmsg("%s \"%s\" of idempotent_pay is missing", kind, name),
			 errhint("Reinstall the extension, or restore the object from a dump.")));
}

static Oid
LookupType(Oid namespace, const char *name)
{
	Oid			type = GetSysCacheOid2(TYPENAMENSP, Anum_pg_type_oid,
									   CStringGetDatum(name),
									   ObjectIdGetDatum(namespace));

	if (!OidIsValid(type))
		RaiseMissing("type", name);
	return type;
}

static Oid
LookupLabel(Oid type, const char *label)
{
	HeapTuple	tuple = SearchSysCache2(ENUMTYPOIDNAME, ObjectIdGetDatum(type),
										CStringGetDatum(label));
	Oid			oid;

	if (!HeapTupleIsValid(tuple))
		RaiseMissing("enum label", label);
	oid = ((Form_pg_enum) GETSTRUCT(tuple))->oid;
	ReleaseSysCache(tuple);
	return oid;
}

static Oid
LookupRelation(Oid namespace, const char *name)
{
	Oid			relid = get_relname_relid(name, namespace);

	if (!OidIsValid(relid))
		RaiseMissing("relation", name);
	return relid;
}

/*
 * How far an expression may be evaluated by the API's direct writes
 * (direct.c) -- which run no SQL, and, on the hot path, keep the caller's
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
	ours = proc->pronamespace == catalog.namespace && proc->prolang == ClanguageId;
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
	/* a domain's checks, or a subquery, are more than a function call */
	if (IsA(node, CoerceToDomain) || IsA(node, SubLink) || IsA(node, SubPlan) ||
		IsA(node, NextValueExpr))
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

PayExpressionKind
PayExpressionKindOf(Node *expr)
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
			Max(kind, PayExpressionKindOf(stringToNode(TextDatumGetCString(bin))));
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
			kind = Max(kind, Max(PayExpressionKindOf((Node *) RelationGetIndexExpressions(index)),
								 PayExpressionKindOf((Node *) RelationGetIndexPredicate(index))));
		index_close(index, AccessShareLock);
		if (kind == PAY_EXPRESSION_FOREIGN)
			break;
	}
	list_free(indexes);
	return kind;
}

/*
 * The numbers of the columns specs names in rel, each checked for its
 * type; an optional column that is absent gets InvalidAttrNumber.
 */
static void
LookupColumns(Relation rel, const ColumnSpec *specs, int ncolumns, AttrNumber *attnums)
{
	TupleDesc	tupdesc = RelationGetDescr(rel);

	for (int i = 0; i < ncolumns; i++)
	{
		Oid			expected = OidIsValid(specs[i].type) ? specs[i].type : catalog.status_type;
		Form_pg_attribute attr = NULL;

		for (int a = 0; a < tupdesc->natts && attr == NULL; a++)
		{
			Form_pg_attribute candidate = TupleDescAttr(tupdesc, a);

			if (!candidate->attisdropped &&
				strcmp(NameStr(candidate->attname), specs[i].name) == 0)
				attr = candidate;
		}
		if (attr == NULL && specs[i].optional)
		{
			attnums[i] = InvalidAttrNumber;
			continue;
		}
		if (attr == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_COLUMN),
					 errmsg("column \"%s\" of relation \"%s\" is missing",
							specs[i].name, RelationGetRelationName(rel)),
					 errdetail("idempotent_pay writes it with every payment; without it a value would be lost."),
					 errhint("Add the column back as %s.", format_type_be(expected))));
		if (getBaseType(attr->atttypid) != expected)
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("column \"%s\" of relation \"%s\" is of type %s, not %s",
							specs[i].name, RelationGetRelationName(rel),
							format_type_be(attr->atttypid), format_type_be(expected)),
					 errdetail("idempotent_pay reads and writes it as %s.",
							   format_type_be(expected)),
					 errhint("Change the column back to %s.", format_type_be(expected))));
		attnums[i] = attr->attnum;
	}
}

/*
 * The ledger's primary key, which the API probes by bizno: a B-tree on
 * bizno alone.
 */
static Oid
LookupLedgerKey(Relation ledger)
{
	Oid			pkey = RelationGetPrimaryKeyIndex(ledger);
	Relation	index;
	bool		usable;

	if (OidIsValid(pkey))
	{
		index = index_open(pkey, AccessShareLock);
		usable = index->rd_rel->relam == BTREE_AM_OID &&
			index->rd_index->indnatts == 1 &&
			index->rd_index->indkey.values[0] == catalog.ledger_attnums[LEDGER_BIZNO];
		index_close(index, AccessShareLock);
		if (usable)
			return pkey;
	}
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("relation \"pay_ledger\" has no primary key on bizno"),
			 errdetail("One row per bizNo is what stops a second charge."),
			 errhint("ALTER TABLE pay_ledger ADD PRIMARY KEY (bizno).")));
	pg_unreachable();
}

/*
 * Whether journal rows may go straight into the journal's heap and indexes:
 * only when nothing the executor would do on INSERT is left undone -- every
 * column is one the trigger fills (no default to compute) and of exactly the
 * type it is filled with (no domain, no typmod to check), no generated
 * column, no INSERT trigger or rule, no row security, not partitioned and
 * no partition, and no CHECK constraint or index that could look at
 * search_path (PAY_EXPRESSION_PLAIN).  NOT NULL and CHECK constraints and
 * the indexes are applied by journal.c itself.
 */
static bool
JournalAllowsDirectInsert(Relation journal)
{
	TupleDesc	tupdesc = RelationGetDescr(journal);
	TriggerDesc *triggers = journal->trigdesc;
	int			columns = 0;

	for (int a = 0; a < tupdesc->natts; a++)
		if (!TupleDescAttr(tupdesc, a)->attisdropped)
			columns++;

	/* no domain or typmod whose check the executor's coercion would make */
	for (int i = 0; i < JOURNAL_COLUMNS; i++)
	{
		Form_pg_attribute attr = TupleDescAttr(tupdesc, catalog.journal_attnums[i] - 1);
		Oid			expected = OidIsValid(journal_columns[i].type) ?
		journal_columns[i].type : catalog.status_type;

		if (attr->atttypid != expected || attr->atttypmod != -1)
			return false;
	}

	/* CHECKs and indexes are evaluated where the caller's path is in force */
	for (int i = 0; tupdesc->constr && i < tupdesc->constr->num_check; i++)
		if (PayExpressionKindOf(stringToNode(tupdesc->constr->check[i].ccbin)) !=
			PAY_EXPRESSION_PLAIN)
			return false;
	if (IndexesKind(journal) != PAY_EXPRESSION_PLAIN)
		return false;

	return columns == JOURNAL_COLUMNS &&
		journal->rd_rel->relkind == RELKIND_RELATION &&
		!journal->rd_rel->relispartition &&
		!journal->rd_rel->relhasrules &&
		!journal->rd_rel->relrowsecurity &&
		!(tupdesc->constr && tupdesc->constr->has_generated_stored) &&
		!(triggers && (triggers->trig_insert_before_row ||
					   triggers->trig_insert_after_row ||
					   triggers->trig_insert_instead_row ||
					   triggers->trig_insert_before_statement ||
					   triggers->trig_insert_after_statement ||
					   triggers->trig_insert_new_table));
}

/*
 * A column the direct writes set: of exactly the type they write, or for
 * amount and currency a domain of its own, whose checks direct.c runs.
 */
static PayExpressionKind
LedgerColumnKind(Relation ledger, LedgerColumn column)
{
	Form_pg_attribute attr;
	Oid			expected = OidIsValid(ledger_columns[column].type) ?
	ledger_columns[column].type : catalog.status_type;

	if (catalog.ledger_attnums[column] == InvalidAttrNumber)
		return PAY_EXPRESSION_FOREIGN;
	attr = TupleDescAttr(RelationGetDescr(ledger), catalog.ledger_attnums[column] - 1);
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
 * access methods (direct.c), and what it then evaluates: not at all
 * (PAY_EXPRESSION_FOREIGN) unless the ledger is of 1.2, not partitioned,
 * without inheritance children (an UPDATE would reach them), with no rule,
 * no row security, no generated or identity column, no CHECK constraint on
 * the table, no trigger but the extension's own (each an unconditional row
 * trigger, as installed), the columns the API writes of exactly their types
 * (amount and currency may be domains), every other column of a base type
 * (no domain default or check to apply), and defaults, domain checks and
 * indexes that call no SQL or procedural function; the defaults are kept in
 * catalog.ledger_defaults.
 */
static PayExpressionKind
LedgerDirectWriteKind(Relation ledger)
{
	TupleDesc	tupdesc = RelationGetDescr(ledger);
	TriggerDesc *triggers = ledger->trigdesc;
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
		catalog.ledger_attnums[LEDGER_PARENT] == InvalidAttrNumber ||
		catalog.ledger_attnums[LEDGER_REFUND_KEY] == InvalidAttrNumber)
		return PAY_EXPRESSION_FOREIGN;

	for (int i = 0; i < (int) lengthof(written); i++)
		kind = Max(kind, LedgerColumnKind(ledger, written[i]));
	kind = Max(kind, IndexesKind(ledger));
	if (kind == PAY_EXPRESSION_FOREIGN)
		return kind;

	for (int i = 0; triggers && i < triggers->numtriggers; i++)
	{
		Trigger    *trigger = &triggers->triggers[i];

		if ((trigger->tgfoid != catalog.guard_function &&
			 trigger->tgfoid != catalog.bookkeeping_function &&
			 trigger->tgfoid != catalog.journal_function) ||
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

	old_context = MemoryContextSwitchTo(tables_context);
	catalog.ledger_defaults = palloc0(sizeof(Expr *) * tupdesc->natts);
	MemoryContextSwitchTo(old_context);
	for (int a = 0; a < tupdesc->natts; a++)
	{
		Form_pg_attribute attr = TupleDescAttr(tupdesc, a);
		Node	   *expr;

		if (attr->attisdropped)
			continue;
		if (attr->attidentity || attr->attgenerated)
			return PAY_EXPRESSION_FOREIGN;
		if (attr->attnum != catalog.ledger_attnums[LEDGER_AMOUNT] &&
			attr->attnum != catalog.ledger_attnums[LEDGER_CURRENCY] &&
			get_typtype(attr->atttypid) == TYPTYPE_DOMAIN)
			return PAY_EXPRESSION_FOREIGN;
		if (!attr->atthasdef)
			continue;
		expr = build_column_default(ledger, attr->attnum);
		if (expr == NULL)
			continue;
		kind = Max(kind, PayExpressionKindOf(expr));
		if (kind == PAY_EXPRESSION_FOREIGN)
			return kind;
		old_context = MemoryContextSwitchTo(tables_context);
		catalog.ledger_defaults[a] = expression_planner(copyObject((Expr *) expr));
		MemoryContextSwitchTo(old_context);
	}
	return kind;
}

static Oid
LookupTriggerFunction(Oid namespace, const char *name)
{
	Oid			function = GetSysCacheOid3(PROCNAMEARGSNSP, Anum_pg_proc_oid,
										   CStringGetDatum(name),
										   PointerGetDatum(buildoidvector(NULL, 0)),
										   ObjectIdGetDatum(namespace));

	if (!OidIsValid(function))
		RaiseMissing("function", name);
	return function;
}

static void
LookupTypes(FunctionCallInfo fcinfo)
{
	Oid			namespace = get_func_namespace(fcinfo->flinfo->fn_oid);

	/* the name again every time: ALTER SCHEMA ... RENAME keeps the OID */
	if (catalog.schema != NULL)
		pfree((char *) catalog.schema);
	catalog.schema = MemoryContextStrdup(CacheMemoryContext,
										 quote_identifier(get_namespace_name(namespace)));
	catalog.namespace = namespace;

	catalog.status_type = LookupType(namespace, "pay_status");
	status_type_hash = GetSysCacheHashValue1(TYPEOID, ObjectIdGetDatum(catalog.status_type));
	for (int status = 0; status < PAY_STATUS_COUNT; status++)
		catalog.status_labels[status] =
			LookupLabel(catalog.status_type, PayStatusName(status));

	catalog.action_type = LookupType(namespace, "pay_action");
	action_type_hash = GetSysCacheHashValue1(TYPEOID, ObjectIdGetDatum(catalog.action_type));
	for (int action = 0; action < PAY_ACTION_COUNT; action++)
		catalog.action_labels[action] =
			LookupLabel(catalog.action_type, PayActionName(action));
}

static void
LookupTables(void)
{
	Relation	ledger;
	Relation	journal;
	PayExpressionKind kind;

	if (tables_context == NULL)
		tables_context = AllocSetContextCreate(CacheMemoryContext, "idempotent_pay tables",
											   ALLOCSET_SMALL_SIZES);
	MemoryContextReset(tables_context);
	catalog.ledger_defaults = NULL;
	catalog.ledger_direct_kind = PAY_EXPRESSION_FOREIGN;

	catalog.guard_function = LookupTriggerFunction(catalog.namespace, "pay_guard");
	catalog.bookkeeping_function = LookupTriggerFunction(catalog.namespace,
														 "pay_ledger_bookkeeping");
	catalog.journal_function = LookupTriggerFunction(catalog.namespace, "pay_ledger_journal");
	trigger_function_hashes[0] = GetSysCacheHashValue1(PROCOID, ObjectIdGetDatum(catalog.guard_function));
	trigger_function_hashes[1] = GetSysCacheHashValue1(PROCOID, ObjectIdGetDatum(catalog.bookkeeping_function));
	trigger_function_hashes[2] = GetSysCacheHashValue1(PROCOID, ObjectIdGetDatum(catalog.journal_function));
	catalog.ledger = LookupRelation(catalog.namespace, "pay_ledger");
	ledger = table_open(catalog.ledger, AccessShareLock);
	LookupColumns(ledger, ledger_columns, LEDGER_COLUMNS, catalog.ledger_attnums);
	catalog.ledger_pkey = LookupLedgerKey(ledger);
	kind = LedgerDirectWriteKind(ledger);
	table_close(ledger, NoLock);

	catalog.journal = LookupRelation(catalog.namespace, "pay_journal");
	catalog.journal_sequence = LookupRelation(catalog.namespace, "pay_journal_seq_seq");
	journal = table_open(catalog.journal, AccessShareLock);
	LookupColumns(journal, journal_columns, JOURNAL_COLUMNS, catalog.journal_attnums);
	catalog.journal_direct = JournalAllowsDirectInsert(journal);
	table_close(journal, NoLock);
	/*
	 * A journal row inserted by SQL may fire a DBA's trigger on the journal,
	 * which would see pg_trigger_depth() one lower under a direct write of
	 * the ledger (the trigger manager's depth is its own): SQL for both.
	 */
	catalog.ledger_direct_kind = catalog.journal_direct ? kind : PAY_EXPRESSION_FOREIGN;
}

/*
 * The catalog of the extension whose function fcinfo calls: its schema and
 * types.  The tables are not looked at.
 */
const PayCatalog *
PayCatalogGet(FunctionCallInfo fcinfo)
{
	if (types_valid)
		return &catalog;

	if (!callbacks_registered)
	{
		CacheRegisterSyscacheCallback(TYPEOID, ForgetTypes, (Datum) 0);
		CacheRegisterSyscacheCallback(NAMESPACEOID, ForgetTypes, (Datum) 0);
		CacheRegisterRelcacheCallback(ForgetTables, (Datum) 0);
		CacheRegisterSyscacheCallback(CONSTROID, ForgetConstraints, (Datum) 0);
		CacheRegisterSyscacheCallback(PROCOID, ForgetTriggerFunctions, (Datum) 0);
		callbacks_registered = true;
	}

	/* an error leaves the flag false; an invalidation meanwhile, a retry */
	while (!types_valid)
	{
		uint64		before = invalidations;

		LookupTypes(fcinfo);
		catalog.generation++;
		types_valid = invalidations == before;
	}
	return &catalog;
}

/*
 * The catalog with the ledger's and the journal's columns.  Call it after
 * locking the table whose columns are read.
 */
const PayCatalog *
PayCatalogGetTables(FunctionCallInfo fcinfo)
{
	PayCatalogGet(fcinfo);
	while (!tables_valid)
	{
		uint64		before = invalidations;

		LookupTables();
		catalog.generation++;
		tables_valid = invalidations == before;
	}
	return &catalog;
}

/*
 * Pin search_path to the extension's schema and pg_temp until
 * AtEOXact_GUC(true, the level returned) -- or the abort of an error --
 * restores the caller's: what the API runs as SQL, and whatever that fires
 * (a DBA's trigger or default on the ledger, run as the extension owner),
 * never resolves a name on the caller's path; nor does what a direct write
 * evaluates when it is not PAY_EXPRESSION_PLAIN.
 */
int
PayPinSearchPath(const PayCatalog *catalog)
{
	int			nest_level = NewGUCNestLevel();

	(void) set_config_option("search_path", psprintf("%s, pg_temp", catalog->schema),
							 PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	return nest_level;
}

/*
 * The state of a pay_status label OID.
 */
PayStatus
PayStatusFromLabel(const PayCatalog *cat, Oid label)
{
	for (int status = 0; status < PAY_STATUS_COUNT; status++)
		if (cat->status_labels[status] == label)
			return (PayStatus) status;
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
			 errmsg("\"%s\" is not a state of the payment state machine",
					DatumGetCString(DirectFunctionCall1(enum_out, ObjectIdGetDatum(label)))),
			 errhint("pay_status has the labels INIT, PROCESSING, SUCCESS and FAILED; a label added to it is no state.")));
	pg_unreachable();
}
