/*-------------------------------------------------------------------------
 *
 * guard.c
 *	  pay_guard(): the trigger that enforces the state machine on a table;
 *	  pay_allowed(); and the checks every trigger of the extension makes.
 *
 * Installed BEFORE INSERT OR UPDATE OR DELETE FOR EACH ROW and BEFORE
 * TRUNCATE FOR EACH STATEMENT, ENABLE ALWAYS, with the arguments
 *
 *	  pay_guard(status_column [, frozen_column ...])
 *
 * on the ledger and on user tables: INSERT starts in INIT or PROCESSING,
 * UPDATE follows the transition table of machine.c (a write that leaves the
 * status alone is not a transition), frozen columns keep their values while
 * PROCESSING or SUCCESS, PROCESSING and SUCCESS rows are not deleted, and
 * TRUNCATE is refused.  With no arguments the table is append-only (the
 * journal): UPDATE, DELETE and TRUNCATE are refused.
 *
 * An INSERT may carry any state where rows arrive whose history was checked
 * where they were made: under session_replication_role = replica (a logical
 * replica's apply), and in a restore of pg_dump's output (PayRestoring).
 * UPDATE and DELETE are guarded there too.
 *
 * The column numbers are resolved from the trigger's arguments and the
 * relation's descriptor once per statement and kept in fn_extra: no catalog
 * or SPI lookup per row.
 *
 * Like PostgreSQL's own trigger functions, every trigger of the extension
 * first checks how it was fired (PayCheckTriggerProtocol): a trigger
 * created by hand for the wrong timing, level or event, or a direct call,
 * is refused with 39P01 instead of reading a tuple that is not there.
 *
 * pay_allowed exposes the transition table to SQL, and
 * PayRaiseIllegalTransition is the one error for a step it refuses.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/relation.h"
#include "catalog/pg_index.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/rls.h"
#include "utils/datum.h"
#include "utils/rel.h"

#include "catalog.h"
#include "guard.h"
#include "machine.h"

typedef struct GuardConfig
{
	bool		append_only;
	AttrNumber	status_attnum;
	bool		status_is_enum; /* pay_status, else text or varchar */
	int			nfrozen;
	AttrNumber *frozen_attnums;
	const PayCatalog *catalog;
} GuardConfig;

#define APPEND_ONLY_HINT \
	"The journal is the history: it is appended to, never rewritten."
#define PROTECTED_ROW_HINT \
	"Keep the record of a payment being charged or paid; only INIT and FAILED payments may be deleted."

PG_FUNCTION_INFO_V1(pay_guard);
PG_FUNCTION_INFO_V1(pay_allowed);

/*
 * Refuse (39P01) unless fcinfo is a call of the trigger manager for a row
 * trigger fired at timing (TRIGGER_EVENT_BEFORE or TRIGGER_EVENT_AFTER) by
 * one of events (a mask of PAY_ON_INSERT, PAY_ON_UPDATE, PAY_ON_DELETE).  A
 * statement-level TRUNCATE is accepted when truncate_too.
 */
void
PayCheckTriggerProtocol(FunctionCallInfo fcinfo, const char *function,
						TriggerEvent timing, int events, bool truncate_too)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	TriggerEvent event;
	const char *expected;

	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("%s was not called by the trigger manager", function)));

	event = trigdata->tg_event;
	expected = timing == TRIGGER_EVENT_BEFORE ? "BEFORE" : "AFTER";
	if ((event & TRIGGER_EVENT_TIMINGMASK) != timing)
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("%s must be fired %s", function, expected)));

	if (TRIGGER_FIRED_BY_TRUNCATE(event))
	{
		if (!truncate_too)
			ereport(ERROR,
					(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
					 errmsg("%s must not be fired by TRUNCATE", function)));
		return;
	}

	if (!TRIGGER_FIRED_FOR_ROW(event))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("%s must be fired FOR EACH ROW", function)));

	/* a deferred constraint trigger would act twice or out of order */
	if (OidIsValid(trigdata->tg_trigger->tgconstraint))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("%s must not be fired as a constraint trigger", function)));

	if ((TRIGGER_FIRED_BY_INSERT(event) && !(events & PAY_ON_INSERT)) ||
		(TRIGGER_FIRED_BY_UPDATE(event) && !(events & PAY_ON_UPDATE)) ||
		(TRIGGER_FIRED_BY_DELETE(event) && !(events & PAY_ON_DELETE)))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("%s must not be fired by %s", function,
						TRIGGER_FIRED_BY_INSERT(event) ? "INSERT" :
						TRIGGER_FIRED_BY_UPDATE(event) ? "UPDATE" : "DELETE")));
}

/*
 * Whether the current write is part of a restore of pg_dump's output.
 *
 * Every script pg_dump writes, and every connection of pg_restore (serial,
 * parallel, single-transaction, data-only), sets row_security = off and
 * check_function_bodies = false before it loads any data -- unless the
 * dump or restore is run with --enable-row-security, which README.md says
 * not to do; an application does neither.  Restoring idempotent_pay takes
 * a superuser (CREATE EXTENSION does), and an application role never is
 * one.  A superuser's INSERT in that state is taken as it comes -- any
 * state, the ledger's history untouched, no journal row (the journal
 * arrives with the data).  The API's own writes run inside SECURITY
 * DEFINER functions, which a restore never does, so they are never taken
 * for one.  A superuser who sets both by hand is restoring, as far as the
 * guard can tell.
 */
bool
PayRestoring(void)
{
	return !row_security && !check_function_bodies && !InLocalUserIdChange() &&
		superuser();
}

/*
 * Act as the owner of rel until PayRestoreUser: the way PostgreSQL runs
 * maintenance as a table's owner, a security-restricted operation with
 * search_path pinned to pg_catalog, so that what a trigger reads or writes
 * does not depend on the privileges or the search_path of the session that
 * fired it.  An error on the way out restores both at transaction abort.
 */
void
PayBecomeOwner(Relation rel, PayOwnerContext *context)
{
	GetUserIdAndSecContext(&context->saved_user, &context->saved_sec_context);
	SetUserIdAndSecContext(rel->rd_rel->relowner,
						   context->saved_sec_context | SECURITY_LOCAL_USERID_CHANGE |
						   SECURITY_RESTRICTED_OPERATION);
	context->guc_nest_level = NewGUCNestLevel();
	(void) set_config_option("search_path", "pg_catalog, pg_temp", PGC_USERSET,
							 PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
}

void
PayRestoreUser(const PayOwnerContext *context)
{
	AtEOXact_GUC(true, context->guc_nest_level);
	SetUserIdAndSecContext(context->saved_user, context->saved_sec_context);
}

/*
 * Raise 23514 pay_status_transition for from -> to on the row described by
 * key (e.g. "bizNo PAY-..." or "(id)=(42)").  rel may be NULL when no table
 * is at hand (the API refuses before it writes).
 */
void
PayRaiseIllegalTransition(Relation rel, const char *key, int from, PayStatus to)
{
	const char *from_name = from == PAY_NEW_ROW ? "(new row)" : PayStatusName(from);

	ereport(ERROR,
			(errcode(ERRCODE_CHECK_VIOLATION),
			 errmsg("illegal payment status transition from %s to %s",
					from_name, PayStatusName(to)),
			 errdetail("%s: %s -> %s is refused because %s.",
					   key, from_name, PayStatusName(to),
					   PayTransitionReason(from, to)),
			 errhint("%s", PayTransitionHint(from, to)),
			 rel ? errtable(rel) : 0,
			 err_generic_string(PG_DIAG_CONSTRAINT_NAME, "pay_status_transition")));
}

static AttrNumber
ColumnNumber(Relation rel, const char *column)
{
	TupleDesc	tupdesc = RelationGetDescr(rel);

	for (int i = 0; i < tupdesc->natts; i++)
	{
		Form_pg_attribute attr = TupleDescAttr(tupdesc, i);

		if (!attr->attisdropped && strcmp(NameStr(attr->attname), column) == 0)
			return attr->attnum;
	}
	ereport(ERROR,
			(errcode(ERRCODE_UNDEFINED_COLUMN),
			 errmsg("column \"%s\" of relation \"%s\" does not exist",
					column, RelationGetRelationName(rel))));
	pg_unreachable();
}

static GuardConfig *
BuildGuardConfig(FunctionCallInfo fcinfo, TriggerData *trigdata)
{
	Relation	rel = trigdata->tg_relation;
	Trigger    *trigger = trigdata->tg_trigger;
	GuardConfig *config;
	Oid			status_type;

	config = MemoryContextAllocZero(fcinfo->flinfo->fn_mcxt, sizeof(GuardConfig));
	config->catalog = PayCatalogGet(fcinfo);
	config->append_only = trigger->tgnargs == 0;
	if (config->append_only)
		return config;

	config->status_attnum = ColumnNumber(rel, trigger->tgargs[0]);
	status_type = TupleDescAttr(RelationGetDescr(rel),
								config->status_attnum - 1)->atttypid;
	if (status_type == config->catalog->status_type)
		config->status_is_enum = true;
	else if (status_type != TEXTOID && status_type != VARCHAROID)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("status column \"%s\" of relation \"%s\" is of type %s",
						trigger->tgargs[0], RelationGetRelationName(rel),
						format_type_be(status_type)),
				 errhint("A guarded status column is of type pay_status, text or varchar.")));

	config->nfrozen = trigger->tgnargs - 1;
	config->frozen_attnums = MemoryContextAlloc(fcinfo->flinfo->fn_mcxt,
												sizeof(AttrNumber) * Max(config->nfrozen, 1));
	for (int i = 0; i < config->nfrozen; i++)
		config->frozen_attnums[i] = ColumnNumber(rel, trigger->tgargs[i + 1]);
	return config;
}

/*
 * "(key columns)=(values)" of tuple from the table's primary key, for error
 * details; "a row of <table>" when there is no primary key to show.
 */
char *
PayRowKeyDescription(Relation rel, HeapTuple tuple)
{
	Oid			pk = RelationGetPrimaryKeyIndex(rel);
	Relation	index;
	Datum		values[INDEX_MAX_KEYS];
	bool		isnull[INDEX_MAX_KEYS];
	char	   *description = NULL;

	if (OidIsValid(pk))
	{
		index = relation_open(pk, AccessShareLock);
		for (int i = 0; i < index->rd_index->indnkeyatts; i++)
		{
			AttrNumber	attnum = index->rd_index->indkey.values[i];

			if (attnum <= 0)
				break;
			values[i] = heap_getattr(tuple, attnum, RelationGetDescr(rel), &isnull[i]);
			if (i == index->rd_index->indnkeyatts - 1)
				description = BuildIndexValueDescription(index, values, isnull);
		}
		relation_close(index, AccessShareLock);
	}
	if (description == NULL)
		description = psprintf("a row of \"%s\"", RelationGetRelationName(rel));
	return description;
}

/*
 * The state in the status column of tuple; NULL or a label that is not a
 * state is refused.
 */
static PayStatus
StatusOfRow(GuardConfig *config, Relation rel, HeapTuple tuple)
{
	bool		isnull;
	Datum		value = heap_getattr(tuple, config->status_attnum,
									 RelationGetDescr(rel), &isnull);
	PayStatus	status;
	text	   *label;

	if (isnull)
		ereport(ERROR,
				(errcode(ERRCODE_CHECK_VIOLATION),
				 errmsg("payment status of %s must not be null",
						PayRowKeyDescription(rel, tuple)),
				 errhint("A payment is always in one of INIT, PROCESSING, SUCCESS and FAILED."),
				 errtable(rel),
				 err_generic_string(PG_DIAG_CONSTRAINT_NAME, "pay_status_transition")));

	if (config->status_is_enum)
		return PayStatusFromLabel(config->catalog, DatumGetObjectId(value));

	label = DatumGetTextPP(value);
	if (!PayStatusFromText(VARDATA_ANY(label), VARSIZE_ANY_EXHDR(label), &status))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
				 errmsg("invalid payment status \"%s\" in %s", text_to_cstring(label),
						PayRowKeyDescription(rel, tuple)),
				 errhint("A payment status is INIT, PROCESSING, SUCCESS or FAILED.")));
	return status;
}

static void
RaiseGuardRefusal(Relation rel, const char *constraint, const char *message,
				  const char *detail, const char *hint)
{
	ereport(ERROR,
			(errcode(ERRCODE_CHECK_VIOLATION),
			 errmsg("%s on table \"%s\"", message, RelationGetRelationName(rel)),
			 errdetail("%s", detail),
			 errhint("%s", hint),
			 errtable(rel),
			 err_generic_string(PG_DIAG_CONSTRAINT_NAME, constraint)));
}

/*
 * Whether column attnum holds the same value, byte for byte, in both
 * versions of a row.
 */
bool
PayColumnUnchanged(Relation rel, HeapTuple oldtuple, HeapTuple newtuple,
				   AttrNumber attnum)
{
	TupleDesc	tupdesc = RelationGetDescr(rel);
	Form_pg_attribute attr = TupleDescAttr(tupdesc, attnum - 1);
	bool		oldnull,
				newnull;
	Datum		oldvalue = heap_getattr(oldtuple, attnum, tupdesc, &oldnull);
	Datum		newvalue = heap_getattr(newtuple, attnum, tupdesc, &newnull);

	return oldnull == newnull &&
		(oldnull || datum_image_eq(oldvalue, newvalue, attr->attbyval, attr->attlen));
}

static void
CheckFrozenColumns(GuardConfig *config, Relation rel, HeapTuple oldtuple,
				   HeapTuple newtuple, PayStatus status)
{
	for (int i = 0; i < config->nfrozen; i++)
	{
		AttrNumber	attnum = config->frozen_attnums[i];
		Form_pg_attribute attr = TupleDescAttr(RelationGetDescr(rel), attnum - 1);

		if (PayColumnUnchanged(rel, oldtuple, newtuple, attnum))
			continue;

		RaiseGuardRefusal(rel, "pay_frozen_column",
						  psprintf("column \"%s\" is frozen", NameStr(attr->attname)),
						  psprintf("%s is %s: \"%s\" is frozen while PROCESSING or SUCCESS.",
								   PayRowKeyDescription(rel, oldtuple),
								   PayStatusName(status), NameStr(attr->attname)),
						  "A payment being charged or paid keeps these values; record a new payment for new ones.");
	}
}

/*
 * pay_guard() returns trigger
 */
Datum
pay_guard(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	GuardConfig *config;
	Relation	rel;
	TriggerEvent event;

	PayCheckTriggerProtocol(fcinfo, "pay_guard()", TRIGGER_EVENT_BEFORE,
							PAY_ON_INSERT | PAY_ON_UPDATE | PAY_ON_DELETE,
							true);

	rel = trigdata->tg_relation;
	event = trigdata->tg_event;
	config = fcinfo->flinfo->fn_extra;
	if (config == NULL)
		fcinfo->flinfo->fn_extra = config = BuildGuardConfig(fcinfo, trigdata);

	if (TRIGGER_FIRED_BY_TRUNCATE(event))
		RaiseGuardRefusal(rel, config->append_only ? "pay_append_only" : "pay_protected_row",
						  "TRUNCATE is refused",
						  config->append_only ? "The table is append-only." :
						  "Payment rows are never removed wholesale.",
						  config->append_only ? APPEND_ONLY_HINT : PROTECTED_ROW_HINT);

	if (config->append_only)
	{
		if (TRIGGER_FIRED_BY_INSERT(event))
			return PointerGetDatum(trigdata->tg_trigtuple);
		RaiseGuardRefusal(rel, "pay_append_only",
						  TRIGGER_FIRED_BY_UPDATE(event) ? "UPDATE is refused" : "DELETE is refused",
						  "The table is append-only.", APPEND_ONLY_HINT);
	}

	if (TRIGGER_FIRED_BY_INSERT(event))
	{
		HeapTuple	tuple = trigdata->tg_trigtuple;
		PayStatus	to = StatusOfRow(config, rel, tuple);

		if (SessionReplicationRole != SESSION_REPLICATION_ROLE_REPLICA && !PayRestoring() &&
			PayTransitionVerdict(PAY_NEW_ROW, to) != PAY_LEGAL)
			PayRaiseIllegalTransition(rel, PayRowKeyDescription(rel, tuple),
									  PAY_NEW_ROW, to);
		return PointerGetDatum(tuple);
	}

	if (TRIGGER_FIRED_BY_UPDATE(event))
	{
		HeapTuple	oldtuple = trigdata->tg_trigtuple;
		HeapTuple	newtuple = trigdata->tg_newtuple;
		PayStatus	from = StatusOfRow(config, rel, oldtuple);
		PayStatus	to = StatusOfRow(config, rel, newtuple);

		if (from != to && PayTransitionVerdict(from, to) != PAY_LEGAL)
			PayRaiseIllegalTransition(rel, PayRowKeyDescription(rel, oldtuple),
									  from, to);
		if (PayStatusIsFrozen(from))
			CheckFrozenColumns(config, rel, oldtuple, newtuple, from);
		return PointerGetDatum(newtuple);
	}

	/* DELETE */
	{
		HeapTuple	tuple = trigdata->tg_trigtuple;
		PayStatus	status = StatusOfRow(config, rel, tuple);

		if (PayStatusIsFrozen(status))
			RaiseGuardRefusal(rel, "pay_protected_row", "DELETE is refused",
							  psprintf("%s is %s; only INIT and FAILED payments may be deleted.",
									   PayRowKeyDescription(rel, tuple),
									   PayStatusName(status)),
							  PROTECTED_ROW_HINT);
		return PointerGetDatum(tuple);
	}
}

/*
 * pay_allowed(from pay_status, to pay_status) returns boolean
 *
 * Whether from -> to is a legal transition; a NULL from is a new row.
 * Writing the same state again is a no-op, not a transition: false.
 */
Datum
pay_allowed(PG_FUNCTION_ARGS)
{
	const PayCatalog *catalog;
	int			from;
	PayStatus	to;

	if (PG_ARGISNULL(1))
		PG_RETURN_NULL();

	catalog = PayCatalogGet(fcinfo);
	from = PG_ARGISNULL(0) ? PAY_NEW_ROW :
		(int) PayStatusFromLabel(catalog, PG_GETARG_OID(0));
	to = PayStatusFromLabel(catalog, PG_GETARG_OID(1));

	PG_RETURN_BOOL(PayTransitionVerdict(from, to) == PAY_LEGAL);
}
