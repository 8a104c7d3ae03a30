/*-------------------------------------------------------------------------
 *
 * ledger.c
 *	  The payment API: pay_open, pay_begin, pay_claim, pay_open_claim,
 *	  pay_succeed, pay_fail, pay_reset, pay_transition, pay_refund_open and
 *	  pay_confirm_second_charge.
 *
 * Every function runs as the extension owner (SECURITY DEFINER) through
 * saved plans whose every name is schema-qualified, each run with
 * search_path pinned to the extension's schema and pg_temp (PayPinSearchPath),
 * as a function's SET clause would pin it.  A new payment's INSERT and the
 * settling UPDATE go straight through the access methods when nothing the
 * executor would do is left undone (direct.c); they run no SQL, and pin
 * search_path themselves when a DBA's default, domain check or index could
 * look a name up.  That is why pay_begin, pay_claim, pay_succeed and
 * pay_fail need no SET clause of their own, and what makes them cheap.  A
 * decision that writes
 * is taken on the row as re-read under FOR UPDATE; decisions that do not
 * write (ALREADY_SUCCEEDED, IN_PROGRESS) are taken on a plain read, because
 * SUCCESS never changes and a PROCESSING row answered IN_PROGRESS is never
 * charged.  The plain read is a direct probe of the primary key with the
 * snapshot a statement would take: it is the whole duplicate-retry path,
 * and the first step of every new payment.  The ledger's triggers (guard.c,
 * journal.c) enforce the state machine and write the journal for these
 * writes as for any other; a note for the journal travels in the row
 * written (the ledger's note column).
 *
 * What to do with a payment is never decided here: pay_begin asks
 * PayDecideBegin, settling and pay_transition ask PayTransitionVerdict
 * (machine.c).
 *
 * Each version's SQL binds entry points of its own where the rules changed
 * (PayApi), as pg_stat_statements does, so an installed 1.2 keeps 1.2's
 * rules until ALTER EXTENSION UPDATE.  1.3's rules make the guarantee
 * independent of the caller getting every detail right: the attempt of a
 * settlement is required (the fencing token), a new payment needs amount
 * and currency, an active ISO 4217 one with the amount in its minor units,
 * a success needs the bank's reference, mismatches name the field
 * (pay_amount_frozen, pay_currency_frozen, and pay_parameter_changed under
 * idempotent_pay.parameter_change = refuse), texts are bounded, and a
 * second charge is pay_succeed's result, SECOND_CHARGE, not a WARNING
 * alone.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/relation.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/numeric.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "amount.h"
#include "bizno.h"
#include "catalog.h"
#include "direct.h"
#include "guard.h"
#include "idempotent_pay.h"
#include "ledger.h"
#include "machine.h"
#include "stats.h"

/*
 * The rules a version's SQL promised its callers; later versions keep the
 * earlier ones' rules and add their own.
 */
typedef enum PayApi
{
	PAY_API_1_1,				/* 1.0 and 1.1 */
	PAY_API_1_2,				/* a new payment needs its amount */
	PAY_API_1_3					/* the guarantee does not depend on the caller */
} PayApi;

/* The saved plans of this file, in the order of plan_queries. */
typedef enum LedgerPlan
{
	PLAN_LOCK,
	PLAN_INSERT,
	PLAN_INSERT_STRICT,
	PLAN_SET_STATUS,
	PLAN_SETTLE,
	PLAN_SET_AMOUNT,
	PLAN_FIND_ORDER,
	PLAN_JOURNAL_SECOND_CHARGE,
	/* since 1.2: the ledger has parent and refund_key */
	PLAN_FIND_REFUND,
	PLAN_READ_PARENT,
	PLAN_INSERT_REFUND,
	PLAN_INSERT_REFUND_STRICT,
	PLAN_COUNT
} LedgerPlan;

#define FirstRefundPlan PLAN_FIND_REFUND

/*
 * %1$s is the quoted schema; = is pinned to pg_catalog.  %2$s sets the
 * columns a 1.2 ledger has and older ones lack (ExtraSets): the note, and
 * a success's response; it is the empty string before the update.
 */
#define EQ "OPERATOR(pg_catalog.=)"
static const char *const plan_queries[PLAN_COUNT] = {
	[PLAN_LOCK] =
	"SELECT status, amount, currency, attempt FROM %1$s.pay_ledger WHERE bizno " EQ " $1 FOR UPDATE",
	[PLAN_INSERT] =
	"INSERT INTO %1$s.pay_ledger (bizno, status, amount, currency) VALUES ($1, $2, $3, $4) "
	"ON CONFLICT DO NOTHING",
	[PLAN_INSERT_STRICT] =
	"INSERT INTO %1$s.pay_ledger (bizno, status, amount, currency) VALUES ($1, $2, $3, $4)",
	[PLAN_SET_STATUS] =
	"UPDATE %1$s.pay_ledger SET status = $2%2$s WHERE bizno " EQ " $1",
	[PLAN_SETTLE] =
	"UPDATE %1$s.pay_ledger SET status = $2, channel_ref = COALESCE($3, channel_ref), "
	"last_error = COALESCE($4, last_error)%2$s "
	"WHERE bizno " EQ " $1 AND status " EQ " $5 AND attempt " EQ " COALESCE($6, attempt)",
	/* $7: the response of a success */
	[PLAN_SET_AMOUNT] =
	"UPDATE %1$s.pay_ledger SET amount = $2, currency = $3 WHERE bizno " EQ " $1",
	/* once per second reference: a repeated report is the same charge */
	[PLAN_JOURNAL_SECOND_CHARGE] =
	"INSERT INTO %1$s.pay_journal (bizno, attempt, from_status, to_status, amount, currency, note, actor) "
	"SELECT l.bizno, l.attempt, l.status, l.status, l.amount, l.currency, $2, $3 "
	"FROM %1$s.pay_ledger AS l WHERE l.bizno " EQ " $1 AND NOT EXISTS ("
	"SELECT FROM %1$s.pay_journal AS j WHERE j.bizno " EQ " $1 AND j.from_status " EQ " l.status "
	"AND j.to_status " EQ " l.status AND j.note " EQ " $2)",
	[PLAN_FIND_REFUND] =
	"SELECT status, amount, currency, attempt, bizno FROM %1$s.pay_ledger "
	"WHERE parent " EQ " $1 AND refund_key " EQ " $2",
	[PLAN_READ_PARENT] =
	"SELECT currency, prefix, biz_id FROM %1$s.pay_ledger WHERE bizno " EQ " $1",
	[PLAN_INSERT_REFUND] =
	"INSERT INTO %1$s.pay_ledger (bizno, status, amount, currency, parent, refund_key, note) "
	"VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING",
	[PLAN_INSERT_REFUND_STRICT] =
	"INSERT INTO %1$s.pay_ledger (bizno, status, amount, currency, parent, refund_key, note) "
	"VALUES ($1, $2, $3, $4, $5, $6, $7)",
	[PLAN_FIND_ORDER] =
	"SELECT status, amount, currency, attempt, bizno FROM %1$s.pay_ledger "
	"WHERE prefix " EQ " $1 AND biz_id " EQ " $2",
};

/*
 * What a plan sets in the columns of a 1.2 ledger: the note of the write
 * (a failure's reason is its note), and the response of a success.
 */
static const char *
ExtraSets(LedgerPlan plan)
{
	switch (plan)
	{
		case PLAN_SET_STATUS:
			return ", note = $3";
		case PLAN_SETTLE:
			return ", note = $4, response = $7";
		default:
			return "";
	}
}

static SPIPlanPtr plans[PLAN_COUNT];
/* the catalog generation the plans were made for */
static uint64 plans_generation = 0;

/* A ledger row as the API reads it; SPI reads live in SPI memory. */
typedef struct LedgerRow
{
	PayStatus	status;
	Datum		amount;
	bool		amount_null;
	Datum		currency;
	bool		currency_null;
	int32		attempt;
	Datum		bizno;			/* PLAN_FIND_ORDER, PLAN_FIND_REFUND only */
	/* ProbeRow only: */
	Datum		channel_ref;
	bool		channel_ref_null;
	Datum		response;
	bool		response_null;
} LedgerRow;

/* The amount and currency a caller passed; either may be absent. */
typedef struct PaymentAmount
{
	bool		has_amount;
	Datum		amount;
	bool		has_currency;
	Datum		currency;
} PaymentAmount;

PG_FUNCTION_INFO_V1(pay_open);
PG_FUNCTION_INFO_V1(pay_begin);
PG_FUNCTION_INFO_V1(pay_begin_1_2);
PG_FUNCTION_INFO_V1(pay_claim);
PG_FUNCTION_INFO_V1(pay_open_claim);
PG_FUNCTION_INFO_V1(pay_succeed);
PG_FUNCTION_INFO_V1(pay_fail);
PG_FUNCTION_INFO_V1(pay_reset);
PG_FUNCTION_INFO_V1(pay_transition);
PG_FUNCTION_INFO_V1(pay_refund_open);
PG_FUNCTION_INFO_V1(pay_open_1_3);
PG_FUNCTION_INFO_V1(pay_begin_1_3);
PG_FUNCTION_INFO_V1(pay_claim_1_3);
PG_FUNCTION_INFO_V1(pay_open_claim_1_3);
PG_FUNCTION_INFO_V1(pay_succeed_1_3);
PG_FUNCTION_INFO_V1(pay_fail_1_3);
PG_FUNCTION_INFO_V1(pay_reset_1_3);
PG_FUNCTION_INFO_V1(pay_transition_1_3);
PG_FUNCTION_INFO_V1(pay_refund_open_1_3);
PG_FUNCTION_INFO_V1(pay_confirm_second_charge);

/* Whether the ledger has the columns of 1.2 a write's note and answer go in. */
static bool
LedgerHasNote(const PayCatalog *catalog)
{
	return catalog->ledger_attnums[LEDGER_NOTE] != InvalidAttrNumber &&
		catalog->ledger_attnums[LEDGER_RESPONSE] != InvalidAttrNumber;
}

/*
 * Prepare the plans for the catalog as it is now: once per backend, and
 * again whenever the catalog was looked up again.
 */
static void
PreparePlans(const PayCatalog *catalog)
{
	Oid			status = catalog->status_type;
	Oid			argtypes[PLAN_COUNT][7] = {
		[PLAN_LOCK] = {TEXTOID},
		[PLAN_INSERT] = {TEXTOID, status, NUMERICOID, TEXTOID},
		[PLAN_INSERT_STRICT] = {TEXTOID, status, NUMERICOID, TEXTOID},
		[PLAN_SET_STATUS] = {TEXTOID, status, TEXTOID},
		[PLAN_SETTLE] = {TEXTOID, status, TEXTOID, TEXTOID, status, INT4OID, JSONBOID},
		[PLAN_SET_AMOUNT] = {TEXTOID, NUMERICOID, TEXTOID},
		[PLAN_FIND_ORDER] = {TEXTOID, TEXTOID},
		[PLAN_JOURNAL_SECOND_CHARGE] = {TEXTOID, TEXTOID, TEXTOID},
		[PLAN_FIND_REFUND] = {TEXTOID, TEXTOID},
		[PLAN_READ_PARENT] = {TEXTOID},
		[PLAN_INSERT_REFUND] = {TEXTOID, status, NUMERICOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID},
		[PLAN_INSERT_REFUND_STRICT] = {TEXTOID, status, NUMERICOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID},
	};
	static const int nargs[PLAN_COUNT] = {
		[PLAN_LOCK] = 1,[PLAN_INSERT] = 4,[PLAN_INSERT_STRICT] = 4,
		[PLAN_SET_STATUS] = 3,[PLAN_SETTLE] = 7,[PLAN_SET_AMOUNT] = 3,
		[PLAN_FIND_ORDER] = 2,[PLAN_JOURNAL_SECOND_CHARGE] = 3,
		[PLAN_FIND_REFUND] = 2,[PLAN_READ_PARENT] = 1,
		[PLAN_INSERT_REFUND] = 7,[PLAN_INSERT_REFUND_STRICT] = 7,
	};
	bool		write_note = LedgerHasNote(catalog);
	bool		has_refunds = catalog->ledger_attnums[LEDGER_PARENT] != InvalidAttrNumber &&
		catalog->ledger_attnums[LEDGER_REFUND_KEY] != InvalidAttrNumber && write_note;

	if (plans_generation == catalog->generation)
		return;

	/* an error part-way leaves the generation old: all are prepared again */
	for (int i = 0; i < PLAN_COUNT; i++)
	{
		SPIPlanPtr	plan;

		if (plans[i] != NULL)
		{
			SPI_freeplan(plans[i]);
			plans[i] = NULL;
		}
		if (i >= FirstRefundPlan && !has_refunds)
			continue;			/* the ledger of 1.1: no refunds before the update */
		plan = SPI_prepare(psprintf(plan_queries[i], catalog->schema,
									write_note ? ExtraSets(i) : ""),
						   nargs[i], argtypes[i]);
		if (plan == NULL)
			elog(ERROR, "SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
		SPI_keepplan(plan);
		plans[i] = plan;
	}
	plans_generation = catalog->generation;
}

/*
 * Raise the error being handled again without its CONTEXT, which would show
 * the API's own SQL, and with a HINT for a serialization failure.
 */
static void
RethrowForCaller(MemoryContext context)
{
	ErrorData  *error;

	MemoryContextSwitchTo(context);
	error = CopyErrorData();
	FlushErrorState();
	error->context = NULL;
	if (error->sqlerrcode == ERRCODE_T_R_SERIALIZATION_FAILURE && error->hint == NULL)
		error->hint = pstrdup("Another transaction changed this payment meanwhile: retry the whole transaction.");
	ReThrowError(error);
}

/* Run a saved plan; nulls as SPI wants them ('n' or ' '). */
static uint64
RunPlan(const PayCatalog *catalog, LedgerPlan plan, Datum *values, const char *nulls)
{
	MemoryContext context = CurrentMemoryContext;
	int			nest_level = PayPinSearchPath(catalog);
	int			ret = 0;

	PG_TRY();
	{
		PreparePlans(catalog);
		ret = SPI_execute_plan(plans[plan], values, nulls, false, 0);
	}
	PG_CATCH();
	{
		RethrowForCaller(context);
	}
	PG_END_TRY();
	AtEOXact_GUC(true, nest_level);
	if (ret < 0)
		elog(ERROR, "SPI_execute_plan failed: %s", SPI_result_code_string(ret));
	return SPI_processed;
}


/*
 * Run a plan that writes a note (NULL for none).  The note is one of the
 * plan's parameters, stored in the row it writes; a ledger of an older
 * version has no note column until ALTER EXTENSION UPDATE, and there the
 * note is given to the journal as idempotent_pay.journal_note for the
 * duration of the statement alone, as a function's SET clause would.
 */
static uint64
RunNotedPlan(const PayCatalog *catalog, LedgerPlan plan, Datum *values, const char *nulls,
			 const char *note)
{
	int			nest_level;
	uint64		processed;

	if (LedgerHasNote(catalog) || note == NULL)
		return RunPlan(catalog, plan, values, nulls);

	nest_level = NewGUCNestLevel();
	(void) set_config_option("idempotent_pay.journal_note", note, PGC_USERSET,
							 PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	processed = RunPlan(catalog, plan, values, nulls);
	AtEOXact_GUC(true, nest_level);
	return processed;
}

/*
 * Read a row through a plan: the row of a bizNo locked (PLAN_LOCK), the
 * row of a business action (PLAN_FIND_ORDER) or of a refund
 * (PLAN_FIND_REFUND); false when there is none.
 */
static bool
ReadRow(const PayCatalog *catalog, LedgerPlan plan, Datum *args, LedgerRow *row)
{
	HeapTuple	tuple;
	TupleDesc	tupdesc;
	bool		isnull;

	if (RunPlan(catalog, plan, args, NULL) == 0)
		return false;

	tuple = SPI_tuptable->vals[0];
	tupdesc = SPI_tuptable->tupdesc;
	row->status = PayStatusFromLabel(catalog,
									 DatumGetObjectId(SPI_getbinval(tuple, tupdesc, 1, &isnull)));
	row->amount = SPI_getbinval(tuple, tupdesc, 2, &row->amount_null);
	row->currency = SPI_getbinval(tuple, tupdesc, 3, &row->currency_null);
	row->attempt = DatumGetInt32(SPI_getbinval(tuple, tupdesc, 4, &isnull));
	if (plan == PLAN_FIND_ORDER || plan == PLAN_FIND_REFUND)
		row->bizno = SPI_getbinval(tuple, tupdesc, 5, &isnull);
	return true;
}

static bool
LockRow(const PayCatalog *catalog, Datum bizno, LedgerRow *row)
{
	return ReadRow(catalog, PLAN_LOCK, &bizno, row);
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
static bool
ProbeRow(FunctionCallInfo fcinfo, Datum bizno, LedgerRow *row)
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

	found = PayFetchLedgerRow(ledger, pkey, snapshot, bizno, slot);
	if (found)
	{
		bool		isnull;

		row->status = PayStatusFromLabel(catalog,
										 DatumGetObjectId(slot_getattr(slot, catalog->ledger_attnums[LEDGER_STATUS],
																	   &isnull)));
		row->amount = slot_getattr(slot, catalog->ledger_attnums[LEDGER_AMOUNT], &row->amount_null);
		if (!row->amount_null)
			row->amount = datumCopy(row->amount, false, -1);
		row->currency = slot_getattr(slot, catalog->ledger_attnums[LEDGER_CURRENCY], &row->currency_null);
		if (!row->currency_null)
			row->currency = datumCopy(row->currency, false, -1);
		row->attempt = DatumGetInt32(slot_getattr(slot, catalog->ledger_attnums[LEDGER_ATTEMPT], &isnull));
		row->channel_ref = slot_getattr(slot, catalog->ledger_attnums[LEDGER_CHANNEL_REF],
										&row->channel_ref_null);
		if (!row->channel_ref_null)
			row->channel_ref = datumCopy(row->channel_ref, false, -1);
		row->response_null = true;
		if (catalog->ledger_attnums[LEDGER_RESPONSE] != InvalidAttrNumber)
			row->response = slot_getattr(slot, catalog->ledger_attnums[LEDGER_RESPONSE],
										 &row->response_null);
		if (!row->response_null)
			row->response = datumCopy(row->response, false, -1);
	}
	UnregisterSnapshot(snapshot);
	ExecDropSingleTupleTableSlot(slot);
	index_close(pkey, NoLock);
	table_close(ledger, NoLock);
	return found;
}

/*
 * Refuse (55000) when a write that must write one row wrote none: a trigger
 * or rule of the DBA's on pay_ledger suppressed it, and the API must not
 * answer as though it had written.
 */
static void
RequireRowWritten(uint64 processed, Datum bizno)
{
	if (processed != 1)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the write of payment %s was suppressed", TextDatumGetCString(bizno)),
				 errdetail("A trigger or rule on pay_ledger skipped a write of the API."),
				 errhint("An operator must let the triggers and rules of pay_ledger pass the API's writes."),
				 err_generic_string(PG_DIAG_CONSTRAINT_NAME, "pay_write_suppressed")));
}

static void
SetStatus(const PayCatalog *catalog, Datum bizno, PayStatus status, const char *note)
{
	Datum		args[3] = {bizno, PayStatusGetDatum(catalog, status),
	note ? CStringGetTextDatum(note) : (Datum) 0};
	char		nulls[3] = {' ', ' ', note ? ' ' : 'n'};

	RequireRowWritten(RunNotedPlan(catalog, PLAN_SET_STATUS, args, nulls, note), bizno);
}

/*
 * Insert a new ledger row.  With ON CONFLICT DO NOTHING (plan PLAN_INSERT)
 * false when a row with any unique key of it exists -- written directly
 * when it can be (direct.c); with PLAN_INSERT_STRICT such a row raises the
 * unique violation that names its index.
 */
static bool
InsertRow(FunctionCallInfo fcinfo, const PayCatalog *catalog, LedgerPlan plan, Datum bizno,
		  PayStatus status, const PaymentAmount *amount)
{
	Datum		args[4] = {bizno, PayStatusGetDatum(catalog, status),
	amount->amount, amount->currency};
	char		nulls[4] = {' ', ' ', amount->has_amount ? ' ' : 'n',
	amount->has_currency ? ' ' : 'n'};
	bool		inserted;

	if (plan == PLAN_INSERT &&
		PayDirectInsert(fcinfo, bizno, status, !amount->has_amount, amount->amount,
						!amount->has_currency, amount->currency, &inserted))
		return inserted;
	return RunPlan(catalog, plan, args, nulls) == 1;
}

static const char *
KeyDescription(Datum bizno)
{
	return psprintf("bizNo %s", TextDatumGetCString(bizno));
}

static void
RaiseUnknownPayment(Datum bizno)
{
	ereport(ERROR,
			(errcode(ERRCODE_NO_DATA_FOUND),
			 errmsg("unknown payment %s", TextDatumGetCString(bizno)),
			 errhint("Start the payment first: pay_open, or pay_begin with its amount.")));
}

/* The bizNo argument: required, and a valid key. */
static Datum
KeyArgument(FunctionCallInfo fcinfo, int argno)
{
	BiznoParts	parts;

	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("bizno must not be null"),
				 errhint("Pass the bizNo the payment was opened with.")));
	BiznoCheckKey(PG_GETARG_TEXT_PP(argno), &parts);
	return PointerGetDatum(PG_GETARG_TEXT_PP(argno));
}

static void
RequireArgument(FunctionCallInfo fcinfo, int argno, const char *name)
{
	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be null", name),
				 errhint("Pass a value for %s.", name)));
}

/*
 * A text argument that is not required: NULL, or its C string once it is
 * held to the bound of what it is (since 1.3).
 */
static const char *
BoundedTextArgument(FunctionCallInfo fcinfo, int argno, const char *what,
					int max_chars, PayApi api)
{
	if (PG_ARGISNULL(argno))
		return NULL;
	if (api >= PAY_API_1_3)
		PayCheckTextLength(PG_GETARG_TEXT_PP(argno), what, max_chars);
	return TextDatumGetCString(PG_GETARG_DATUM(argno));
}

/*
 * Amount and currency arguments, each optional, held to amount.c's rule;
 * since 1.3 a currency is an active ISO 4217 code, in whose minor units the
 * amount is given.
 */
static PaymentAmount
AmountArguments(FunctionCallInfo fcinfo, int amount_arg, int currency_arg, PayApi api)
{
	PaymentAmount result = {0};

	if (!PG_ARGISNULL(amount_arg))
	{
		PayCheckAmount(PG_GETARG_NUMERIC(amount_arg));
		result.has_amount = true;
		result.amount = PG_GETARG_DATUM(amount_arg);
	}
	if (!PG_ARGISNULL(currency_arg))
	{
		PayCheckCurrency(PG_GETARG_TEXT_PP(currency_arg));
		if (api >= PAY_API_1_3)
			PayCheckCurrencyKnown(PG_GETARG_TEXT_PP(currency_arg));
		result.has_currency = true;
		result.currency = PointerGetDatum(PG_GETARG_TEXT_PP(currency_arg));
	}
	if (api >= PAY_API_1_3 && result.has_amount && result.has_currency)
		PayCheckAmountFits(DatumGetNumeric(result.amount), DatumGetTextPP(result.currency));
	return result;
}

/* Byte equality of two texts: currency codes are ASCII. */
static bool
TextEqual(Datum a, Datum b)
{
	text	   *x = DatumGetTextPP(a);
	text	   *y = DatumGetTextPP(b);

	return VARSIZE_ANY_EXHDR(x) == VARSIZE_ANY_EXHDR(y) &&
		memcmp(VARDATA_ANY(x), VARDATA_ANY(y), VARSIZE_ANY_EXHDR(x)) == 0;
}

static bool
AmountFieldDiffers(const LedgerRow *row, const PaymentAmount *amount)
{
	return amount->has_amount &&
		(row->amount_null ||
		 !DatumGetBool(DirectFunctionCall2(numeric_eq, row->amount, amount->amount)));
}

static bool
CurrencyFieldDiffers(const LedgerRow *row, const PaymentAmount *amount)
{
	return amount->has_currency &&
		(row->currency_null || !TextEqual(row->currency, amount->currency));
}

static bool
AmountDiffers(const LedgerRow *row, const PaymentAmount *amount)
{
	return AmountFieldDiffers(row, amount) || CurrencyFieldDiffers(row, amount);
}

static const char *
AmountText(bool amount_null, Datum amount, bool currency_null, Datum currency)
{
	return psprintf("%s %s",
					amount_null ? "(none)" :
					DatumGetCString(DirectFunctionCall1(numeric_out, amount)),
					currency_null ? "" : TextDatumGetCString(currency));
}

/*
 * Refuse (55000) a change of one field of a payment's amount -- the amount
 * or the currency, named by constraint -- with both values.
 */
static void
RaiseFieldChange(Datum bizno, const LedgerRow *row, const char *field,
				 const char *recorded, const char *requested, const char *constraint)
{
	bool		frozen = PayStatusIsFrozen(row->status);

	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("payment %s is %s: its %s cannot change", TextDatumGetCString(bizno),
					PayStatusName(row->status), field),
			 errdetail("Recorded %s: %s; requested: %s.", field, recorded, requested),
			 frozen ?
			 errhint("A payment being charged or paid keeps its %s: fix the caller, or open a new business action for another one.", field) :
			 errhint("idempotent_pay.parameter_change = refuse: a known bizNo keeps its amount and currency; open a new business action for other ones."),
			 err_generic_string(PG_DIAG_CONSTRAINT_NAME, constraint)));
}

/*
 * A payment keeps one amount while it is charged: a different amount is
 * refused (55000) while PROCESSING or SUCCESS, and replaced -- journaled by
 * the ledger's trigger -- while INIT or FAILED, unless, since 1.3,
 * idempotent_pay.parameter_change = refuse.  Since 1.3 the refusal names
 * the field that differs.  row must be locked when it is INIT or FAILED.
 */
static void
ApplyAmount(const PayCatalog *catalog, Datum bizno, const LedgerRow *row,
			const PaymentAmount *amount, PayApi api)
{
	Datum		args[3];
	char		nulls[3] = {' ', ' ', ' '};

	if (!AmountDiffers(row, amount))
		return;

	if (api >= PAY_API_1_3 &&
		(PayStatusIsFrozen(row->status) || pay_parameter_change == PAY_PARAMETER_CHANGE_REFUSE))
	{
		bool		frozen = PayStatusIsFrozen(row->status);

		if (CurrencyFieldDiffers(row, amount))
			RaiseFieldChange(bizno, row, "currency",
							 row->currency_null ? "(none)" : TextDatumGetCString(row->currency),
							 TextDatumGetCString(amount->currency),
							 frozen ? "pay_currency_frozen" : "pay_parameter_changed");
		RaiseFieldChange(bizno, row, "amount",
						 row->amount_null ? "(none)" :
						 DatumGetCString(DirectFunctionCall1(numeric_out, row->amount)),
						 DatumGetCString(DirectFunctionCall1(numeric_out, amount->amount)),
						 frozen ? "pay_amount_frozen" : "pay_parameter_changed");
	}
	if (PayStatusIsFrozen(row->status))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("payment %s is %s: its amount cannot change",
						TextDatumGetCString(bizno), PayStatusName(row->status)),
				 errdetail("Recorded: %s; requested: %s.",
						   AmountText(row->amount_null, row->amount,
									  row->currency_null, row->currency),
						   AmountText(!amount->has_amount, amount->amount,
									  !amount->has_currency, amount->currency)),
				 errhint("A payment being charged or paid keeps its amount: fix the caller, or open a new business action for another amount."),
				 err_generic_string(PG_DIAG_CONSTRAINT_NAME, "pay_amount_frozen")));

	args[0] = bizno;
	args[1] = amount->has_amount ? amount->amount : row->amount;
	nulls[1] = (amount->has_amount || !row->amount_null) ? ' ' : 'n';
	args[2] = amount->has_currency ? amount->currency : row->currency;
	nulls[2] = (amount->has_currency || !row->currency_null) ? ' ' : 'n';
	RequireRowWritten(RunPlan(catalog, PLAN_SET_AMOUNT, args, nulls), bizno);
}

/*
 * Insert failed on a unique key but no row has this bizNo: another bizNo
 * may hold the same (prefix, biz_id).  Raise 23505 naming it; return when
 * there is none (the holder vanished meanwhile, or another unique index of
 * the DBA's refused the row).
 */
static void
RaiseIfOrderTaken(const PayCatalog *catalog, Datum bizno)
{
	text	   *key = DatumGetTextPP(bizno);
	BiznoParts	parts;
	char		expected_check;
	Datum		args[2];
	LedgerRow	holder;

	if (bizno_parse(VARDATA_ANY(key), VARSIZE_ANY_EXHDR(key), &parts,
					&expected_check) != BIZNO_VALID)
		return;
	args[0] = PointerGetDatum(cstring_to_text_with_len(parts.prefix, parts.prefix_len));
	args[1] = PointerGetDatum(cstring_to_text_with_len(parts.biz_id, parts.biz_id_len));
	if (ReadRow(catalog, PLAN_FIND_ORDER, args, &holder))
		ereport(ERROR,
				(errcode(ERRCODE_UNIQUE_VIOLATION),
				 errmsg("business action %s %s already has bizNo %s",
						TextDatumGetCString(args[0]), TextDatumGetCString(args[1]),
						TextDatumGetCString(holder.bizno)),
				 errdetail("bizNo %s was not recorded: one business action has one bizNo.",
						   text_to_cstring(key)),
				 errhint("Pay this business action under bizNo %s (pay_open returns it).",
						 TextDatumGetCString(holder.bizno)),
				 err_generic_string(PG_DIAG_CONSTRAINT_NAME, "pay_ledger_prefix_biz_id_key")));
}

/*
 * Carry out the machine's pay_begin decision on a row read plainly (when
 * the decision writes nothing) or under lock (when it does).
 */
static PayAction
Begin(const PayCatalog *catalog, Datum bizno, const LedgerRow *row,
	  const PaymentAmount *amount, PayBeginDecision decision, PayApi api)
{
	ApplyAmount(catalog, bizno, row, amount, api);
	for (int i = 0; i < decision.nsteps; i++)
		SetStatus(catalog, bizno, decision.steps[i],
				  decision.steps[i] == PAY_INIT ?
				  "reset by pay_begin (idempotent_pay.retry_failed = auto)" : NULL);
	return decision.action;
}

/*
 * The pay_begin decision on bizno, carried out; returns the action.  When
 * after is not NULL it receives the payment as the call leaves it (for
 * pay_claim): the row read if nothing was locked or written, else the row
 * read again.  pay_begin passes NULL and reads nothing more.  Call it
 * inside SPI.
 */
static PayAction
Claim(FunctionCallInfo fcinfo, const PayCatalog *catalog, Datum bizno,
	  const PaymentAmount *amount, PayApi api, LedgerRow *after)
{
	bool		retry_failed = pay_retry_failed == PAY_RETRY_AUTO;
	PayBeginDecision decision;
	PayAction	action;
	LedgerRow	row;
	bool		row_is_current = false;

	for (;;)
	{
		CHECK_FOR_INTERRUPTS();
		if (!ProbeRow(fcinfo, bizno, &row))
		{
			if (api >= PAY_API_1_2 && !amount->has_amount)
				ereport(ERROR,
						(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
						 errmsg("payment %s is new: its amount must not be null",
								TextDatumGetCString(bizno)),
						 errhint("Pass the amount and currency to charge with the first claim, or open the payment with pay_open.")));
			if (api >= PAY_API_1_3 && !amount->has_currency)
				ereport(ERROR,
						(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
						 errmsg("payment %s is new: its currency must not be null",
								TextDatumGetCString(bizno)),
						 errhint("Pass the amount and currency to charge with the first claim, or open the payment with pay_open.")));
			decision = PayDecideBegin(PAY_NEW_ROW, retry_failed);
			if (InsertRow(fcinfo, catalog, PLAN_INSERT, bizno, decision.steps[0], amount))
			{
				action = decision.action;
				break;
			}
			if (!ProbeRow(fcinfo, bizno, &row))
			{
				RaiseIfOrderTaken(catalog, bizno);

				/*
				 * No row holds this bizNo or its business action, yet a
				 * unique index refused it: one of the DBA's, or the holder
				 * is gone.  Insert without ON CONFLICT: PostgreSQL names the
				 * index that refuses it, or the row goes in.
				 */
				RequireRowWritten(InsertRow(fcinfo, catalog, PLAN_INSERT_STRICT, bizno,
											decision.steps[0], amount), bizno);
				action = decision.action;
				break;
			}
		}
		decision = PayDecideBegin(row.status, retry_failed);
		row_is_current = true;
		/* a decision that writes is taken again on the row under lock */
		if (decision.nsteps > 0 ||
			(!PayStatusIsFrozen(row.status) && AmountDiffers(&row, amount)))
		{
			if (!LockRow(catalog, bizno, &row))
				continue;		/* deleted meanwhile */
			decision = PayDecideBegin(row.status, retry_failed);
			row_is_current = false;
		}
		action = Begin(catalog, bizno, &row, amount, decision, api);
		break;
	}

	if (after != NULL)
	{
		if (row_is_current)
			*after = row;
		else if (!ProbeRow(fcinfo, bizno, after))
			RequireRowWritten(0, bizno);
	}
	return action;
}

/*
 * pay_begin(bizno text, amount numeric, currency text) returns pay_action
 *
 * An entry point per version, as pg_stat_statements keeps them: the SQL of
 * 1.3 binds pay_begin_1_3, that of 1.2 pay_begin_1_2, which refuses a new
 * payment without an amount (22004); the SQL of 1.0 and 1.1, still
 * installed until ALTER EXTENSION UPDATE, binds pay_begin, which records it
 * with none, as those versions did.
 */
static Datum
BeginPayment(FunctionCallInfo fcinfo, PayApi api)
{
	const PayCatalog *catalog = PayCatalogGetTables(fcinfo);
	Datum		bizno = KeyArgument(fcinfo, 0);
	PaymentAmount amount = AmountArguments(fcinfo, 1, 2, api);
	PayAction	action;

	SPI_connect();
	action = Claim(fcinfo, catalog, bizno, &amount, api, NULL);
	SPI_finish();

	PayStatsCountAnswer(action);
	PG_RETURN_DATUM(PayActionGetDatum(catalog, action));
}

/* pay_begin as the SQL of 1.0 and 1.1 binds it: no amount required */
Datum
pay_begin(PG_FUNCTION_ARGS)
{
	return BeginPayment(fcinfo, PAY_API_1_1);
}

/* pay_begin as the SQL of 1.2 binds it: a new payment needs its amount */
Datum
pay_begin_1_2(PG_FUNCTION_ARGS)
{
	return BeginPayment(fcinfo, PAY_API_1_2);
}

Datum
pay_begin_1_3(PG_FUNCTION_ARGS)
{
	return BeginPayment(fcinfo, PAY_API_1_3);
}

/*
 * The pay_claim composite of an action and the payment as it stands:
 * (action, attempt, status, channel_ref, response), with bizno in front
 * when the result type has six columns (pay_open_claim).
 */
static Datum
ClaimResult(FunctionCallInfo fcinfo, const PayCatalog *catalog, Datum bizno,
			PayAction action, const LedgerRow *row)
{
	TupleDesc	tupdesc;
	Datum		values[6];
	bool		nulls[6] = {false, false, false, false, false, false};
	int			n = 0;

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "the result of a claim is not a composite type");
	tupdesc = BlessTupleDesc(tupdesc);
	if (tupdesc->natts == 6)
		values[n++] = bizno;
	values[n++] = PayActionGetDatum(catalog, action);
	values[n++] = Int32GetDatum(row->attempt);
	values[n++] = PayStatusGetDatum(catalog, row->status);
	nulls[n] = row->channel_ref_null;
	values[n++] = row->channel_ref;
	nulls[n] = row->response_null;
	values[n++] = row->response;
	return HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls));
}

/*
 * pay_claim(bizno text, amount numeric, currency text) returns pay_claim
 *
 * pay_begin's decision, with what the caller needs in the same round trip:
 * the attempt to charge under (PROCEED) or in flight (IN_PROGRESS), and
 * the reference and stored response of a success (ALREADY_SUCCEEDED).
 */
static Datum
ClaimPayment(FunctionCallInfo fcinfo, PayApi api)
{
	const PayCatalog *catalog = PayCatalogGetTables(fcinfo);
	Datum		bizno = KeyArgument(fcinfo, 0);
	PaymentAmount amount = AmountArguments(fcinfo, 1, 2, api);
	PayAction	action;
	LedgerRow	row;
	Datum		result;

	SPI_connect();
	action = Claim(fcinfo, catalog, bizno, &amount, api, &row);
	result = SPI_datumTransfer(ClaimResult(fcinfo, catalog, bizno, action, &row), false, -1);
	SPI_finish();

	PayStatsCountAnswer(action);
	PG_RETURN_DATUM(result);
}

Datum
pay_claim(PG_FUNCTION_ARGS)
{
	return ClaimPayment(fcinfo, PAY_API_1_2);
}

Datum
pay_claim_1_3(PG_FUNCTION_ARGS)
{
	return ClaimPayment(fcinfo, PAY_API_1_3);
}

/*
 * How the journal records a second charge: as 1.2 did (counted as captured
 * at once), reported by a settlement since 1.3 (counted once a bank
 * statement confirms it), or confirmed by a statement (pay_reconcile).  The
 * notes are the journal's record of which: pay_refund_balance, pay_verify
 * and pay_stats read them.
 */
typedef enum SecondCharge
{
	SECOND_CHARGE_1_2,
	SECOND_CHARGE_REPORTED,
	SECOND_CHARGE_CONFIRMED
} SecondCharge;

static const char *const second_charge_notes[] = {
	[SECOND_CHARGE_1_2] = "second charge: the bank reported %s for a payment settled as %s",
	[SECOND_CHARGE_REPORTED] = "second charge reported: %s, for a payment settled as %s",
	[SECOND_CHARGE_CONFIRMED] = "second charge confirmed by a statement: %s, for a payment settled as %s",
};

/*
 * A success reported again under another bank reference: the bank charged
 * twice.  The payment keeps its first reference and answer; the journal
 * records the second reference, once per reference, and the caller gets a
 * WARNING (pay_second_charge) saying to refund it -- and since 1.3 the
 * result SECOND_CHARGE, which no driver drops.  Not an ERROR: PostgreSQL has
 * no autonomous transactions, and an error would roll back the journal row
 * that is the evidence.
 */
static void
JournalSecondCharge(const PayCatalog *catalog, Datum bizno, const LedgerRow *row,
					Datum channel_ref, SecondCharge kind)
{
	char	   *second = TextDatumGetCString(channel_ref);
	char	   *first = TextDatumGetCString(row->channel_ref);
	Datum		args[3];

	args[0] = bizno;
	/* the session's role, as the journal trigger names it, not the owner */
	args[2] = CStringGetTextDatum(GetUserNameFromId(GetOuterUserId(), false));
	args[1] = CStringGetTextDatum(psprintf(second_charge_notes[kind], second, first));
	RunPlan(catalog, PLAN_JOURNAL_SECOND_CHARGE, args, NULL);
	if (kind == SECOND_CHARGE_CONFIRMED)
		return;
	ereport(WARNING,
			(errcode(ERRCODE_WARNING),
			 errmsg("payment %s succeeded already under %s; the bank reports another charge, %s",
					TextDatumGetCString(bizno), first, second),
			 errdetail("The payment keeps its first reference and answer; the second charge is journaled."),
			 errhint("Refund charge %s at the bank; pay_reconcile lists the payment as DUPLICATE_CHARGE.",
					 second),
			 err_generic_string(PG_DIAG_CONSTRAINT_NAME, "pay_second_charge")));
}

/*
 * The settling UPDATE (PLAN_SETTLE, args and nulls as it takes them),
 * written directly when it can be (direct.c); the rows it wrote.
 */
static uint64
SettleRow(FunctionCallInfo fcinfo, const PayCatalog *catalog, PayStatus target,
		  Datum *args, const char *nulls, const char *reason)
{
	PaySettleWrite write = {
		.bizno = args[0],
		.target = target,
		.channel_ref = args[2],
		.channel_ref_null = nulls[2] == 'n',
		.last_error = args[3],
		.last_error_null = nulls[3] == 'n',
		.attempt = nulls[5] == 'n' ? 0 : DatumGetInt32(args[5]),
		.attempt_null = nulls[5] == 'n',
		.response = args[6],
		.response_null = nulls[6] == 'n',
	};
	bool		settled;

	if (PayDirectSettle(fcinfo, &write, &settled))
		return settled ? 1 : 0;
	return RunNotedPlan(catalog, PLAN_SETTLE, args, nulls, reason);
}

/*
 * Refuse (55000) a settlement for an attempt that is not the current one,
 * saying which it is: a late answer for an earlier attempt, or an attempt
 * never claimed.
 */
static void
RaiseOtherAttempt(Datum bizno, const LedgerRow *row, int32 attempt)
{
	bool		earlier = attempt < row->attempt;

	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 earlier ?
			 errmsg("attempt %d of payment %s is not the current one",
					attempt, TextDatumGetCString(bizno)) :
			 errmsg("attempt %d of payment %s was never claimed",
					attempt, TextDatumGetCString(bizno)),
			 errdetail("The current attempt is %d, %s.", row->attempt,
					   PayStatusName(row->status)),
			 earlier ?
			 errhint("A late answer for an earlier attempt: the payment has moved on and keeps its state; "
					 "if the bank charged that attempt, reconcile it.") :
			 errhint("Settle with the attempt pay_claim returned when it answered PROCEED; "
					 "an attempt is claimed before it is charged."),
			 err_generic_string(PG_DIAG_CONSTRAINT_NAME,
								earlier ? "pay_stale_attempt" : "pay_unclaimed_attempt")));
}

/*
 * pay_succeed's result since 1.3 (pay_settlement): SUCCESS, or
 * SECOND_CHARGE when the bank reported another charge of a payment that
 * had succeeded already.  Its labels are looked up once per call site.
 */
static Datum
SettlementResult(FunctionCallInfo fcinfo, bool second_charge)
{
	Oid		   *labels = fcinfo->flinfo->fn_extra;

	if (labels == NULL)
	{
		Oid			type = get_func_rettype(fcinfo->flinfo->fn_oid);

		labels = MemoryContextAlloc(fcinfo->flinfo->fn_mcxt, 2 * sizeof(Oid));
		labels[0] = DatumGetObjectId(DirectFunctionCall2(enum_in, CStringGetDatum("SUCCESS"),
														 ObjectIdGetDatum(type)));
		labels[1] = DatumGetObjectId(DirectFunctionCall2(enum_in, CStringGetDatum("SECOND_CHARGE"),
														 ObjectIdGetDatum(type)));
		fcinfo->flinfo->fn_extra = labels;
	}
	return ObjectIdGetDatum(labels[second_charge ? 1 : 0]);
}

/*
 * pay_succeed and pay_fail: PROCESSING -> target, a no-op on target.
 * attempt, when given, must be the current attempt (a fencing token);
 * since 1.3 it must be given, and a success must bring the bank's
 * reference.
 */
static Datum
Settle(FunctionCallInfo fcinfo, PayStatus target, PayApi api)
{
	const PayCatalog *catalog = PayCatalogGetTables(fcinfo);
	Datum		bizno = KeyArgument(fcinfo, 0);
	const char *reason = NULL;
	Datum		args[7];
	char		nulls[7] = {' ', ' ', 'n', 'n', ' ', 'n', 'n'};
	LedgerRow	row;
	int32		settled_attempt = -1;	/* the attempt last found PROCESSING */
	bool		second_charge = false;

	if (api >= PAY_API_1_3)
	{
		if (target == PAY_SUCCESS && PG_ARGISNULL(1))
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("channel_ref must not be null"),
					 errhint("Pass the bank's reference of the charge: a success is known by it, and a second charge is told from it.")));
		if (PG_ARGISNULL(2))
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("attempt must not be null"),
					 errhint("Pass the attempt pay_claim returned: it keeps a late answer for an earlier attempt from settling a later one.")));
		if (target == PAY_SUCCESS)
			PayCheckTextLength(PG_GETARG_TEXT_PP(1), "channel_ref", PAY_CHANNEL_REF_MAX_CHARS);
		else if (!PG_ARGISNULL(1))
			PayCheckTextLength(PG_GETARG_TEXT_PP(1), "reason", PAY_NOTE_MAX_CHARS);
		if (target == PAY_SUCCESS && !PG_ARGISNULL(3))
			PayCheckResponseSize(PG_GETARG_DATUM(3));
	}

	args[0] = bizno;
	args[1] = PayStatusGetDatum(catalog, target);
	if (!PG_ARGISNULL(1))
	{
		/* channel_ref of a success, last_error of a failure */
		args[target == PAY_SUCCESS ? 2 : 3] = PG_GETARG_DATUM(1);
		nulls[target == PAY_SUCCESS ? 2 : 3] = ' ';
		if (target == PAY_FAILED)
			reason = TextDatumGetCString(PG_GETARG_DATUM(1));
	}
	/* the one state SUCCESS and FAILED are entered from */
	args[4] = PayStatusGetDatum(catalog, PAY_PROCESSING);
	if (!PG_ARGISNULL(2))
	{
		args[5] = PG_GETARG_DATUM(2);
		nulls[5] = ' ';
	}
	/* the answer to replay: pay_succeed's fourth argument, since 1.2 */
	if (target == PAY_SUCCESS && PG_NARGS() > 3 && !PG_ARGISNULL(3))
	{
		args[6] = PG_GETARG_DATUM(3);
		nulls[6] = ' ';
	}

	SPI_connect();
	for (;;)
	{
		PayVerdict	verdict;

		CHECK_FOR_INTERRUPTS();
		if (SettleRow(fcinfo, catalog, target, args, nulls, reason) == 1)
			break;

		if (!ProbeRow(fcinfo, bizno, &row))
			RaiseUnknownPayment(bizno);
		if (!PG_ARGISNULL(2) && row.attempt != PG_GETARG_INT32(2))
			RaiseOtherAttempt(bizno, &row, PG_GETARG_INT32(2));
		verdict = PayTransitionVerdict(row.status, target);
		if (verdict == PAY_NO_OP && target == PAY_SUCCESS && !PG_ARGISNULL(1) &&
			!row.channel_ref_null && !TextEqual(row.channel_ref, PG_GETARG_DATUM(1)))
		{
			JournalSecondCharge(catalog, bizno, &row, PG_GETARG_DATUM(1),
								api >= PAY_API_1_3 ? SECOND_CHARGE_REPORTED : SECOND_CHARGE_1_2);
			second_charge = true;
		}
		if (verdict == PAY_NO_OP)
			break;				/* a duplicate callback */
		if (verdict == PAY_ILLEGAL)
			PayRaiseIllegalTransition(NULL, KeyDescription(bizno), row.status, target);
		/* it left and re-entered PROCESSING meanwhile: settle that attempt */
		if (row.attempt == settled_attempt)
			RequireRowWritten(0, bizno);	/* no: the UPDATE was suppressed */
		settled_attempt = row.attempt;
	}
	SPI_finish();

	if (api >= PAY_API_1_3 && target == PAY_SUCCESS)
		PG_RETURN_DATUM(SettlementResult(fcinfo, second_charge));
	PG_RETURN_DATUM(PayStatusGetDatum(catalog, target));
}

/*
 * pay_succeed(bizno text, channel_ref text, attempt int [, response jsonb])
 * returns pay_status; the response argument exists since 1.2.  Since 1.3:
 * channel_ref and attempt required, returns pay_settlement.
 */
Datum
pay_succeed(PG_FUNCTION_ARGS)
{
	return Settle(fcinfo, PAY_SUCCESS, PAY_API_1_2);
}

Datum
pay_succeed_1_3(PG_FUNCTION_ARGS)
{
	return Settle(fcinfo, PAY_SUCCESS, PAY_API_1_3);
}

/*
 * pay_fail(bizno text, reason text, attempt int) returns pay_status;
 * since 1.3 attempt is required.
 */
Datum
pay_fail(PG_FUNCTION_ARGS)
{
	return Settle(fcinfo, PAY_FAILED, PAY_API_1_2);
}

Datum
pay_fail_1_3(PG_FUNCTION_ARGS)
{
	return Settle(fcinfo, PAY_FAILED, PAY_API_1_3);
}

/*
 * pay_confirm_second_charge(bizno text, channel_ref text) returns void
 *
 * A bank statement shows a second charge of SUCCESS payment bizno under
 * channel_ref (pay_reconcile calls it): journaled once as confirmed, from
 * then on counted as captured, so that it can be refunded.  The reference
 * of the payment's own success is no second charge: nothing to do.
 */
Datum
pay_confirm_second_charge(PG_FUNCTION_ARGS)
{
	const PayCatalog *catalog = PayCatalogGetTables(fcinfo);
	Datum		bizno = KeyArgument(fcinfo, 0);
	LedgerRow	row;

	RequireArgument(fcinfo, 1, "channel_ref");
	PayCheckTextLength(PG_GETARG_TEXT_PP(1), "channel_ref", PAY_CHANNEL_REF_MAX_CHARS);
	SPI_connect();
	if (!LockRow(catalog, bizno, &row) || !ProbeRow(fcinfo, bizno, &row))
		RaiseUnknownPayment(bizno);
	if (row.status != PAY_SUCCESS || row.channel_ref_null)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("payment %s is %s%s: a second charge is one of a settled payment",
						TextDatumGetCString(bizno), PayStatusName(row.status),
						row.status == PAY_SUCCESS ? " without a reference" : ""),
				 errhint("Settle the payment with its first charge's reference (pay_succeed) before confirming another."),
				 err_generic_string(PG_DIAG_CONSTRAINT_NAME, "pay_not_settled")));
	if (!TextEqual(row.channel_ref, PG_GETARG_DATUM(1)))
		JournalSecondCharge(catalog, bizno, &row, PG_GETARG_DATUM(1), SECOND_CHARGE_CONFIRMED);
	SPI_finish();
	PG_RETURN_VOID();
}

/*
 * Lock the row of bizno and move it to target as the machine allows.
 */
static Datum
GuardedTransition(FunctionCallInfo fcinfo, Datum bizno, PayStatus target,
				  const char *note)
{
	const PayCatalog *catalog = PayCatalogGetTables(fcinfo);
	LedgerRow	row;

	SPI_connect();
	if (!LockRow(catalog, bizno, &row))
		RaiseUnknownPayment(bizno);
	switch (PayTransitionVerdict(row.status, target))
	{
		case PAY_NO_OP:
			break;
		case PAY_ILLEGAL:
			PayRaiseIllegalTransition(NULL, KeyDescription(bizno), row.status, target);
			break;
		case PAY_LEGAL:
			SetStatus(catalog, bizno, target, note);
			break;
	}
	SPI_finish();

	PG_RETURN_DATUM(PayStatusGetDatum(catalog, target));
}

/*
 * pay_reset(bizno text, note text) returns pay_status
 */
static Datum
ResetPayment(FunctionCallInfo fcinfo, PayApi api)
{
	Datum		bizno = KeyArgument(fcinfo, 0);

	RequireArgument(fcinfo, 1, "note");
	return GuardedTransition(fcinfo, bizno, PAY_INIT,
							 BoundedTextArgument(fcinfo, 1, "note", PAY_NOTE_MAX_CHARS, api));
}

Datum
pay_reset(PG_FUNCTION_ARGS)
{
	return ResetPayment(fcinfo, PAY_API_1_2);
}

Datum
pay_reset_1_3(PG_FUNCTION_ARGS)
{
	return ResetPayment(fcinfo, PAY_API_1_3);
}

/*
 * pay_transition(bizno text, target pay_status, note text) returns pay_status
 */
static Datum
TransitionPayment(FunctionCallInfo fcinfo, PayApi api)
{
	Datum		bizno = KeyArgument(fcinfo, 0);

	RequireArgument(fcinfo, 1, "target");
	return GuardedTransition(fcinfo, bizno,
							 PayStatusFromLabel(PayCatalogGet(fcinfo), PG_GETARG_OID(1)),
							 BoundedTextArgument(fcinfo, 2, "note", PAY_NOTE_MAX_CHARS, api));
}

Datum
pay_transition(PG_FUNCTION_ARGS)
{
	return TransitionPayment(fcinfo, PAY_API_1_2);
}

Datum
pay_transition_1_3(PG_FUNCTION_ARGS)
{
	return TransitionPayment(fcinfo, PAY_API_1_3);
}

/*
 * The bizNo of business action (prefix, biz_id): the recorded one (its
 * amount replaced while INIT or FAILED), or a new one recorded as INIT.
 * Call it inside SPI; the bizNo is in the caller's memory.
 */
static Datum
OpenOrder(FunctionCallInfo fcinfo, const PayCatalog *catalog, PaymentAmount *amount,
		  PayApi api)
{
	text	   *prefix;
	text	   *biz_id;
	Datum		order[2];
	Datum		bizno;
	LedgerRow	row;
	char		buf[BIZNO_MAX_LEN + 1];
	LedgerPlan	insert = PLAN_INSERT;

	RequireArgument(fcinfo, 0, "prefix");
	RequireArgument(fcinfo, 1, "biz_id");
	RequireArgument(fcinfo, 2, "amount");
	if (api >= PAY_API_1_3)
		RequireArgument(fcinfo, 3, "currency");
	prefix = PG_GETARG_TEXT_PP(0);
	biz_id = PG_GETARG_TEXT_PP(1);
	BiznoCheckParts(prefix, biz_id);
	*amount = AmountArguments(fcinfo, 2, 3, api);
	order[0] = PointerGetDatum(prefix);
	order[1] = PointerGetDatum(biz_id);

	for (;;)
	{
		CHECK_FOR_INTERRUPTS();
		if (ReadRow(catalog, PLAN_FIND_ORDER, order, &row))
		{
			bizno = SPI_datumTransfer(row.bizno, false, -1);
			if (AmountDiffers(&row, amount))
			{
				if (!LockRow(catalog, bizno, &row))
					continue;	/* deleted meanwhile */
				ApplyAmount(catalog, bizno, &row, amount, api);
			}
			return bizno;
		}
		bizno = PointerGetDatum(cstring_to_text_with_len(buf,
														 BiznoGenerate(buf, VARDATA_ANY(prefix),
																	   VARSIZE_ANY_EXHDR(prefix),
																	   VARDATA_ANY(biz_id),
																	   VARSIZE_ANY_EXHDR(biz_id))));
		if (InsertRow(fcinfo, catalog, insert, bizno, PAY_INIT, amount))
			return SPI_datumTransfer(bizno, false, -1);
		if (insert == PLAN_INSERT_STRICT)
			RequireRowWritten(0, bizno);	/* a trigger skipped it, twice */

		/*
		 * A unique key refused the new row: the business action was
		 * recorded meanwhile, which the next pass finds, or a unique index
		 * of the DBA's refuses it, which the next pass lets PostgreSQL
		 * name by inserting without ON CONFLICT.
		 */
		insert = PLAN_INSERT_STRICT;
	}
}

/*
 * pay_open(prefix text, biz_id text, amount numeric, currency text)
 * returns text: the bizNo of this business action, recorded as INIT.
 */
static Datum
OpenPayment(FunctionCallInfo fcinfo, PayApi api)
{
	const PayCatalog *catalog = PayCatalogGetTables(fcinfo);
	PaymentAmount amount;
	Datum		bizno;

	SPI_connect();
	bizno = OpenOrder(fcinfo, catalog, &amount, api);
	SPI_finish();

	PG_RETURN_DATUM(bizno);
}

Datum
pay_open(PG_FUNCTION_ARGS)
{
	return OpenPayment(fcinfo, PAY_API_1_2);
}

Datum
pay_open_1_3(PG_FUNCTION_ARGS)
{
	return OpenPayment(fcinfo, PAY_API_1_3);
}

/*
 * pay_open_claim(prefix text, biz_id text, amount numeric, currency text,
 *				  OUT bizno, OUT action, OUT attempt, OUT status,
 *				  OUT channel_ref, OUT response) returns record
 *
 * pay_open and pay_claim in one call: the common case of an application
 * that knows its order and wants to charge it.
 */
static Datum
OpenClaimPayment(FunctionCallInfo fcinfo, PayApi api)
{
	const PayCatalog *catalog = PayCatalogGetTables(fcinfo);
	PaymentAmount amount;
	PayAction	action;
	LedgerRow	row;
	Datum		bizno;
	Datum		result;

	SPI_connect();
	bizno = OpenOrder(fcinfo, catalog, &amount, api);
	action = Claim(fcinfo, catalog, bizno, &amount, api, &row);
	result = SPI_datumTransfer(ClaimResult(fcinfo, catalog, bizno, action, &row), false, -1);
	SPI_finish();

	PayStatsCountAnswer(action);
	PG_RETURN_DATUM(result);
}

Datum
pay_open_claim(PG_FUNCTION_ARGS)
{
	return OpenClaimPayment(fcinfo, PAY_API_1_2);
}

Datum
pay_open_claim_1_3(PG_FUNCTION_ARGS)
{
	return OpenClaimPayment(fcinfo, PAY_API_1_3);
}

/*
 * The bizNo of a new refund of parent: issued for the parent's business
 * action (prefix, biz_id), so that it reads as that order's and a router
 * hashing (prefix, biz_id) sends it where the parent is; for a parent keyed
 * by another system, under prefix REFUND with as much of the parent's key
 * as a biz_id holds.
 */
static Datum
NewRefundKey(Datum parent, bool order_null, Datum prefix, Datum biz_id)
{
	char		buf[BIZNO_MAX_LEN + 1];
	const char *prefix_chars = "REFUND";
	size_t		prefix_len = strlen(prefix_chars);
	text	   *parent_key = DatumGetTextPP(parent);
	const char *biz_id_chars = VARDATA_ANY(parent_key);
	size_t		biz_id_len = Min(VARSIZE_ANY_EXHDR(parent_key), BIZNO_BIZ_ID_MAX_LEN);

	if (!order_null)
	{
		prefix_chars = VARDATA_ANY(DatumGetTextPP(prefix));
		prefix_len = VARSIZE_ANY_EXHDR(DatumGetTextPP(prefix));
		biz_id_chars = VARDATA_ANY(DatumGetTextPP(biz_id));
		biz_id_len = VARSIZE_ANY_EXHDR(DatumGetTextPP(biz_id));
	}
	return PointerGetDatum(cstring_to_text_with_len(buf,
													BiznoGenerate(buf, prefix_chars, prefix_len,
																  biz_id_chars, biz_id_len)));
}

/*
 * pay_refund_open(bizno text, refund_key text, amount numeric, reason text)
 * returns text: the bizNo of refund refund_key of payment bizno -- the
 * recorded one, or a new one recorded as INIT in the payment's currency.
 * The refund is then claimed, settled and reconciled as any payment; the
 * ledger's trigger holds it to the rules of refunds (refund.c) on every
 * write, this one included.
 */
static Datum
OpenRefund(FunctionCallInfo fcinfo, PayApi api)
{
	const PayCatalog *catalog = PayCatalogGetTables(fcinfo);
	Datum		parent = KeyArgument(fcinfo, 0);
	BiznoParts	parts;
	PaymentAmount amount = {0};
	Datum		refund_key;
	Datum		key[2];
	const char *reason;
	const char *note;
	LedgerPlan	insert = PLAN_INSERT_REFUND;

	RequireArgument(fcinfo, 1, "refund_key");
	BiznoCheckKey(PG_GETARG_TEXT_PP(1), &parts);
	refund_key = PointerGetDatum(PG_GETARG_TEXT_PP(1));
	RequireArgument(fcinfo, 2, "amount");
	PayCheckAmount(PG_GETARG_NUMERIC(2));
	amount.has_amount = true;
	amount.amount = PG_GETARG_DATUM(2);
	reason = BoundedTextArgument(fcinfo, 3, "reason", PAY_NOTE_MAX_CHARS, api);
	note = psprintf("refund %s of payment %s%s%s", TextDatumGetCString(refund_key),
					TextDatumGetCString(parent), reason ? ": " : "", reason ? reason : "");
	key[0] = parent;
	key[1] = refund_key;

	SPI_connect();
	PreparePlans(catalog);
	if (plans[PLAN_FIND_REFUND] == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("pay_ledger has no columns parent and refund_key"),
				 errhint("ALTER EXTENSION idempotent_pay UPDATE adds them.")));
	for (;;)
	{
		LedgerRow	refund;
		HeapTuple	tuple;
		TupleDesc	tupdesc;
		Datum		bizno;
		Datum		args[7];
		char		nulls[7] = {' ', ' ', ' ', ' ', ' ', ' ', ' '};
		bool		currency_null;
		bool		prefix_null;
		bool		biz_id_null;
		Datum		prefix;
		Datum		biz_id;

		CHECK_FOR_INTERRUPTS();
		if (ReadRow(catalog, PLAN_FIND_REFUND, key, &refund))
		{
			bizno = SPI_datumTransfer(refund.bizno, false, -1);
			if (AmountDiffers(&refund, &amount))
				ereport(ERROR,
						(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
						 errmsg("refund %s of payment %s was opened for another amount",
								TextDatumGetCString(refund_key), TextDatumGetCString(parent)),
						 errdetail("Recorded: %s; requested: %s.",
								   AmountText(refund.amount_null, refund.amount,
											  refund.currency_null, refund.currency),
								   AmountText(false, amount.amount, refund.currency_null,
											  refund.currency)),
						 errhint("A refund key names one refund of one amount: retry with its amount, or refund the rest under another refund key."),
						 err_generic_string(PG_DIAG_CONSTRAINT_NAME, "pay_amount_frozen")));
			SPI_finish();
			PG_RETURN_DATUM(bizno);
		}

		if (RunPlan(catalog, PLAN_READ_PARENT, &parent, NULL) == 0)
			RaiseUnknownPayment(parent);
		tuple = SPI_tuptable->vals[0];
		tupdesc = SPI_tuptable->tupdesc;
		prefix = SPI_getbinval(tuple, tupdesc, 2, &prefix_null);
		biz_id = SPI_getbinval(tuple, tupdesc, 3, &biz_id_null);
		bizno = NewRefundKey(parent, prefix_null || biz_id_null, prefix, biz_id);
		args[0] = bizno;
		args[1] = PayStatusGetDatum(catalog, PAY_INIT);
		args[2] = amount.amount;
		args[3] = SPI_getbinval(tuple, tupdesc, 1, &currency_null);
		nulls[3] = currency_null ? 'n' : ' ';
		args[4] = parent;
		args[5] = refund_key;
		args[6] = CStringGetTextDatum(note);
		if (RunPlan(catalog, insert, args, nulls) == 1)
		{
			bizno = SPI_datumTransfer(bizno, false, -1);
			SPI_finish();
			PG_RETURN_DATUM(bizno);
		}
		if (insert == PLAN_INSERT_REFUND_STRICT)
			RequireRowWritten(0, bizno);	/* a trigger skipped it, twice */

		/*
		 * A unique key refused the new row: the refund was opened meanwhile,
		 * which the next pass finds, or a unique index of the DBA's refuses
		 * it, which the next pass lets PostgreSQL name.
		 */
		insert = PLAN_INSERT_REFUND_STRICT;
	}
}

Datum
pay_refund_open(PG_FUNCTION_ARGS)
{
	return OpenRefund(fcinfo, PAY_API_1_2);
}

Datum
pay_refund_open_1_3(PG_FUNCTION_ARGS)
{
	return OpenRefund(fcinfo, PAY_API_1_3);
}
