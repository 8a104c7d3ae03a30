/*-------------------------------------------------------------------------
 *
 * refund.c
 *	  The rules of refunds that hold for every write of
 *	  the ledger, by the API or by a raw statement.
 *
 * A refund is a ledger row with a parent: the payment it pays back, which
 * is SUCCESS and not itself a refund, in the parent's currency, under a
 * refund key (pay_refund_parent, pay_refund_unpaid, pay_refund_currency).
 * The refunds of a payment that are PROCESSING or SUCCESS never add up to
 * more than was captured for it (pay_refund_limit): what pay_refund_balance
 * counts, the journaled captures -- the success, and every second charge
 * the bank reported -- less those refunds.
 *
 * The ledger's bookkeeping trigger calls PayCheckRefund for rows with a
 * parent only, so a payment that is no refund pays nothing for these rules.
 *
 * Concurrency: a refund entering PROCESSING first locks its parent's row
 * (FOR NO KEY UPDATE, held to the end of its transaction), then adds up
 * the parent's refunds under a snapshot taken after the lock, as a unique
 * or foreign-key check looks past the transaction's snapshot.  Of any
 * number of concurrent refunds of one payment, each adds up after every
 * earlier one committed or rolled back, at every isolation level; a
 * refund leaving PROCESSING for FAILED takes no lock and frees its share
 * when it commits.
 *
 * The checks read as the ledger's owner (PayBecomeOwner): whoever may
 * write the ledger is held to them, whatever it may read.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_collation.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/numeric.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "catalog.h"
#include "reason.h"
#include "refund.h"
#include "trigger_common.h"
#include "write.h"

/* The queries of the checks, in the order of check_queries. */
typedef enum RefundCheck
{
	CHECK_LOCK_PARENT,
	CHECK_BALANCE,
	CHECK_COUNT
} RefundCheck;

static const char *const check_queries[CHECK_COUNT] = {
	[CHECK_LOCK_PARENT] =
	"SELECT status, currency, parent FROM %1$s.pay_ledger WHERE bizno " PAY_SQL_EQ " $1 FOR NO KEY UPDATE",
	[CHECK_BALANCE] =
	"SELECT captured, refunded OPERATOR(pg_catalog.+) in_flight FROM %1$s.pay_refund_balance($1)",
};

static SPIPlanPtr check_plans[CHECK_COUNT];
/* the catalog generation the plans were made for */
static uint64 check_plans_generation = 0;

static void
PrepareCheckPlans(const PayCatalog *catalog)
{
	Oid			argtypes[1] = {TEXTOID};

	if (check_plans_generation == catalog->generation)
		return;
	for (int i = 0; i < CHECK_COUNT; i++)
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

static char *
NumericText(Datum value)
{
	return PayQuoteNumeric(value);
}

static void
RaiseBadParent(Relation rel, PayReasonId reason, const char *message, const char *detail)
{
	ereport(ERROR,
			(errmsg("%s", message),
			 errdetail("%s", detail),
			 errtable(rel),
			 PayReason(reason)));
}

/*
 * The refund must fit what is left of its parent's capture, counting the
 * refunds PROCESSING or SUCCESS committed by anyone before the lock on the
 * parent was granted.
 */
static void
CheckLimit(Relation rel, const char *refund, const char *refund_key, Datum parent,
		   Datum amount, const char *currency)
{
	HeapTuple	tuple;
	TupleDesc	tupdesc;
	Datum		captured;
	Datum		taken;
	Datum		after;
	bool		isnull;
	int			ret;

	/*
	 * The parent's lock is held: a snapshot now sees every refund before
	 * us, and -- past the command counter -- the rows an UPDATE of several
	 * refunds moved into PROCESSING before this one.
	 */
	CommandCounterIncrement();
	ret = SPI_execute_snapshot(check_plans[CHECK_BALANCE], &parent, NULL,
							   GetLatestSnapshot(), InvalidSnapshot, true, false, 1);
	if (ret != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "SPI_execute_snapshot failed: %s", SPI_result_code_string(ret));
	tuple = SPI_tuptable->vals[0];
	tupdesc = SPI_tuptable->tupdesc;
	captured = SPI_getbinval(tuple, tupdesc, 1, &isnull);
	taken = SPI_getbinval(tuple, tupdesc, 2, &isnull);
	after = DirectFunctionCall2(numeric_add, taken, amount);
	if (DatumGetInt32(DirectFunctionCall2(numeric_cmp, after, captured)) <= 0)
		return;

	ereport(ERROR,
			(errmsg("refund %s of payment %s would refund more than was captured",
					refund_key, PayQuoteTextDatum(parent)),
			 errdetail("Captured: %s %s; already refunded or in flight: %s; asked: %s (refund %s).",
					   NumericText(captured), currency,
					   NumericText(taken), NumericText(amount), refund),
			 errtable(rel),
			 PayReasonWith(PAY_REASON_REFUND_LIMIT,
						   NumericText(DirectFunctionCall2(numeric_sub, captured, taken)))));
}

/*
 * Hold tuple, a ledger row with a parent, to the rules of refunds: a
 * refund key and an amount, a parent that is a SUCCESS payment and no
 * refund, the parent's currency; and when entering_processing, the limit.
 */
void
PayCheckRefund(const PayCatalog *catalog, Relation rel, HeapTuple tuple,
			   bool entering_processing)
{
	TupleDesc	rowdesc = RelationGetDescr(rel);
	const AttrNumber *col = catalog->ledger_attnums;
	bool		isnull;
	bool		amount_null;
	bool		currency_null;
	char	   *refund = PayQuoteTextDatum(heap_getattr(tuple, col[LEDGER_BIZNO], rowdesc, &isnull));
	Datum		parent = heap_getattr(tuple, col[LEDGER_PARENT], rowdesc, &isnull);
	Datum		refund_key;
	Datum		amount = heap_getattr(tuple, col[LEDGER_AMOUNT], rowdesc, &amount_null);
	Datum		currency = heap_getattr(tuple, col[LEDGER_CURRENCY], rowdesc, &currency_null);
	PayOwnerContext owner;
	HeapTuple	found;
	TupleDesc	founddesc;
	PayStatus	parent_status;
	Datum		parent_currency;
	bool		parent_currency_null;
	bool		grandparent_null;
	const char *currency_text;
	int			ret;

	refund_key = heap_getattr(tuple, col[LEDGER_REFUND_KEY], rowdesc, &isnull);
	if (isnull || amount_null)
		RaiseBadParent(rel, PAY_REASON_REFUND_INCOMPLETE,
					   psprintf("refund %s needs a refund key and an amount", refund),
					   "A row with a parent is a refund: its refund_key names it among the payment's refunds, its amount is what goes back.");

	PayBecomeOwner(rel, &owner);
	SPI_connect();
	PrepareCheckPlans(catalog);

	ret = SPI_execute_plan(check_plans[CHECK_LOCK_PARENT], &parent, NULL, false, 1);
	if (ret != SPI_OK_SELECT)
		elog(ERROR, "SPI_execute_plan failed: %s", SPI_result_code_string(ret));
	if (SPI_processed == 0 && PayArchiveHolds(catalog, parent))
		ereport(ERROR,
				(errmsg("refund %s names payment %s, which was archived",
						refund, PayQuoteTextDatum(parent)),
				 errdetail("An archived payment is settled for good: it is not refunded again."),
				 PayReason(PAY_REASON_ARCHIVED)));
	if (SPI_processed == 0)
		RaiseBadParent(rel, PAY_REASON_REFUND_UNKNOWN_PARENT,
					   psprintf("refund %s names payment %s, which the ledger does not have",
								refund, PayQuoteTextDatum(parent)),
					   "A refund pays back a payment of the ledger.");
	found = SPI_tuptable->vals[0];
	founddesc = SPI_tuptable->tupdesc;
	parent_status = PayStatusFromLabel(catalog,
									   DatumGetObjectId(SPI_getbinval(found, founddesc, 1, &isnull)));
	parent_currency = SPI_getbinval(found, founddesc, 2, &parent_currency_null);
	(void) SPI_getbinval(found, founddesc, 3, &grandparent_null);

	if (!grandparent_null)
		RaiseBadParent(rel, PAY_REASON_REFUND_OF_REFUND,
					   psprintf("refund %s names %s, which is itself a refund or a step of an authorization",
								refund, PayQuoteTextDatum(parent)),
					   "Only a payment or an authorization is refunded, never a refund, nor a capture: refund what was captured through its authorization.");
	if (parent_status != PAY_SUCCESS)
		ereport(ERROR,
				(errmsg("payment %s is %s: only a SUCCESS payment can be refunded",
						PayQuoteTextDatum(parent), PayStatusName(parent_status)),
				 errdetail("Refund %s pays back money the bank captured for the payment.", refund),
				 errtable(rel),
				 PayReason(parent_status == PAY_PROCESSING ?
						   PAY_REASON_REFUND_PARENT_PROCESSING : PAY_REASON_REFUND_PARENT_UNPAID)));
	currency_text = currency_null ? "" : TextDatumGetCString(currency);
	if (currency_null != parent_currency_null ||
		(!currency_null && !DatumGetBool(DirectFunctionCall2Coll(texteq, C_COLLATION_OID, currency, parent_currency))))
		ereport(ERROR,
				(errmsg("refund %s must be in the currency of payment %s",
						refund, PayQuoteTextDatum(parent)),
				 errdetail("The payment is in %s; the refund in %s.",
						   parent_currency_null ? "no currency" : TextDatumGetCString(parent_currency),
						   currency_null ? "no currency" : currency_text),
				 errtable(rel),
				 PayReason(PAY_REASON_REFUND_CURRENCY)));

	if (entering_processing)
		CheckLimit(rel, refund, PayQuoteTextDatum(refund_key), parent, amount, currency_text);

	SPI_finish();
	PayRestoreUser(&owner);
}
