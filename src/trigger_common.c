/*-------------------------------------------------------------------------
 *
 * trigger_common.c
 *	  What every trigger of the extension shares: how it checks it was
 *	  fired as declared, how it acts as a table's owner, how it tells a
 *	  restore, the one error for an illegal transition, and reading the
 *	  ledger's rows.
 *
 * Like PostgreSQL's own trigger functions, every trigger of the extension
 * first checks how it was fired (PayCheckTriggerProtocol): a trigger
 * created by hand for the wrong timing, level or event, or a direct call,
 * is refused with 39P01 instead of reading a tuple that is not there.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/relation.h"
#include "catalog/pg_index.h"
#include "commands/trigger.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/guc.h"
#include "utils/rel.h"
#include "utils/rls.h"

#include "catalog.h"
#include "compat.h"
#include "machine.h"
#include "reason.h"
#include "trigger_common.h"

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

/* The number of column of rel; an error naming it when there is none. */
AttrNumber
PayColumnNumber(Relation rel, const char *column)
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

/*
 * Whether the current write is part of a restore of pg_dump's output.
 *
 * Every script pg_dump writes, and every connection of pg_restore (serial,
 * parallel, single-transaction, data-only), sets row_security = off and
 * check_function_bodies = false before it loads any data -- unless the
 * dump or restore is run with --enable-row-security, which doc/operations.md says
 * not to do; an application does neither.  Restoring idempotent_pay takes
 * a superuser (CREATE EXTENSION does), and an application role never is
 * one.  A superuser's INSERT in that state is taken as it comes -- any
 * state, the ledger's history untouched, no journal row (the journal
 * arrives with the data).  The API's own writes run inside SECURITY
 * DEFINER functions, which a restore never does, so they are never taken
 * for one.  A superuser who sets both by hand is restoring, as far as the
 * guard can tell: so restoring grants only what session_replication_role =
 * replica grants the same superuser -- rows in any state, as they were --
 * and nothing that decides whether a payment is charged.  The guard refuses
 * a new row of an archived payment and holds a payment's identity and a
 * success's answer whether or not a write is taken for a restore.
 */
bool
PayRestoring(void)
{
	return !row_security && !check_function_bodies && !InLocalUserIdChange() &&
		superuser();
}

/*
 * Whether the extension's own C code is inserting a row of the journal or
 * of pay_maintenance_log this moment: the guard on their INSERT lets only
 * such a row pass (a replica's apply and a restore aside).  Nothing in SQL
 * can set it.  It is set just around the one statement that inserts the
 * row (PayPermitOwnRow, then PayEndOwnRow in a PG_FINALLY, so that an error
 * leaves nothing set) and taken by the first row the guard sees: a row a
 * DBA's trigger inserts inside that statement, before or after it, finds
 * it gone or spent.
 */
static bool own_row_permitted = false;

/* Permit the next row; returns what PayEndOwnRow restores. */
bool
PayPermitOwnRow(void)
{
	bool		previous = own_row_permitted;

	own_row_permitted = true;
	return previous;
}

void
PayEndOwnRow(bool previous)
{
	own_row_permitted = previous;
}

/* Whether the row being inserted is the one permitted; the permit is spent. */
bool
PayTakeOwnRowPermit(void)
{
	bool		permitted = own_row_permitted;

	own_row_permitted = false;
	return permitted;
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
			(errmsg("illegal payment status transition from %s to %s",
					from_name, PayStatusName(to)),
			 errdetail("%s: %s -> %s is refused because %s.",
					   key, from_name, PayStatusName(to),
					   PayTransitionReason(from, to)),
			 rel ? errtable(rel) : 0,
			 PayReasonWith(PAY_REASON_STATUS_TRANSITION, PayTransitionHint(from, to))));
}

/*
 * "(key columns)=(values)" of tuple from the table's primary key, for error
 * details; "a row of <table>" when there is no primary key to show.
 */
char *
PayRowKeyDescription(Relation rel, HeapTuple tuple)
{
	Oid			pk = PayRelationGetPrimaryKeyIndex(rel);
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
		return psprintf("a row of \"%s\"", RelationGetRelationName(rel));
	return PayQuoteCString(description);
}

/* Whether two values of a column of attr are the same bytes, or both NULL. */
static bool
ValuesIdentical(Form_pg_attribute attr, Datum a, bool a_null, Datum b, bool b_null)
{
	return a_null == b_null &&
		(a_null || datum_image_eq(a, b, attr->attbyval, attr->attlen));
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
	bool		oldnull,
				newnull;
	Datum		oldvalue = heap_getattr(oldtuple, attnum, tupdesc, &oldnull);
	Datum		newvalue = heap_getattr(newtuple, attnum, tupdesc, &newnull);

	return ValuesIdentical(TupleDescAttr(tupdesc, attnum - 1), oldvalue, oldnull,
						   newvalue, newnull);
}

/*
 * The trigger protocol of the ledger's own triggers: fired as declared in
 * the install script (at timing, on one of events), and on pay_ledger.
 */
const PayCatalog *
PayCheckLedgerTrigger(FunctionCallInfo fcinfo, const char *function, TriggerEvent timing,
					  int events)
{
	const PayCatalog *catalog;
	Relation	rel;

	PayCheckTriggerProtocol(fcinfo, function, timing, events, false);
	rel = ((TriggerData *) fcinfo->context)->tg_relation;
	catalog = PayCatalogGetTables(fcinfo);
	if (RelationGetRelid(rel) != catalog->ledger)
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("%s fires only on pay_ledger, not on \"%s\"",
						function, RelationGetRelationName(rel))));
	return catalog;
}

/*
 * Deform a ledger row once for the rules that read it: the ledger has many
 * nullable columns, and heap_getattr walks them from the start for each
 * column read past a NULL.
 */
void
PayDeformLedgerRow(Relation rel, HeapTuple tuple, PayLedgerValues *row)
{
	TupleDesc	tupdesc = RelationGetDescr(rel);

	row->values = palloc(tupdesc->natts * sizeof(Datum));
	row->nulls = palloc(tupdesc->natts * sizeof(bool));
	PayDeformLedgerRowInto(rel, tuple, row);
}

/*
 * The same into the arrays row already has, of the relation's number of
 * columns: for the guard, which fires on every payment's UPDATE and keeps
 * its arrays for the statement instead of allocating them per row.
 */
void
PayDeformLedgerRowInto(Relation rel, HeapTuple tuple, PayLedgerValues *row)
{
	row->tuple = tuple;
	heap_deform_tuple(tuple, RelationGetDescr(rel), row->values, row->nulls);
}

/*
 * The value of a column the ledger declares NOT NULL.  A BEFORE trigger runs
 * before the executor checks NOT NULL, so a NULL is refused here, as the
 * executor would refuse it.
 */
Datum
PayRequiredValue(Relation rel, const PayLedgerValues *row, AttrNumber attnum)
{
	if (row->nulls[attnum - 1])
		ereport(ERROR,
				(errcode(ERRCODE_NOT_NULL_VIOLATION),
				 errmsg("null value in column \"%s\" of relation \"%s\" violates not-null constraint",
						NameStr(TupleDescAttr(RelationGetDescr(rel), attnum - 1)->attname),
						RelationGetRelationName(rel)),
				 errtablecol(rel, attnum)));
	return row->values[attnum - 1];
}

PayStatus
PayLedgerStatus(const PayCatalog *catalog, Relation rel, const PayLedgerValues *row)
{
	Datum		label = PayRequiredValue(rel, row, catalog->ledger_attnums[LEDGER_STATUS]);

	return PayStatusFromLabel(catalog, DatumGetObjectId(label));
}

/* PayColumnUnchanged on two deformed versions of a ledger row. */
bool
PayLedgerValueUnchanged(Relation rel, const PayLedgerValues *old, const PayLedgerValues *new,
						AttrNumber attnum)
{
	return ValuesIdentical(TupleDescAttr(RelationGetDescr(rel), attnum - 1),
						   old->values[attnum - 1], old->nulls[attnum - 1],
						   new->values[attnum - 1], new->nulls[attnum - 1]);
}
