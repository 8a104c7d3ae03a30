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
 * terminal, the clock moves on).
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

#include "access/htup_details.h"
#include "catalog/pg_collation.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/numeric.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "card.h"
#include "catalog.h"
#include "reason.h"
#include "trigger_common.h"
#include "write.h"

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
	"SELECT status, currency, kind FROM %1$s.pay_ledger WHERE bizno " PAY_SQL_EQ " $1 FOR NO KEY UPDATE",
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

/*
 * The figures of authorization parent, summed after its lock was granted:
 * a snapshot now sees every step before this one, and -- past the command
 * counter -- the rows an UPDATE of several steps moved into PROCESSING
 * before this one.  Raises when the step may not pass.
 */
static void
CheckOpenAndLimits(Relation rel, PayCardKind kind, const char *step_ref, const char *key,
				   Datum parent, Datum amount, bool claiming, const char *currency)
{
	HeapTuple	tuple;
	TupleDesc	tupdesc;
	bool		isnull;
	bool		closed_null;
	Datum		authorized;
	Datum		captured;
	Datum		in_flight;
	Datum		capturable;
	Datum		closed_reason;
	Datum		taken;
	int			ret;

	CommandCounterIncrement();
	ret = SPI_execute_snapshot(check_plans[CARD_BALANCE], &parent, NULL,
							   GetLatestSnapshot(), InvalidSnapshot, true, false, 1);
	if (ret != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "SPI_execute_snapshot failed: %s", SPI_result_code_string(ret));
	tuple = SPI_tuptable->vals[0];
	tupdesc = SPI_tuptable->tupdesc;
	authorized = SPI_getbinval(tuple, tupdesc, 1, &isnull);
	captured = SPI_getbinval(tuple, tupdesc, 2, &isnull);
	in_flight = SPI_getbinval(tuple, tupdesc, 3, &isnull);
	capturable = SPI_getbinval(tuple, tupdesc, 4, &isnull);
	closed_reason = SPI_getbinval(tuple, tupdesc, 5, &closed_null);

	if (!closed_null)
		ereport(ERROR,
				(errmsg("authorization %s is closed: %s %s is refused",
						PayQuoteTextDatum(parent), PayCardStepName(kind), key),
				 errdetail("Closed: %s; the %s was %s (%s).", TextDatumGetCString(closed_reason),
						   PayCardStepName(kind), claiming ? "claimed" : "opened", step_ref),
				 errtable(rel),
				 PayReason(PAY_REASON_AUTHORIZATION_CLOSED)));

	taken = DirectFunctionCall2(numeric_add, captured, in_flight);
	if (kind == PAY_CARD_INCREMENT &&
		DatumGetInt32(DirectFunctionCall2(numeric_cmp, taken,
										  DirectFunctionCall1(int4_numeric, Int32GetDatum(0)))) > 0)
		ereport(ERROR,
				(errmsg("authorization %s has a capture: increment %s is refused",
						PayQuoteTextDatum(parent), key),
				 errdetail("Captured: %s %s; capture in flight: %s (%s).",
						   PayQuoteNumeric(captured), currency, PayQuoteNumeric(in_flight), step_ref),
				 errtable(rel),
				 PayReason(PAY_REASON_INCREMENT_AFTER_CAPTURE)));

	if ((kind == PAY_CARD_CAPTURE || kind == PAY_CARD_FINAL_CAPTURE) && claiming &&
		DatumGetInt32(DirectFunctionCall2(numeric_cmp,
										  DirectFunctionCall2(numeric_add, taken, amount),
										  authorized)) > 0)
		ereport(ERROR,
				(errmsg("capture %s of authorization %s would capture more than is held",
						key, PayQuoteTextDatum(parent)),
				 errdetail("Authorized: %s %s; captured: %s; in flight: %s; asked: %s (%s).",
						   PayQuoteNumeric(authorized), currency, PayQuoteNumeric(captured),
						   PayQuoteNumeric(in_flight), PayQuoteNumeric(amount), step_ref),
				 errtable(rel),
				 PayReasonWith(PAY_REASON_CAPTURE_LIMIT, PayQuoteNumeric(capturable))));
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
	HeapTuple	found;
	TupleDesc	founddesc;
	PayStatus	parent_status;
	Datum		parent_currency;
	bool		parent_currency_null;
	Datum		parent_kind;
	bool		parent_kind_null;
	const char *currency_text;
	int			ret;

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

	ret = SPI_execute_plan(check_plans[CARD_LOCK_AUTHORIZATION], &parent, NULL, false, 1);
	if (ret != SPI_OK_SELECT)
		elog(ERROR, "SPI_execute_plan failed: %s", SPI_result_code_string(ret));
	if (SPI_processed == 0 && PayArchiveHolds(catalog, parent))
		ereport(ERROR,
				(errmsg("%s %s names authorization %s, which was archived",
						PayCardStepName(kind), step, PayQuoteTextDatum(parent)),
				 errdetail("An archived authorization is closed and settled for good."),
				 PayReason(PAY_REASON_ARCHIVED)));
	if (SPI_processed == 0)
		ereport(ERROR,
				(errmsg("%s %s names authorization %s, which the ledger does not have",
						PayCardStepName(kind), step, PayQuoteTextDatum(parent)),
				 errdetail("A step of the card flow belongs to an authorization of the ledger."),
				 errtable(rel),
				 PayReason(PAY_REASON_REFUND_UNKNOWN_PARENT)));
	found = SPI_tuptable->vals[0];
	founddesc = SPI_tuptable->tupdesc;
	parent_status = PayStatusFromLabel(catalog,
									   DatumGetObjectId(SPI_getbinval(found, founddesc, 1, &isnull)));
	parent_currency = SPI_getbinval(found, founddesc, 2, &parent_currency_null);
	parent_kind = SPI_getbinval(found, founddesc, 3, &parent_kind_null);

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
		CheckOpenAndLimits(rel, kind, StepReference(kind, step, key, inserting),
						   PayQuoteTextDatum(key), parent, amount, entering_processing,
						   currency_text);

	SPI_finish();
	PayRestoreUser(&owner);
}
