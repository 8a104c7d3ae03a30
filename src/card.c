/*-------------------------------------------------------------------------
 *
 * card.c
 *	  The rules of the card flow that hold for every write of the ledger,
 *	  by the API or by a raw statement.
 *
 * An authorization is a payment of kind AUTHORIZATION, whose SUCCESS means
 * the bank placed a hold.  Its steps are ledger rows with the authorization
 * as parent, a key (refund_key) and a kind: CAPTURE or FINAL_CAPTURE (an
 * amount taken from the hold), VOID (the rest released), INCREMENT (the
 * hold raised); a child of no kind is a refund (refund.c), held to what
 * the captures captured.  A step is opened only under a held authorization
 * (pay_authorization_not_held), in its currency, and only while it is
 * open; on entering PROCESSING -- the claim, before the bank is called --
 * no step of a closed authorization passes (pay_authorization_closed), the
 * captures PROCESSING or SUCCESS stay within the hold, the amount and the
 * successful increments (pay_capture_limit), and an increment passes only
 * while no capture is PROCESSING or SUCCESS (pay_increment_after_capture).
 * Leaving PROCESSING needs no check: a late SUCCESS was reserved at its
 * claim, a FAILED frees what it held.
 *
 * The figures are not stored: pay_authorization_balance sums them from the
 * children, under the authorization's row lock, and says whether and why
 * the authorization is closed (a void or final capture in flight or done,
 * fully captured, expired at the clock of the check).  Stored nowhere,
 * they cannot drift from the rows they sum; closing is one-way because
 * every reason but a failed void or final capture is final (SUCCESS is
 * terminal, the clock moves on).  The check locks the authorization and sums
 * the same figures in C, through the primary key and an index on parent,
 * wherever the executor would read what the access methods read
 * (ChecksDirectly); else it runs the SQL: the lock's SELECT and the
 * function.
 *
 * Concurrency, as for refunds: a step checked here first locks its
 * authorization's row (FOR NO KEY UPDATE, held to the end of its
 * transaction), then sums under a snapshot taken after the lock.  Of any
 * number of concurrent claims under one authorization, each sums after
 * every earlier one committed or rolled back, at every isolation level;
 * nothing updates an authorization once it is SUCCESS, so the lock never
 * meets a concurrent update (no serialization failure under REPEATABLE
 * READ or SERIALIZABLE).
 *
 * The bookkeeping trigger calls PayCheckCardRow for rows with a kind only:
 * a payment or refund of no kind pays nothing for these rules.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/stratnum.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_am.h"
#include "catalog/pg_collation.h"
#include "catalog/pg_opfamily.h"
#include "catalog/pg_operator.h"
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "optimizer/optimizer.h"
#include "utils/acl.h"
#include "utils/fmgroids.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/numeric.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "card.h"
#include "catalog.h"
#include "compat.h"
#include "reason.h"
#include "trigger_common.h"
#include "write.h"
#include "write_direct.h"

static const char *const kind_labels[] = {
	[PAY_CARD_NONE] = NULL,
	[PAY_CARD_AUTHORIZATION] = "AUTHORIZATION",
	[PAY_CARD_CAPTURE] = "CAPTURE",
	[PAY_CARD_FINAL_CAPTURE] = "FINAL_CAPTURE",
	[PAY_CARD_VOID] = "VOID",
	[PAY_CARD_INCREMENT] = "INCREMENT",
	[PAY_CARD_UNKNOWN] = NULL,
};

/* The kind a value of the column kind spells. */
PayCardKind
PayCardKindOf(Datum kind, bool isnull)
{
	text	   *label;

	if (isnull)
		return PAY_CARD_NONE;
	label = DatumGetTextPP(kind);
	for (int k = PAY_CARD_AUTHORIZATION; k < PAY_CARD_UNKNOWN; k++)
		if (VARSIZE_ANY_EXHDR(label) == strlen(kind_labels[k]) &&
			memcmp(VARDATA_ANY(label), kind_labels[k], VARSIZE_ANY_EXHDR(label)) == 0)
			return (PayCardKind) k;
	return PAY_CARD_UNKNOWN;
}

const char *
PayCardKindLabel(PayCardKind kind)
{
	return kind_labels[kind];
}

/* How a step is named in messages. */
const char *
PayCardStepName(PayCardKind kind)
{
	switch (kind)
	{
		case PAY_CARD_CAPTURE:
			return "capture";
		case PAY_CARD_FINAL_CAPTURE:
			return "final capture";
		case PAY_CARD_VOID:
			return "void";
		case PAY_CARD_INCREMENT:
			return "increment";
		default:
			return "step";
	}
}

/* The queries of the checks, in the order of check_queries. */
typedef enum CardCheck
{
	CARD_LOCK_AUTHORIZATION,
	CARD_BALANCE,
	CARD_CHECK_COUNT
} CardCheck;

static const char *const check_queries[CARD_CHECK_COUNT] = {
	[CARD_LOCK_AUTHORIZATION] =
	"SELECT status, currency, kind, amount, expires_at FROM %1$s.pay_ledger "
	"WHERE bizno " PAY_SQL_EQ " $1 FOR NO KEY UPDATE",
	[CARD_BALANCE] =
	"SELECT authorized, captured, capture_in_flight, capturable, closed_reason "
	"FROM %1$s.pay_authorization_balance($1)",
};

static SPIPlanPtr check_plans[CARD_CHECK_COUNT];
/* the catalog generation the plans were made for */
static uint64 check_plans_generation = 0;

static void
PrepareCheckPlans(const PayCatalog *catalog)
{
	Oid			argtypes[1] = {TEXTOID};

	if (check_plans_generation == catalog->generation)
		return;
	for (int i = 0; i < CARD_CHECK_COUNT; i++)
	{
		SPIPlanPtr	plan;

		if (check_plans[i] != NULL)
		{
			SPI_freeplan(check_plans[i]);
			check_plans[i] = NULL;
		}
		plan = SPI_prepare(psprintf(check_queries[i], catalog->schema), 1, argtypes);
		if (plan == NULL)
			elog(ERROR, "SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
		SPI_keepplan(plan);
		check_plans[i] = plan;
	}
	check_plans_generation = catalog->generation;
}

static void
RaiseBadStep(Relation rel, const char *message, const char *detail)
{
	ereport(ERROR,
			(errmsg("%s", message),
			 errdetail("%s", detail),
			 errtable(rel),
			 PayReason(PAY_REASON_CARD_STEP)));
}

/* An authorization: no parent, and a positive life. */
static void
CheckAuthorization(const PayCatalog *catalog, Relation rel, HeapTuple tuple,
				   const char *bizno, bool inserting)
{
	TupleDesc	rowdesc = RelationGetDescr(rel);
	const AttrNumber *col = catalog->ledger_attnums;
	bool		isnull;
	Datum		expires_in;
	Interval	zero = {0};

	(void) heap_getattr(tuple, col[LEDGER_PARENT], rowdesc, &isnull);
	if (!isnull)
		RaiseBadStep(rel, psprintf("authorization %s cannot have a parent", bizno),
					 "An authorization is a payment of its own; its captures, voids and increments name it as their parent.");
	(void) heap_getattr(tuple, col[LEDGER_AMOUNT], rowdesc, &isnull);
	if (isnull)
		RaiseBadStep(rel, psprintf("authorization %s needs an amount", bizno),
					 "A hold is of an amount: its captures are held to it.");
	if (!inserting)
		return;
	expires_in = heap_getattr(tuple, col[LEDGER_EXPIRES_IN], rowdesc, &isnull);
	if (isnull ||
		DatumGetInt32(DirectFunctionCall2(interval_cmp, expires_in, IntervalPGetDatum(&zero))) <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("authorization %s needs a positive expires_in", bizno),
				 errdetail("The hold expires that long after the authorization succeeds."),
				 errhint("Open authorizations with pay_open_authorization(prefix, biz_id, amount, currency, expires_in)."),
				 errtable(rel)));
}

/*
 * How a refusal's detail names the step it refuses: a step being claimed by
 * its bizNo, which the ledger has; a step being recorded by its key, since
 * the bizNo it was issued is refused with it -- a new one at every retry,
 * which the ledger will never have.
 */
static const char *
StepReference(PayCardKind kind, const char *step, Datum key, bool inserting)
{
	if (inserting)
		return psprintf("%s %s, not recorded", PayCardStepName(kind), PayQuoteTextDatum(key));
	return psprintf("step %s", step);
}

/* What the limits need of pay_authorization_balance's figures. */
typedef struct AuthorizationBalance
{
	Datum		authorized;
	Datum		captured;
	Datum		in_flight;
	Datum		capturable;
	const char *closed_reason;	/* NULL while open */
} AuthorizationBalance;

/* The authorization's columns the checks read, from its locked row. */
typedef struct LockedAuthorization
{
	PayStatus	status;
	Datum		currency;
	bool		currency_null;
	Datum		kind;
	bool		kind_null;
	Datum		amount;
	bool		amount_null;
	Datum		expires_at;
	bool		expires_at_null;
} LockedAuthorization;

/* the index the children are summed through, for one catalog generation */
static Oid	parent_index = InvalidOid;
static uint64 parent_index_generation = 0;

/*
 * A btree index of the ledger led by parent, in the column's collation,
 * whose predicate (if any) every row of a parent meets: an index scan of it
 * finds exactly the rows pay_authorization_balance's c.parent = a.bizno
 * finds.  The unique index on (parent, refund_key) WHERE parent IS NOT NULL
 * is one.  InvalidOid when the ledger has none.
 */
Oid
PayCardParentIndex(const PayCatalog *catalog, Relation rel)
{
	AttrNumber	parent_attnum = catalog->ledger_attnums[LEDGER_PARENT];
	Oid			parent_collation = TupleDescAttr(RelationGetDescr(rel), parent_attnum - 1)->attcollation;
	List	   *indexes;
	ListCell   *lc;
	List	   *of_a_parent;

	if (parent_index_generation == catalog->generation)
		return parent_index;
	parent_index = InvalidOid;
	/* parent = 'x', a clause the executor's scan of the children meets */
	of_a_parent = list_make1(make_opclause(TextEqualOperator, BOOLOID, false,
										   (Expr *) makeVar(1, parent_attnum, TEXTOID, -1,
															parent_collation, 0),
										   (Expr *) makeConst(TEXTOID, -1, parent_collation, -1,
															  CStringGetTextDatum("x"), false, false),
										   InvalidOid, parent_collation));
	indexes = RelationGetIndexList(rel);
	foreach(lc, indexes)
	{
		Relation	index = index_open(lfirst_oid(lc), AccessShareLock);

		if (index->rd_rel->relam == BTREE_AM_OID &&
			index->rd_index->indisvalid &&
			index->rd_index->indkey.values[0] == parent_attnum &&
			index->rd_opfamily[0] == TEXT_BTREE_FAM_OID &&
			index->rd_indcollation[0] == parent_collation &&
			predicate_implied_by(RelationGetIndexPredicate(index), of_a_parent, false))
			parent_index = RelationGetRelid(index);
		index_close(index, NoLock);
		if (OidIsValid(parent_index))
			break;
	}
	list_free(indexes);
	parent_index_generation = catalog->generation;
	return parent_index;
}

/*
 * Whether the check may lock the authorization and sum its children through
 * the access methods, as the executor would run its SELECT ... FOR NO KEY
 * UPDATE and pay_authorization_balance: the owner (the user the check runs
 * as) may read and lock every row of the ledger, no row security can filter
 * what it reads, no inheritance child holds rows those statements would
 * read too, no module watches the executor's permission checks, and an
 * index finds the children.  Else the check runs the SQL.
 */
static bool
ChecksDirectly(const PayCatalog *catalog, Relation rel)
{
	return !rel->rd_rel->relrowsecurity && !rel->rd_rel->relhassubclass &&
		ExecutorCheckPerms_hook == NULL &&
		pg_class_aclmask(RelationGetRelid(rel), GetUserId(), ACL_SELECT | ACL_UPDATE,
						 ACLMASK_ALL) == (ACL_SELECT | ACL_UPDATE) &&
		OidIsValid(PayCardParentIndex(catalog, rel));
}

/*
 * Lock the row of authorization parent FOR NO KEY UPDATE as the executor
 * locks the row a SELECT ... FOR NO KEY UPDATE of it finds, through the
 * primary key (PayDirectLockRow, as a claim locks a payment); the lock is
 * held to the end of the transaction.  false when there is no row.
 */
static bool
LockAuthorizationDirectly(const PayCatalog *catalog, Relation rel, Datum parent,
						  LockedAuthorization *authorization)
{
	const AttrNumber *col = catalog->ledger_attnums;
	TupleTableSlot *slot = table_slot_create(rel, NULL);
	bool		found = PayDirectLockRow(catalog, rel, parent, LockTupleNoKeyExclusive, slot);

	if (found)
	{
		bool		isnull;

		authorization->status =
			PayStatusFromLabel(catalog, DatumGetObjectId(slot_getattr(slot, col[LEDGER_STATUS], &isnull)));
		authorization->currency = slot_getattr(slot, col[LEDGER_CURRENCY], &authorization->currency_null);
		authorization->kind = slot_getattr(slot, col[LEDGER_KIND], &authorization->kind_null);
		authorization->amount = slot_getattr(slot, col[LEDGER_AMOUNT], &authorization->amount_null);
		authorization->expires_at = slot_getattr(slot, col[LEDGER_EXPIRES_AT],
												 &authorization->expires_at_null);
		/* the values outlive the slot */
		if (!authorization->expires_at_null)
			authorization->expires_at = datumCopy(authorization->expires_at, FLOAT8PASSBYVAL,
												  sizeof(TimestampTz));
		if (!authorization->currency_null)
			authorization->currency = datumCopy(authorization->currency, false, -1);
		if (!authorization->kind_null)
			authorization->kind = datumCopy(authorization->kind, false, -1);
		if (!authorization->amount_null)
			authorization->amount = datumCopy(authorization->amount, false, -1);
	}
	ExecDropSingleTupleTableSlot(slot);
	return found;
}

/* The same lock by the SELECT ... FOR NO KEY UPDATE itself, through SPI. */
static bool
LockAuthorizationBySql(const PayCatalog *catalog, Datum parent, LockedAuthorization *authorization)
{
	HeapTuple	found;
	TupleDesc	founddesc;
	bool		isnull;
	int			ret;

	ret = SPI_execute_plan(check_plans[CARD_LOCK_AUTHORIZATION], &parent, NULL, false, 1);
	if (ret != SPI_OK_SELECT)
		elog(ERROR, "SPI_execute_plan failed: %s", SPI_result_code_string(ret));
	if (SPI_processed == 0)
		return false;
	found = SPI_tuptable->vals[0];
	founddesc = SPI_tuptable->tupdesc;
	authorization->status = PayStatusFromLabel(catalog,
											   DatumGetObjectId(SPI_getbinval(found, founddesc, 1, &isnull)));
	authorization->currency = SPI_getbinval(found, founddesc, 2, &authorization->currency_null);
	authorization->kind = SPI_getbinval(found, founddesc, 3, &authorization->kind_null);
	authorization->amount = SPI_getbinval(found, founddesc, 4, &authorization->amount_null);
	authorization->expires_at = SPI_getbinval(found, founddesc, 5, &authorization->expires_at_null);
	return true;
}

static Datum
NumericZero(void)
{
	return NumericGetDatum(int64_to_numeric(0));
}

/*
 * pay_authorization_balance's figures of the authorization locked as
 * authorization, summed from its children through the parent index under
 * snapshot, in C: its aggregate, started and ended at every check, cost
 * most of a step's claim.  The same sums, tests and order of closing
 * reasons as the function's SQL (sql/idempotent_pay--1.4.sql); the index
 * and heap access methods take SERIALIZABLE's predicate locks as the
 * executor's scan would.
 */
static void
SumChildren(const PayCatalog *catalog, Relation rel, Datum parent,
			const LockedAuthorization *authorization, Snapshot snapshot,
			AuthorizationBalance *balance)
{
	const AttrNumber *col = catalog->ledger_attnums;
	Relation	index = index_open(PayCardParentIndex(catalog, rel), AccessShareLock);
	TupleTableSlot *slot = table_slot_create(rel, NULL);
	IndexScanDesc scan;
	ScanKeyData key;
	Datum		incremented = NumericZero();
	bool		voided = false;
	bool		void_in_flight = false;
	bool		final_captured = false;
	bool		final_in_flight = false;
	/* one without an amount (a restored or replica-mode row) holds nothing */
	bool		held = authorization->status == PAY_SUCCESS && !authorization->amount_null;
	Datum		hold;

	balance->captured = NumericZero();
	balance->in_flight = NumericZero();
	ScanKeyEntryInitialize(&key, 0, 1, BTEqualStrategyNumber, InvalidOid,
						   index->rd_indcollation[0], F_TEXTEQ, parent);
	scan = PayIndexBeginScan(rel, index, snapshot, 1, 0);
	index_rescan(scan, &key, 1, NULL, 0);
	while (index_getnext_slot(scan, ForwardScanDirection, slot))
	{
		bool		isnull;
		Datum		kind_value = slot_getattr(slot, col[LEDGER_KIND], &isnull);
		PayCardKind kind = PayCardKindOf(kind_value, isnull);
		PayStatus	status = PayStatusFromLabel(catalog,
												DatumGetObjectId(slot_getattr(slot, col[LEDGER_STATUS], &isnull)));
		bool		amount_null;
		Datum		amount = slot_getattr(slot, col[LEDGER_AMOUNT], &amount_null);
		bool		success = status == PAY_SUCCESS;
		bool		processing = status == PAY_PROCESSING;

		/* sum() passes over a NULL amount; bool_or looks at none */
		if (kind == PAY_CARD_INCREMENT && success && !amount_null)
			incremented = DirectFunctionCall2(numeric_add, incremented, amount);
		if ((kind == PAY_CARD_CAPTURE || kind == PAY_CARD_FINAL_CAPTURE) && !amount_null)
		{
			if (success)
				balance->captured = DirectFunctionCall2(numeric_add, balance->captured, amount);
			else if (processing)
				balance->in_flight = DirectFunctionCall2(numeric_add, balance->in_flight, amount);
		}
		voided |= kind == PAY_CARD_VOID && success;
		void_in_flight |= kind == PAY_CARD_VOID && processing;
		final_captured |= kind == PAY_CARD_FINAL_CAPTURE && success;
		final_in_flight |= kind == PAY_CARD_FINAL_CAPTURE && processing;
	}
	index_endscan(scan);
	ExecDropSingleTupleTableSlot(slot);
	index_close(index, NoLock); /* held to the end, as the executor holds it */

	hold = authorization->amount_null ? (Datum) 0 :
		DirectFunctionCall2(numeric_add, authorization->amount, incremented);
	balance->authorized = held ? hold : NumericZero();
	if (!held)
		balance->closed_reason = "not held";
	else if (voided)
		balance->closed_reason = "voided";
	else if (void_in_flight)
		balance->closed_reason = "void in flight";
	else if (final_captured)
		balance->closed_reason = "final capture done";
	else if (final_in_flight)
		balance->closed_reason = "final capture in flight";
	else if (!authorization->amount_null &&
			 DatumGetInt32(DirectFunctionCall2(numeric_cmp, balance->captured, hold)) >= 0)
		balance->closed_reason = "fully captured";
	else if (!authorization->expires_at_null &&
			 GetCurrentStatementStartTimestamp() >= DatumGetTimestampTz(authorization->expires_at))
		balance->closed_reason = "expired";
	else
		balance->closed_reason = NULL;
	if (balance->closed_reason != NULL)
		balance->capturable = NumericZero();
	else if (authorization->amount_null)
		balance->capturable = (Datum) 0;
	else
		balance->capturable =
			DirectFunctionCall2(numeric_sub,
								DirectFunctionCall2(numeric_sub, balance->authorized, balance->captured),
								balance->in_flight);
}

/* The same figures by pay_authorization_balance itself, through SPI. */
static void
SumChildrenBySql(Datum parent, Snapshot snapshot, AuthorizationBalance *balance)
{
	HeapTuple	tuple;
	TupleDesc	tupdesc;
	bool		isnull;
	bool		closed_null;
	Datum		closed_reason;
	int			ret;

	ret = SPI_execute_snapshot(check_plans[CARD_BALANCE], &parent, NULL,
							   snapshot, InvalidSnapshot, true, false, 1);
	if (ret != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "SPI_execute_snapshot failed: %s", SPI_result_code_string(ret));
	tuple = SPI_tuptable->vals[0];
	tupdesc = SPI_tuptable->tupdesc;
	balance->authorized = SPI_getbinval(tuple, tupdesc, 1, &isnull);
	balance->captured = SPI_getbinval(tuple, tupdesc, 2, &isnull);
	balance->in_flight = SPI_getbinval(tuple, tupdesc, 3, &isnull);
	balance->capturable = SPI_getbinval(tuple, tupdesc, 4, &isnull);
	closed_reason = SPI_getbinval(tuple, tupdesc, 5, &closed_null);
	balance->closed_reason = closed_null ? NULL : TextDatumGetCString(closed_reason);
}

/*
 * The figures of authorization parent, summed after its lock was granted:
 * a snapshot now sees every step before this one, and -- past the command
 * counter -- the rows an UPDATE of several steps moved into PROCESSING
 * before this one.  Raises when the step may not pass.
 */
static void
CheckOpenAndLimits(const PayCatalog *catalog, Relation rel, PayCardKind kind,
				   const char *step_ref, const char *key, Datum parent,
				   const LockedAuthorization *authorization, bool direct, Datum amount,
				   bool claiming, const char *currency)
{
	AuthorizationBalance balance;
	Snapshot	snapshot;
	Datum		taken;

	CommandCounterIncrement();
	snapshot = RegisterSnapshot(GetLatestSnapshot());
	if (direct)
		SumChildren(catalog, rel, parent, authorization, snapshot, &balance);
	else
		SumChildrenBySql(parent, snapshot, &balance);
	UnregisterSnapshot(snapshot);

	if (balance.closed_reason != NULL)
		ereport(ERROR,
				(errmsg("authorization %s is closed: %s %s is refused",
						PayQuoteTextDatum(parent), PayCardStepName(kind), key),
				 errdetail("Closed: %s; the %s was %s (%s).", balance.closed_reason,
						   PayCardStepName(kind), claiming ? "claimed" : "opened", step_ref),
				 errtable(rel),
				 PayReason(PAY_REASON_AUTHORIZATION_CLOSED)));

	taken = DirectFunctionCall2(numeric_add, balance.captured, balance.in_flight);
	if (kind == PAY_CARD_INCREMENT &&
		DatumGetInt32(DirectFunctionCall2(numeric_cmp, taken, NumericZero())) > 0)
		ereport(ERROR,
				(errmsg("authorization %s has a capture: increment %s is refused",
						PayQuoteTextDatum(parent), key),
				 errdetail("Captured: %s %s; capture in flight: %s (%s).",
						   PayQuoteNumeric(balance.captured), currency,
						   PayQuoteNumeric(balance.in_flight), step_ref),
				 errtable(rel),
				 PayReason(PAY_REASON_INCREMENT_AFTER_CAPTURE)));

	if ((kind == PAY_CARD_CAPTURE || kind == PAY_CARD_FINAL_CAPTURE) && claiming &&
		DatumGetInt32(DirectFunctionCall2(numeric_cmp,
										  DirectFunctionCall2(numeric_add, taken, amount),
										  balance.authorized)) > 0)
		ereport(ERROR,
				(errmsg("capture %s of authorization %s would capture more than is held",
						key, PayQuoteTextDatum(parent)),
				 errdetail("Authorized: %s %s; captured: %s; in flight: %s; asked: %s (%s).",
						   PayQuoteNumeric(balance.authorized), currency,
						   PayQuoteNumeric(balance.captured), PayQuoteNumeric(balance.in_flight),
						   PayQuoteNumeric(amount), step_ref),
				 errtable(rel),
				 PayReasonWith(PAY_REASON_CAPTURE_LIMIT, PayQuoteNumeric(balance.capturable))));
}

/*
 * Hold tuple, a ledger row with a kind, to the rules of the card flow:
 * inserting when it is recorded, entering_processing when it is claimed;
 * else (its amount or currency changed) the shape and the authorization.
 */
void
PayCheckCardRow(const PayCatalog *catalog, Relation rel, HeapTuple tuple,
				bool inserting, bool entering_processing)
{
	TupleDesc	rowdesc = RelationGetDescr(rel);
	const AttrNumber *col = catalog->ledger_attnums;
	bool		isnull;
	bool		parent_null;
	bool		key_null;
	bool		amount_null;
	bool		currency_null;
	Datum		kind_value = heap_getattr(tuple, col[LEDGER_KIND], rowdesc, &isnull);
	PayCardKind kind = PayCardKindOf(kind_value, isnull);
	char	   *step = PayQuoteTextDatum(heap_getattr(tuple, col[LEDGER_BIZNO], rowdesc, &isnull));
	Datum		parent = heap_getattr(tuple, col[LEDGER_PARENT], rowdesc, &parent_null);
	Datum		key = heap_getattr(tuple, col[LEDGER_REFUND_KEY], rowdesc, &key_null);
	Datum		amount = heap_getattr(tuple, col[LEDGER_AMOUNT], rowdesc, &amount_null);
	Datum		currency = heap_getattr(tuple, col[LEDGER_CURRENCY], rowdesc, &currency_null);
	PayOwnerContext owner;
	LockedAuthorization authorization;
	bool		direct;
	PayStatus	parent_status;
	Datum		parent_currency;
	bool		parent_currency_null;
	Datum		parent_kind;
	bool		parent_kind_null;
	const char *currency_text;

	if (kind == PAY_CARD_UNKNOWN)
		RaiseBadStep(rel, psprintf("ledger row %s has kind %s, which is none of the card flow's",
								   step, PayQuoteTextDatum(kind_value)),
					 "A kind is AUTHORIZATION, CAPTURE, FINAL_CAPTURE, VOID or INCREMENT; payments and refunds have none.");
	if (kind == PAY_CARD_AUTHORIZATION)
	{
		CheckAuthorization(catalog, rel, tuple, step, inserting);
		return;
	}
	if (parent_null || key_null)
		RaiseBadStep(rel, psprintf("%s %s needs an authorization and a key", PayCardStepName(kind), step),
					 "A step of the card flow names its authorization as parent and its key among the authorization's steps as refund_key.");

	PayBecomeOwner(rel, &owner);
	SPI_connect();
	PrepareCheckPlans(catalog);

	direct = ChecksDirectly(catalog, rel);
	if (direct ? !LockAuthorizationDirectly(catalog, rel, parent, &authorization) :
		!LockAuthorizationBySql(catalog, parent, &authorization))
	{
		if (PayArchiveHolds(catalog, parent))
			ereport(ERROR,
					(errmsg("%s %s names authorization %s, which was archived",
							PayCardStepName(kind), step, PayQuoteTextDatum(parent)),
					 errdetail("An archived authorization is closed and settled for good."),
					 PayReason(PAY_REASON_ARCHIVED)));
		ereport(ERROR,
				(errmsg("%s %s names authorization %s, which the ledger does not have",
						PayCardStepName(kind), step, PayQuoteTextDatum(parent)),
				 errdetail("A step of the card flow belongs to an authorization of the ledger."),
				 errtable(rel),
				 PayReason(PAY_REASON_REFUND_UNKNOWN_PARENT)));
	}
	parent_status = authorization.status;
	parent_currency = authorization.currency;
	parent_currency_null = authorization.currency_null;
	parent_kind = authorization.kind;
	parent_kind_null = authorization.kind_null;

	if (PayCardKindOf(parent_kind, parent_kind_null) != PAY_CARD_AUTHORIZATION)
		ereport(ERROR,
				(errmsg("%s is no authorization: %s %s is refused",
						PayQuoteTextDatum(parent), PayCardStepName(kind), PayQuoteTextDatum(key)),
				 errdetail("Only an authorization (pay_open_authorization) is captured, voided or raised; a payment is refunded."),
				 errtable(rel),
				 PayReason(PAY_REASON_AUTHORIZATION_NOT_HELD)));
	if (parent_status != PAY_SUCCESS)
		ereport(ERROR,
				(errmsg("authorization %s is %s: %s %s is refused",
						PayQuoteTextDatum(parent), PayStatusName(parent_status),
						PayCardStepName(kind), PayQuoteTextDatum(key)),
				 errdetail("Its SUCCESS places the hold its steps capture, void or raise (%s).",
						   StepReference(kind, step, key, inserting)),
				 errtable(rel),
				 PayReason(PAY_REASON_AUTHORIZATION_NOT_HELD)));
	if (amount_null)
		RaiseBadStep(rel, psprintf("%s %s needs an amount", PayCardStepName(kind), step),
					 "A capture or increment is for its amount; a void for its authorization's.");
	currency_text = currency_null ? "" : TextDatumGetCString(currency);
	if (currency_null != parent_currency_null ||
		(!currency_null && !DatumGetBool(DirectFunctionCall2Coll(texteq, C_COLLATION_OID, currency, parent_currency))))
		ereport(ERROR,
				(errmsg("%s %s must be in the currency of authorization %s",
						PayCardStepName(kind), step, PayQuoteTextDatum(parent)),
				 errdetail("The authorization is in %s; the step in %s.",
						   parent_currency_null ? "no currency" : TextDatumGetCString(parent_currency),
						   currency_null ? "no currency" : currency_text),
				 errtable(rel),
				 PayReason(PAY_REASON_REFUND_CURRENCY)));

	if (inserting || entering_processing)
		CheckOpenAndLimits(catalog, rel, kind, StepReference(kind, step, key, inserting),
						   PayQuoteTextDatum(key), parent, &authorization, direct, amount,
						   entering_processing, currency_text);

	SPI_finish();
	PayRestoreUser(&owner);
}
