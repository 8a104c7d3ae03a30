/*-------------------------------------------------------------------------
 *
 * ddl.c
 *	  pay_refuse_ddl(): DDL that would change the extension's own tables,
 *	  types and domains is refused, whoever runs it, superusers included.
 *
 * The guarantee that a settled payment is never charged again lives in the
 * definitions of the extension's objects as much as in its rows: a column
 * rewritten with USING, an enum label renamed, a trigger or rule of one's
 * own on the ledger each turn SUCCESS back into something pay_claim answers
 * PROCEED to, and no guard on a row sees it happen.  pay_refuse_ddl() is an
 * event trigger on ddl_command_start (ENABLE ALWAYS), so it sees the
 * statement before anything is rewritten, and refuses with 55000
 * pay_ddl_refused:
 *
 *	  ALTER TABLE, and its RENAME and SET SCHEMA, of the extension's tables
 *	  and of the archive's month partitions; ALTER TYPE and ALTER DOMAIN of
 *	  its types and domains; CREATE TRIGGER, ALTER TRIGGER, CREATE RULE,
 *	  ALTER RULE, CREATE POLICY and ALTER POLICY on those tables.
 *
 * What passes:
 *
 *	  - the extension's own scripts (creating_extension: CREATE EXTENSION,
 *		ALTER EXTENSION UPDATE) and pg_upgrade (binary upgrade mode);
 *	  - ALTER TABLE ... ENABLE [ALWAYS] TRIGGER: a trigger switched on again
 *		(pay_keep_guards_always puts a guard back to ALWAYS).  Switching
 *		one off, DISABLE TRIGGER of any kind or ENABLE REPLICA TRIGGER
 *		(which leaves it silent outside a replica's apply), is refused: a
 *		raw write past a guard switched off is the illegal step the guard
 *		exists to refuse.  pg_restore --disable-triggers runs in
 *		maintenance (PGOPTIONS='-c idempotent_pay.maintenance=on');
 *	  - ALTER TABLE ... SET / RESET (storage parameters), SET STATISTICS,
 *		CLUSTER ON and SET WITHOUT CLUSTER: the planner's and vacuum's
 *		settings, which change no row and no rule; and ALTER TABLE / ALTER
 *		DOMAIN ... VALIDATE CONSTRAINT, which only checks the rows (the
 *		update to 1.2 leaves the domains' checks for a DBA to validate);
 *	  - the archive's own forms, which pay_archive_partitions and a restore
 *		of pg_dump's output issue: a month partition's ADD PRIMARY KEY or
 *		UNIQUE, and ALTER TABLE ONLY pay_ledger_archive (pay_journal_archive)
 *		ATTACH PARTITION of a table named pay_ledger_archive_YYYY_MM
 *		(pay_journal_archive_YYYY_MM) in the extension's schema, for
 *		exactly the values of that month;
 *	  - the TRUNCATE guard of a partition of the archive, which
 *		pay_archive_partitions creates and a restore of pg_dump's output
 *		creates again: pay_ledger_archive_guard_truncate (on a partition of
 *		pay_journal_archive, pay_journal_archive_guard_truncate) BEFORE
 *		TRUNCATE FOR EACH STATEMENT EXECUTE FUNCTION pay_guard(), the
 *		extension's, and no other form;
 *	  - pg_repack's trigger, in the form pg_repack creates it and no other:
 *		named repack_trigger, AFTER INSERT OR DELETE OR UPDATE FOR EACH ROW
 *		with no condition, executing the function repack.repack_trigger of
 *		the extension pg_repack with the one argument that inserts into its
 *		log table of this very table (repack.log_<oid>);
 *	  - anything while a superuser has set idempotent_pay.maintenance: each
 *		statement so let through is recorded in pay_maintenance_log.
 *
 * A user's own tables, those pay_protect guards among them, are not the
 * extension's: their DDL is theirs.  The event trigger costs a payment
 * nothing: it fires on DDL alone.  What no event trigger sees (a catalog
 * updated by hand, a journal row written under session_replication_role
 * replica) pay_verify() reports.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/dependency.h"
#include "catalog/namespace.h"
#include "catalog/partition.h"
#include "catalog/pg_class.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "commands/event_trigger.h"
#include "commands/extension.h"
#include "catalog/pg_trigger.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/parsenodes.h"
#include "parser/parse_func.h"
#include "parser/parse_type.h"
#include "tcop/tcopprot.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"

#include "ddl.h"
#include "reason.h"
#include "settings.h"
#include "trigger_common.h"

PG_FUNCTION_INFO_V1(pay_refuse_ddl);

/* What the statement does to one of the extension's objects, if anything */
typedef enum DdlVerdict
{
	DDL_NOT_OURS,				/* no object of the extension: none of our business */
	DDL_ALLOWED,				/* a documented form: passes, unrecorded */
	DDL_REFUSED					/* passes only in maintenance, recorded */
} DdlVerdict;

/* The extension, its schema, and the object the statement is about */
typedef struct DdlTarget
{
	Oid			extension;
	Oid			namespace;
	Oid			relid;			/* the table, or InvalidOid */
	Oid			typid;			/* the type or domain, or InvalidOid */
} DdlTarget;

/*
 * Whether relid is one of the extension's tables (or composite types), or
 * a partition of one: the archive's month partitions are tables of their
 * own, for pg_dump's sake, but the archive all the same.
 */
static bool
IsOurRelation(const DdlTarget *target, Oid relid)
{
	Oid			rowtype;
	ListCell   *cell;

	if (!OidIsValid(relid))
		return false;
	if (getExtensionOfObject(RelationRelationId, relid) == target->extension)
		return true;
	rowtype = get_rel_type_id(relid);
	if (OidIsValid(rowtype) && getExtensionOfObject(TypeRelationId, rowtype) == target->extension)
		return true;
	if (!get_rel_relispartition(relid))
		return false;
	foreach(cell, get_partition_ancestors(relid))
		if (getExtensionOfObject(RelationRelationId, lfirst_oid(cell)) == target->extension)
			return true;
	return false;
}

/*
 * Whether typid is one of the extension's types or domains, or the row
 * type of one of its composite types.
 */
static bool
IsOurType(const DdlTarget *target, Oid typid)
{
	Oid			relid;

	if (!OidIsValid(typid))
		return false;
	if (getExtensionOfObject(TypeRelationId, typid) == target->extension)
		return true;
	relid = get_typ_typrelid(typid);
	return OidIsValid(relid) && IsOurRelation(target, relid);
}

/* The type a list of names denotes, InvalidOid when there is none */
static Oid
TypeOfNames(List *names)
{
	return LookupTypeNameOid(NULL, makeTypeNameFromNameList(names), true);
}

/* The table a RangeVar denotes, InvalidOid when there is none */
static Oid
RelationOf(RangeVar *relation)
{
	if (relation == NULL)
		return InvalidOid;
	return RangeVarGetRelid(relation, NoLock, true);
}

/* The text of an A_Const string, NULL for anything else */
static const char *
ConstString(Node *node)
{
	A_Const    *con;

	if (node == NULL || !IsA(node, A_Const))
		return NULL;
	con = (A_Const *) node;
	if (con->isnull || !IsA(&con->val, String))
		return NULL;
	return strVal(&con->val);
}

/*
 * Whether cmd attaches a month partition to the archive as pg_dump's output
 * does it: ALTER TABLE [ONLY] pay_ledger_archive ATTACH PARTITION
 * pay_ledger_archive_YYYY_MM FOR VALUES FROM ('YYYY-MM-01') TO (the first
 * of the next month), the partition in the extension's schema (the same
 * for pay_journal_archive).
 */
static bool
IsMonthAttach(const DdlTarget *target, Oid parent, AlterTableCmd *cmd)
{
	PartitionCmd *partition = (PartitionCmd *) cmd->def;
	const char *parent_name = get_rel_name(parent);
	const char *name;
	PartitionBoundSpec *bound;
	int			year;
	int			month;
	char		tail;
	const char *lower;
	const char *upper;
	Oid			relid;

	if (partition == NULL || !IsA(partition, PartitionCmd) || partition->name == NULL ||
		get_rel_namespace(parent) != target->namespace ||
		(strcmp(parent_name, "pay_ledger_archive") != 0 &&
		 strcmp(parent_name, "pay_journal_archive") != 0))
		return false;
	relid = RelationOf(partition->name);
	if (!OidIsValid(relid) || get_rel_namespace(relid) != target->namespace)
		return false;
	name = get_rel_name(relid);
	if (strncmp(name, parent_name, strlen(parent_name)) != 0 ||
		sscanf(name + strlen(parent_name), "_%4d_%2d%c", &year, &month, &tail) != 2 ||
		strlen(name) != strlen(parent_name) + 8 || month < 1 || month > 12)
		return false;
	bound = partition->bound;
	if (bound == NULL || bound->strategy != PARTITION_STRATEGY_RANGE || bound->is_default ||
		list_length(bound->lowerdatums) != 1 || list_length(bound->upperdatums) != 1)
		return false;
	lower = ConstString(linitial(bound->lowerdatums));
	upper = ConstString(linitial(bound->upperdatums));
	return lower != NULL && upper != NULL &&
		strcmp(lower, psprintf("%04d-%02d-01", year, month)) == 0 &&
		strcmp(upper, psprintf("%04d-%02d-01", month == 12 ? year + 1 : year,
							   month == 12 ? 1 : month + 1)) == 0;
}

/*
 * The verdict on one subcommand of ALTER TABLE on relid, one of ours.
 */
static DdlVerdict
AlterTableCmdVerdict(const DdlTarget *target, Oid relid, AlterTableCmd *cmd)
{
	switch (cmd->subtype)
	{
		case AT_EnableTrig:
		case AT_EnableAlwaysTrig:
		case AT_EnableTrigAll:
		case AT_EnableTrigUser:
		case AT_SetRelOptions:
		case AT_ResetRelOptions:
		case AT_SetStatistics:
		case AT_ClusterOn:
		case AT_DropCluster:
		case AT_ValidateConstraint:
			return DDL_ALLOWED;
		case AT_AddConstraint:
		case AT_AddIndex:
			{
				/* a month partition's key, as pay_archive_partitions makes it */
				Constraint *constraint = (Constraint *) cmd->def;

				if (getExtensionOfObject(RelationRelationId, relid) != target->extension &&
					constraint != NULL && IsA(constraint, Constraint) &&
					(constraint->contype == CONSTR_PRIMARY || constraint->contype == CONSTR_UNIQUE))
					return DDL_ALLOWED;
				return DDL_REFUSED;
			}
		case AT_AttachPartition:
			return IsMonthAttach(target, relid, cmd) ? DDL_ALLOWED : DDL_REFUSED;
		default:
			return DDL_REFUSED;
	}
}

/*
 * Whether stmt creates the trigger pg_repack creates on a table it
 * repacks (its repack.get_create_trigger), and nothing else: the trigger
 * logs each change of the table into pg_repack's own log table while the
 * copy is made, and pg_repack drops it when done.
 */
static bool
IsRepackTrigger(Oid relid, CreateTrigStmt *stmt)
{
	Oid			repack = get_extension_oid("pg_repack", true);
	Oid			function;
	const char *argument;
	const char *expected;

	if (!OidIsValid(repack) || stmt->trigname == NULL ||
		strcmp(stmt->trigname, "repack_trigger") != 0 ||
		stmt->replace || stmt->isconstraint || !stmt->row ||
		stmt->timing != TRIGGER_TYPE_AFTER ||
		stmt->events != (TRIGGER_TYPE_INSERT | TRIGGER_TYPE_DELETE | TRIGGER_TYPE_UPDATE) ||
		stmt->columns != NIL || stmt->whenClause != NULL || stmt->transitionRels != NIL ||
		list_length(stmt->args) != 1 || list_length(stmt->funcname) != 2 ||
		strcmp(strVal(linitial(stmt->funcname)), "repack") != 0 ||
		strcmp(strVal(lsecond(stmt->funcname)), "repack_trigger") != 0)
		return false;
	function = LookupFuncName(stmt->funcname, 0, NULL, true);
	if (!OidIsValid(function) || getExtensionOfObject(ProcedureRelationId, function) != repack)
		return false;
	argument = strVal(linitial(stmt->args));
	expected = psprintf("INSERT INTO repack.log_%u(pk, row) VALUES(", relid);
	return strncmp(argument, expected, strlen(expected)) == 0;
}

/*
 * Whether stmt creates the TRUNCATE guard of a partition of the archive, as
 * pay_archive_partitions makes it and pg_dump's output restores it: on a
 * partition (not of the extension: a month's) of pay_ledger_archive, the
 * trigger pay_ledger_archive_guard_truncate BEFORE TRUNCATE FOR EACH
 * STATEMENT executing the extension's pay_guard() with no arguments (the
 * same for pay_journal_archive).  A partition does not inherit its
 * partitioned table's TRUNCATE trigger; this one only refuses.
 */
static bool
IsArchiveTruncateGuard(const DdlTarget *target, Oid relid, CreateTrigStmt *stmt)
{
	Oid			parent;
	const char *parent_name;
	Oid			function;

	if (getExtensionOfObject(RelationRelationId, relid) == target->extension ||
		!get_rel_relispartition(relid) || stmt->trigname == NULL ||
		stmt->replace || stmt->isconstraint || stmt->row ||
		stmt->timing != TRIGGER_TYPE_BEFORE || stmt->events != TRIGGER_TYPE_TRUNCATE ||
		stmt->columns != NIL || stmt->whenClause != NULL || stmt->transitionRels != NIL ||
		stmt->args != NIL)
		return false;
	parent = get_partition_parent(relid, false);
	parent_name = get_rel_name(parent);
	if (getExtensionOfObject(RelationRelationId, parent) != target->extension ||
		(strcmp(parent_name, "pay_ledger_archive") != 0 &&
		 strcmp(parent_name, "pay_journal_archive") != 0) ||
		strcmp(stmt->trigname, psprintf("%s_guard_truncate", parent_name)) != 0)
		return false;
	function = LookupFuncName(stmt->funcname, 0, NULL, true);
	return OidIsValid(function) && get_func_namespace(function) == target->namespace &&
		strcmp(get_func_name(function), "pay_guard") == 0;
}

/*
 * What parsetree does to the extension's objects; target->relid or
 * target->typid is set to the object concerned.
 */
static DdlVerdict
StatementVerdict(DdlTarget *target, Node *parsetree)
{
	switch (nodeTag(parsetree))
	{
		case T_AlterTableStmt:
			{
				AlterTableStmt *stmt = (AlterTableStmt *) parsetree;
				DdlVerdict	verdict = DDL_ALLOWED;
				ListCell   *cell;

				target->relid = RelationOf(stmt->relation);
				if (!IsOurRelation(target, target->relid))
					return DDL_NOT_OURS;
				foreach(cell, stmt->cmds)
					if (AlterTableCmdVerdict(target, target->relid, lfirst(cell)) == DDL_REFUSED)
						verdict = DDL_REFUSED;
				return verdict;
			}
		case T_AlterEnumStmt:
			target->typid = TypeOfNames(((AlterEnumStmt *) parsetree)->typeName);
			break;
		case T_AlterDomainStmt:
			{
				AlterDomainStmt *stmt = (AlterDomainStmt *) parsetree;

				target->typid = TypeOfNames(stmt->typeName);
				/* VALIDATE CONSTRAINT checks the rows, and changes no rule */
				if (stmt->subtype == 'V')
					return IsOurType(target, target->typid) ? DDL_ALLOWED : DDL_NOT_OURS;
				break;
			}
		case T_AlterTypeStmt:
			target->typid = TypeOfNames(((AlterTypeStmt *) parsetree)->typeName);
			break;
		case T_RenameStmt:
			{
				RenameStmt *stmt = (RenameStmt *) parsetree;

				switch (stmt->renameType)
				{
					case OBJECT_TYPE:
					case OBJECT_DOMAIN:
					case OBJECT_DOMCONSTRAINT:
						target->typid = TypeOfNames(castNode(List, stmt->object));
						break;
					case OBJECT_TABLE:
					case OBJECT_FOREIGN_TABLE:
					case OBJECT_COLUMN:
					case OBJECT_ATTRIBUTE:
					case OBJECT_TABCONSTRAINT:
					case OBJECT_TRIGGER:
					case OBJECT_RULE:
					case OBJECT_POLICY:
						target->relid = RelationOf(stmt->relation);
						break;
					default:
						return DDL_NOT_OURS;
				}
				break;
			}
		case T_AlterObjectSchemaStmt:
			{
				AlterObjectSchemaStmt *stmt = (AlterObjectSchemaStmt *) parsetree;

				if (stmt->objectType == OBJECT_TYPE || stmt->objectType == OBJECT_DOMAIN)
					target->typid = TypeOfNames(castNode(List, stmt->object));
				else if (stmt->objectType == OBJECT_TABLE)
					target->relid = RelationOf(stmt->relation);
				else
					return DDL_NOT_OURS;
				break;
			}
		case T_AlterOwnerStmt:
			{
				AlterOwnerStmt *stmt = (AlterOwnerStmt *) parsetree;

				if (stmt->objectType != OBJECT_TYPE && stmt->objectType != OBJECT_DOMAIN)
					return DDL_NOT_OURS;
				target->typid = TypeOfNames(castNode(List, stmt->object));
				break;
			}
		case T_AlterObjectDependsStmt:
			{
				AlterObjectDependsStmt *stmt = (AlterObjectDependsStmt *) parsetree;

				if (stmt->objectType != OBJECT_TRIGGER)
					return DDL_NOT_OURS;
				target->relid = RelationOf(stmt->relation);
				break;
			}
		case T_CreateTrigStmt:
			{
				CreateTrigStmt *stmt = (CreateTrigStmt *) parsetree;

				target->relid = RelationOf(stmt->relation);
				if (!IsOurRelation(target, target->relid))
					return DDL_NOT_OURS;
				return IsRepackTrigger(target->relid, stmt) ||
					IsArchiveTruncateGuard(target, target->relid, stmt) ? DDL_ALLOWED : DDL_REFUSED;
			}
		case T_RuleStmt:
			target->relid = RelationOf(((RuleStmt *) parsetree)->relation);
			break;
		case T_CreatePolicyStmt:
			target->relid = RelationOf(((CreatePolicyStmt *) parsetree)->table);
			break;
		case T_AlterPolicyStmt:
			target->relid = RelationOf(((AlterPolicyStmt *) parsetree)->table);
			break;
		default:
			return DDL_NOT_OURS;
	}
	if (IsOurRelation(target, target->relid) || IsOurType(target, target->typid))
		return DDL_REFUSED;
	return DDL_NOT_OURS;
}

/* The object concerned, as pay_maintenance_log and the error name it */
static const char *
TargetName(const DdlTarget *target)
{
	if (OidIsValid(target->relid))
		return psprintf("%s.%s", quote_identifier(get_namespace_name(get_rel_namespace(target->relid))),
						quote_identifier(get_rel_name(target->relid)));
	return format_type_be_qualified(target->typid);
}

/*
 * Append the statement let through in maintenance to pay_maintenance_log,
 * as the owner of the log (whoever runs the DDL may not write it), with
 * the role that ran it as the actor.
 */
static void
RecordMaintenance(const DdlTarget *target, const char *tag, const char *object)
{
	Oid			log = get_relname_relid("pay_maintenance_log", target->namespace);
	Oid			saved_user;
	int			saved_context;
	Oid			owner;
	Oid			types[4] = {TEXTOID, TEXTOID, TEXTOID, TEXTOID};
	Datum		values[4];
	char		nulls[4] = {' ', ' ', ' ', ' '};
	HeapTuple	tuple;
	bool		permit;
	volatile int ret = 0;

	if (!OidIsValid(log))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("pay_maintenance_log of idempotent_pay is missing"),
				 errhint("Reinstall the extension, or restore the table from a dump.")));
	tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(log));
	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "cache lookup failed for relation %u", log);
	owner = ((Form_pg_class) GETSTRUCT(tuple))->relowner;
	ReleaseSysCache(tuple);

	values[0] = CStringGetTextDatum(GetUserNameFromId(GetUserId(), false));
	values[1] = CStringGetTextDatum(tag);
	values[2] = CStringGetTextDatum(object);
	if (debug_query_string != NULL)
		values[3] = CStringGetTextDatum(debug_query_string);
	else
		nulls[3] = 'n';

	GetUserIdAndSecContext(&saved_user, &saved_context);
	SetUserIdAndSecContext(owner, saved_context | SECURITY_LOCAL_USERID_CHANGE);
	SPI_connect();
	/* the log's guard lets this row alone pass (PayPermitOwnRow) */
	permit = PayPermitOwnRow();
	PG_TRY();
	{
		ret = SPI_execute_with_args(psprintf("INSERT INTO %s.pay_maintenance_log (actor, command_tag, object, command) "
											 "VALUES ($1, $2, $3, $4)",
											 quote_identifier(get_namespace_name(target->namespace))),
									4, types, values, nulls, false, 0);
	}
	PG_FINALLY();
	{
		PayEndOwnRow(permit);
	}
	PG_END_TRY();
	if (ret != SPI_OK_INSERT)
		elog(ERROR, "could not record the maintenance DDL");
	SPI_finish();
	SetUserIdAndSecContext(saved_user, saved_context);
}

/*
 * Whether the session's role owns the object concerned.  One that does not
 * may alter it in no way at all, and PostgreSQL refuses it with its own
 * 42501 once the statement runs: a clearer answer for that role than ours.
 */
static bool
OwnsTarget(const DdlTarget *target)
{
	HeapTuple	tuple;
	Oid			owner;

	if (OidIsValid(target->relid))
	{
		tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(target->relid));
		if (!HeapTupleIsValid(tuple))
			return true;
		owner = ((Form_pg_class) GETSTRUCT(tuple))->relowner;
	}
	else if (OidIsValid(target->typid))
	{
		tuple = SearchSysCache1(TYPEOID, ObjectIdGetDatum(target->typid));
		if (!HeapTupleIsValid(tuple))
			return true;
		owner = ((Form_pg_type) GETSTRUCT(tuple))->typowner;
	}
	else
		return true;
	ReleaseSysCache(tuple);
	return has_privs_of_role(GetUserId(), owner);
}

/*
 * pay_refuse_ddl() returns event_trigger
 */
Datum
pay_refuse_ddl(PG_FUNCTION_ARGS)
{
	EventTriggerData *trigdata = (EventTriggerData *) fcinfo->context;
	DdlTarget	target = {0};
	const char *object;

	if (!CALLED_AS_EVENT_TRIGGER(fcinfo) || strcmp(trigdata->event, "ddl_command_start") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_EVENT_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("pay_refuse_ddl() must be fired as an event trigger on ddl_command_start")));

	/* the extension's own scripts, and pg_upgrade, make its objects */
	if (creating_extension || IsBinaryUpgrade)
		PG_RETURN_VOID();

	target.extension = getExtensionOfObject(ProcedureRelationId, fcinfo->flinfo->fn_oid);
	target.namespace = get_func_namespace(fcinfo->flinfo->fn_oid);
	if (!OidIsValid(target.extension))
		PG_RETURN_VOID();

	if (StatementVerdict(&target, trigdata->parsetree) != DDL_REFUSED || !OwnsTarget(&target))
		PG_RETURN_VOID();

	object = TargetName(&target);
	if (pay_maintenance)
	{
		RecordMaintenance(&target, GetCommandTagName(trigdata->tag), object);
		PG_RETURN_VOID();
	}
	ereport(ERROR,
			(errmsg("%s of %s is refused: it is an object of idempotent_pay",
					GetCommandTagName(trigdata->tag), object),
			 errdetail("A change to the extension's tables, types or domains can make settled payments payable again; "
					   "the extension's own scripts, the archive and pg_repack make the changes they need themselves."),
			 PayReason(PAY_REASON_DDL_REFUSED)));
	PG_RETURN_VOID();
}
