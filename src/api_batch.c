/*-------------------------------------------------------------------------
 *
 * api_batch.c
 *	  Batches: pay_open_claim_many and pay_settle_many, a thousand claims or
 *	  settlements in one call, each answered as its single call answers.
 *
 * Each input goes through the single call's own code (PayOpenClaimRow,
 * PaySettleRow), in the batch's one transaction, sorted by key (biz_id,
 * bizNo) and in input order within a key: the same key twice answers as
 * two calls in that order would, inputs of different keys do not depend
 * on each other, and two batches over overlapping keys take their locks
 * in the same order -- one waits for the other rather than deadlock.  An
 * input the single call refuses answers its refusal -- SQLSTATE and
 * constraint name -- instead of aborting the batch, and leaves nothing
 * written, as the refused call does.
 *
 * That takes error isolation, a subtransaction, which the single call's
 * refusals, raised anywhere in its code and its triggers, need.  One per
 * input would be costly: a thousand subtransaction XIDs, of which a
 * backend's PGPROC caches only 64 (PGPROC_MAX_CACHED_SUBXIDS) -- beyond
 * them every other session's snapshot is suboverflowed while the batch
 * runs, and its visibility checks look XIDs up in pg_subtrans.  So:
 *
 * - The inputs run in segments (RunBatch): one subtransaction runs every
 *   input not refused yet, in run order, from the first not yet answered
 *   to the end.  When an input is refused, the segment is rolled back, the
 *   refusal recorded, and the inputs of the segment before it run again,
 *   in a segment that ends just before it; the next starts just after it.
 *   A batch nobody refuses is one subtransaction, one XID, no input run
 *   twice; each refusal costs the inputs since the previous one once more
 *   (the batch once more at most, in all), and one more committed
 *   subtransaction when inputs before it wrote -- none when it is the
 *   first of its segment.
 * - At the first refusal, the arguments of every input after it are held
 *   to the single call's rules (PayOpenArguments, PaySettleCheckArguments),
 *   which it applies before it reads anything: a NULL, a malformed key, a
 *   bad amount or reference is refused whatever the ledger holds, and is
 *   recorded then, so that it costs no rerun.  These checks write nothing,
 *   so their subtransactions get no XID; a batch nobody refuses runs them
 *   once, in its calls.  Only batches with more than 64 refusals of the
 *   ledger's state (a frozen amount, an archived payment, a stale
 *   attempt), each after a write, overflow the cache.
 *
 * doc/internals.md has the measurements.
 *
 * What is rolled back is run again, not replayed: an input run again reads
 * the ledger as it stands then.  An input another session's commit made
 * refused while its segment ran again is recorded as refused, and the
 * input that caused the rerun runs again after it, so that every answer is
 * one of the ledger its input met.  A WARNING an input sent (a second
 * charge's) is sent again when the input runs again.
 *
 * Errors that are no answer to an input -- a cancel, a timeout, a
 * deadlock, a serialization failure, memory or disk exhausted, an internal
 * error -- abort the whole call, as they abort the single one.
 *
 * The whole call is refused (nothing is run) for: claims inside a
 * transaction block (25001, before the arguments are read, as for
 * pay_open_claim), a NULL array or scalar argument (22004), arrays of
 * unequal lengths or of more than one dimension (22023).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/resowner.h"

#include "api.h"
#include "api_batch.h"
#include "catalog.h"
#include "compat.h"
#include "stats.h"
#include "write.h"

PG_FUNCTION_INFO_V1(pay_open_claim_many);
PG_FUNCTION_INFO_V1(pay_settle_many);

/* One array argument of a batch, deconstructed. */
typedef struct BatchArray
{
	const char *name;
	Datum	   *values;
	bool	   *nulls;
	int			n;
} BatchArray;

/* The refusal an input answers; sqlerrcode 0 while it has none. */
typedef struct BatchRefusal
{
	int			sqlerrcode;
	char	   *constraint_name;
} BatchRefusal;

/* Run input i of a batch and keep its answer; refuse by raising an ERROR. */
typedef void (*BatchInputFunction) (void *batch, int i);

/* A required scalar argument of the whole call: 22004 when NULL. */
static void
RequireBatchArgument(FunctionCallInfo fcinfo, int argno, const char *name)
{
	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be null", name),
				 errhint("Pass a value for %s: it applies to every input of the batch.", name)));
}

/* Array argument argno, one-dimensional and not NULL (an element may be). */
static BatchArray
ArrayArgument(FunctionCallInfo fcinfo, int argno, const char *name)
{
	BatchArray	result = {.name = name};
	ArrayType  *array;
	int16		typlen;
	bool		typbyval;
	char		typalign;

	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be null", name),
				 errhint("Pass an array, empty for no inputs.")));
	array = PG_GETARG_ARRAYTYPE_P(argno);
	if (ARR_NDIM(array) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must have one dimension, not %d", name, ARR_NDIM(array)),
				 errhint("Pass one element per input.")));
	get_typlenbyvalalign(ARR_ELEMTYPE(array), &typlen, &typbyval, &typalign);
	deconstruct_array(array, ARR_ELEMTYPE(array), typlen, typbyval, typalign,
					  &result.values, &result.nulls, &result.n);
	return result;
}

/* 22023 unless array has as many elements as first. */
static void
RequireSameLength(const BatchArray *first, const BatchArray *array)
{
	if (array->n != first->n)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s and %s differ in length", first->name, array->name),
				 errdetail("The arrays of a batch hold one element per input, in the same order: %s has %d, %s %d.",
						   first->name, first->n, array->name, array->n),
				 errhint("Pass arrays of equal lengths.")));
}

/*
 * Whether an error raised by an input is its answer: a refusal of the
 * single call, or any error of the input's own writes (a DBA's unique
 * index or trigger).  What would abort any statement at that moment -- a
 * cancel or timeout, a deadlock, a serialization failure, a lock not
 * available, resources exhausted, an internal error -- aborts the batch.
 */
static bool
IsInputAnswer(int sqlerrcode)
{
	switch (ERRCODE_TO_CATEGORY(sqlerrcode))
	{
		case ERRCODE_TO_CATEGORY(ERRCODE_TRANSACTION_ROLLBACK):
		case ERRCODE_TO_CATEGORY(ERRCODE_INSUFFICIENT_RESOURCES):
		case ERRCODE_TO_CATEGORY(ERRCODE_PROGRAM_LIMIT_EXCEEDED):
		case ERRCODE_TO_CATEGORY(ERRCODE_OPERATOR_INTERVENTION):
		case ERRCODE_TO_CATEGORY(ERRCODE_SYSTEM_ERROR):
		case ERRCODE_TO_CATEGORY(ERRCODE_INTERNAL_ERROR):
			return false;
		default:
			return sqlerrcode != ERRCODE_LOCK_NOT_AVAILABLE;
	}
}

/* qsort_arg's order of input indexes: by key, bytewise, NULL first; stable */
static int
CompareKeys(const void *a, const void *b, void *arg)
{
	const BatchArray *keys = arg;
	int			i = *(const int *) a;
	int			j = *(const int *) b;
	int			result;

	if (keys->nulls[i] || keys->nulls[j])
		result = (int) keys->nulls[j] - (int) keys->nulls[i];
	else
	{
		text	   *x = DatumGetTextPP(keys->values[i]);
		text	   *y = DatumGetTextPP(keys->values[j]);
		int			xlen = VARSIZE_ANY_EXHDR(x);
		int			ylen = VARSIZE_ANY_EXHDR(y);

		result = memcmp(VARDATA_ANY(x), VARDATA_ANY(y), Min(xlen, ylen));
		if (result == 0)
			result = (xlen > ylen) - (xlen < ylen);
	}
	return result != 0 ? result : (i > j) - (i < j);
}

/*
 * The order the inputs run in: sorted by key, inputs of one key in input
 * order.  Inputs of different keys do not depend on each other, so the
 * answers are those of input order; and two batches over overlapping keys
 * lock them in the same order, so they wait for each other instead of
 * deadlocking.
 */
static int *
RunOrder(const BatchArray *keys)
{
	int		   *order = palloc(sizeof(int) * Max(keys->n, 1));

	for (int i = 0; i < keys->n; i++)
		order[i] = i;
	qsort_arg(order, keys->n, sizeof(int), CompareKeys, (void *) keys);
	return order;
}

/*
 * Run the inputs of a batch not refused yet, order[0] first, in segments of
 * that order (the header explains them), each in a memory context reset
 * for every input; a refused input's refusal goes to refusals[input].
 * run_input is the inputs' checks or their calls; a call connects to SPI
 * and finishes, as the single call does, so that no input's SPI memory
 * outlives it.  check_input, when not NULL, is the inputs' checks, run on
 * the inputs after the first refused.  The direct writes of a segment
 * share their executor state (PayWriteSegmentBegin).
 */
static void
RunBatch(int n, const int *order, BatchInputFunction run_input,
		 BatchInputFunction check_input, void *batch, BatchRefusal *refusals)
{
	MemoryContext outer = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	MemoryContext input_context = AllocSetContextCreate(outer, "pay batch input",
														ALLOCSET_DEFAULT_SIZES);
	int			start = 0;
	int			stop = n;		/* refusals[order[stop]] is set when stop < n */
	volatile bool checked = false;	/* check_input has run */

	while (start < n)
	{
		volatile int i = start;
		ErrorData  *volatile edata = NULL;
		volatile bool shares = false;	/* the segment's writes share their set-up */

		if (stop <= start)
			stop = n;			/* the rerun is done */
		if (refusals[order[start]].sqlerrcode != 0)
		{
			start++;
			continue;
		}

		BeginInternalSubTransaction(NULL);
		MemoryContextSwitchTo(outer);
		PG_TRY();
		{
			shares = PayWriteSegmentBegin();
			for (; i < stop; i++)
			{
				if (refusals[order[i]].sqlerrcode != 0)
					continue;
				CHECK_FOR_INTERRUPTS();
				MemoryContextReset(input_context);
				MemoryContextSwitchTo(input_context);
				run_input(batch, order[i]);
				MemoryContextSwitchTo(outer);
			}
			if (shares)
				PayWriteSegmentEnd();
			ReleaseCurrentSubTransaction();
		}
		PG_CATCH();
		{
			MemoryContextSwitchTo(outer);
			if (shares)
				PayWriteSegmentAbandon();
			edata = CopyErrorData();
			FlushErrorState();
			RollbackAndReleaseCurrentSubTransaction();
		}
		PG_END_TRY();
		MemoryContextSwitchTo(outer);
		CurrentResourceOwner = owner;

		if (edata == NULL)
		{
			start = stop;
			stop = n;
			continue;
		}
		if (!IsInputAnswer(edata->sqlerrcode))
			ReThrowError(edata);
		/* a rerun was refused midway: the input that caused it runs again */
		if (stop < n)
			refusals[order[stop]] = (BatchRefusal) {0};
		refusals[order[i]].sqlerrcode = edata->sqlerrcode;
		/* kept with the answers */
		refusals[order[i]].constraint_name = edata->constraint_name == NULL ? NULL :
			MemoryContextStrdup(GetMemoryChunkContext(refusals), edata->constraint_name);
		stop = i;
		/* the first refusal: the arguments of the inputs after it, checked */
		if (check_input != NULL && !checked)
		{
			RunBatch(n - (i + 1), order + i + 1, check_input, NULL, batch, refusals);
			checked = true;
		}
	}
	MemoryContextDelete(input_context);
}

/* The SQLSTATE and constraint name columns of an input's answer. */
static void
RefusalColumns(const BatchRefusal *refusal, Datum *values, bool *nulls)
{
	nulls[0] = refusal->sqlerrcode == 0;
	if (!nulls[0])
		values[0] = CStringGetTextDatum(unpack_sql_state(refusal->sqlerrcode));
	nulls[1] = refusal->constraint_name == NULL;
	if (!nulls[1])
		values[1] = CStringGetTextDatum(refusal->constraint_name);
}

typedef struct OpenClaimBatch
{
	FunctionCallInfo fcinfo;	/* the batch's call */
	const PayCatalog *catalog;
	BatchArray	biz_ids;
	BatchArray	amounts;
	MemoryContext answers;		/* where the answers are kept */
	PayAction  *actions;
	Datum	   *biznos;
	int32	   *attempts;
} OpenClaimBatch;

/* pay_open_claim's call for input i of pay_open_claim_many, in input */
static void
OpenClaimCall(const OpenClaimBatch *batch, int i, FunctionCallInfo input)
{
	FunctionCallInfo fcinfo = batch->fcinfo;

	InitFunctionCallInfoData(*input, fcinfo->flinfo, 4, fcinfo->fncollation, NULL, NULL);
	input->args[0] = fcinfo->args[0];
	input->args[1].value = batch->biz_ids.values[i];
	input->args[1].isnull = batch->biz_ids.nulls[i];
	input->args[2].value = batch->amounts.values[i];
	input->args[2].isnull = batch->amounts.nulls[i];
	input->args[3] = fcinfo->args[3];
}

/* Input i's arguments, held to pay_open_claim's rules. */
static void
OpenClaimCheck(void *arg, int i)
{
	LOCAL_FCINFO(input, 4);

	OpenClaimCall(arg, i, input);
	(void) PayOpenArguments(input, PAY_API_1_4);
}

/* Input i of pay_open_claim_many: pay_open_claim's claim. */
static void
OpenClaimInput(void *arg, int i)
{
	OpenClaimBatch *batch = arg;
	LOCAL_FCINFO(input, 4);
	LedgerRow	row;

	Datum		bizno;
	MemoryContext input_context;

	OpenClaimCall(batch, i, input);
	SPI_connect();
	batch->actions[i] = PayOpenClaimRow(input, batch->catalog, PAY_API_1_4, &bizno, &row);
	batch->attempts[i] = row.attempt;
	SPI_finish();
	input_context = MemoryContextSwitchTo(batch->answers);
	batch->biznos[i] = datumCopy(bizno, false, -1);
	MemoryContextSwitchTo(input_context);
}

/*
 * pay_open_claim_many(prefix text, biz_ids text[], amounts numeric[],
 *					   currency text)
 * returns table (biz_id text, bizno text, action pay_action,
 *				  attempt integer, sqlstate text, constraint_name text)
 *
 * pay_open_claim(prefix, biz_ids[i], amounts[i], currency) for each i in
 * order: its bizNo, action and attempt, or its refusal.
 */
Datum
pay_open_claim_many(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	OpenClaimBatch batch = {.fcinfo = fcinfo, .answers = CurrentMemoryContext};
	BatchRefusal *refusals;
	int		   *order;
	int			n;

	PayRefuseClaimInTransaction("pay_open_claim_many");
	RequireBatchArgument(fcinfo, 0, "prefix");
	batch.biz_ids = ArrayArgument(fcinfo, 1, "biz_ids");
	batch.amounts = ArrayArgument(fcinfo, 2, "amounts");
	RequireBatchArgument(fcinfo, 3, "currency");
	RequireSameLength(&batch.biz_ids, &batch.amounts);
	n = batch.biz_ids.n;
	batch.catalog = PayCatalogGetTables(fcinfo);
	InitMaterializedSRF(fcinfo, 0);

	batch.actions = palloc(sizeof(PayAction) * Max(n, 1));
	batch.biznos = palloc(sizeof(Datum) * Max(n, 1));
	batch.attempts = palloc(sizeof(int32) * Max(n, 1));
	refusals = palloc0(sizeof(BatchRefusal) * Max(n, 1));

	order = RunOrder(&batch.biz_ids);
	RunBatch(n, order, OpenClaimInput, OpenClaimCheck, &batch, refusals);

	for (int i = 0; i < n; i++)
	{
		Datum		values[6];
		bool		nulls[6] = {false, false, false, false, false, false};
		bool		refused = refusals[i].sqlerrcode != 0;

		values[0] = batch.biz_ids.values[i];
		nulls[0] = batch.biz_ids.nulls[i];
		nulls[1] = nulls[2] = nulls[3] = refused;
		if (!refused)
		{
			values[1] = batch.biznos[i];
			values[2] = PayActionGetDatum(batch.catalog, batch.actions[i]);
			values[3] = Int32GetDatum(batch.attempts[i]);
			PayStatsCountAnswer(batch.actions[i]);
		}
		RefusalColumns(&refusals[i], &values[4], &nulls[4]);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

/* What a settlement of pay_settle_many answers. */
typedef enum SettleResult
{
	SETTLE_SUCCESS,
	SETTLE_SECOND_CHARGE,
	SETTLE_FAILED
} SettleResult;

static const char *const settle_results[] = {
	[SETTLE_SUCCESS] = "SUCCESS",
	[SETTLE_SECOND_CHARGE] = "SECOND_CHARGE",
	[SETTLE_FAILED] = "FAILED",
};

typedef struct SettleBatch
{
	FunctionCallInfo fcinfo;
	const PayCatalog *catalog;
	BatchArray	biznos;
	BatchArray	attempts;
	BatchArray	outcomes;
	BatchArray	channel_refs;
	BatchArray	reasons;
	SettleResult *results;
} SettleBatch;

/*
 * The call for input i of pay_settle_many, in input: pay_succeed(biznos[i],
 * channel_refs[i], attempts[i]) when its outcome is SUCCESS, pay_fail(
 * biznos[i], reasons[i], attempts[i]) when it is FAILED; the outcome is
 * read first, as it names the call.  Returns the outcome.
 */
static PayStatus
SettleCall(const SettleBatch *batch, int i, FunctionCallInfo input)
{
	FunctionCallInfo fcinfo = batch->fcinfo;
	PayStatus	outcome;

	if (batch->outcomes.nulls[i])
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("outcome must not be null"),
				 errhint("Pass SUCCESS to settle the input as pay_succeed does, FAILED as pay_fail does.")));
	outcome = PayStatusFromLabel(batch->catalog, DatumGetObjectId(batch->outcomes.values[i]));
	if (outcome != PAY_SUCCESS && outcome != PAY_FAILED)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("outcome %s is no settlement", PayStatusName(outcome)),
				 errhint("Pass SUCCESS to settle the input as pay_succeed does, FAILED as pay_fail does.")));

	InitFunctionCallInfoData(*input, fcinfo->flinfo, outcome == PAY_SUCCESS ? 4 : 3,
							 fcinfo->fncollation, NULL, NULL);
	input->args[0].value = batch->biznos.values[i];
	input->args[0].isnull = batch->biznos.nulls[i];
	if (outcome == PAY_SUCCESS)
	{
		input->args[1].value = batch->channel_refs.values[i];
		input->args[1].isnull = batch->channel_refs.nulls[i];
	}
	else
	{
		input->args[1].value = batch->reasons.values[i];
		input->args[1].isnull = batch->reasons.nulls[i];
	}
	input->args[2].value = batch->attempts.values[i];
	input->args[2].isnull = batch->attempts.nulls[i];
	input->args[3].value = (Datum) 0;	/* no response: pay_succeed's default */
	input->args[3].isnull = true;
	return outcome;
}

/* Input i's outcome and arguments, held to the rules of its call. */
static void
SettleCheck(void *arg, int i)
{
	LOCAL_FCINFO(input, 4);
	PayStatus	outcome = SettleCall(arg, i, input);

	PaySettleCheckArguments(input, outcome, PAY_API_1_4);
}

/* Input i of pay_settle_many, settled as its call settles it. */
static void
SettleInput(void *arg, int i)
{
	SettleBatch *batch = arg;
	LOCAL_FCINFO(input, 4);
	PayStatus	outcome = SettleCall(batch, i, input);
	bool		second_charge;

	SPI_connect();
	second_charge = PaySettleRow(input, batch->catalog, outcome, PAY_API_1_4);
	SPI_finish();
	batch->results[i] = outcome == PAY_FAILED ? SETTLE_FAILED :
		second_charge ? SETTLE_SECOND_CHARGE : SETTLE_SUCCESS;
}

/*
 * pay_settle_many(biznos text[], attempts bigint[], outcomes pay_status[],
 *				   channel_refs text[], reasons text[])
 * returns table (bizno text, result text, sqlstate text,
 *				  constraint_name text)
 *
 * Each input settled as pay_succeed or pay_fail settles it, in order: its
 * result (SUCCESS, SECOND_CHARGE, FAILED), or its refusal.
 */
Datum
pay_settle_many(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	SettleBatch batch = {.fcinfo = fcinfo};
	BatchRefusal *refusals;
	int		   *order;
	int			n;

	batch.biznos = ArrayArgument(fcinfo, 0, "biznos");
	batch.attempts = ArrayArgument(fcinfo, 1, "attempts");
	batch.outcomes = ArrayArgument(fcinfo, 2, "outcomes");
	batch.channel_refs = ArrayArgument(fcinfo, 3, "channel_refs");
	batch.reasons = ArrayArgument(fcinfo, 4, "reasons");
	RequireSameLength(&batch.biznos, &batch.attempts);
	RequireSameLength(&batch.biznos, &batch.outcomes);
	RequireSameLength(&batch.biznos, &batch.channel_refs);
	RequireSameLength(&batch.biznos, &batch.reasons);
	n = batch.biznos.n;
	batch.catalog = PayCatalogGetTables(fcinfo);
	InitMaterializedSRF(fcinfo, 0);

	batch.results = palloc(sizeof(SettleResult) * Max(n, 1));
	refusals = palloc0(sizeof(BatchRefusal) * Max(n, 1));

	order = RunOrder(&batch.biznos);
	RunBatch(n, order, SettleInput, SettleCheck, &batch, refusals);

	for (int i = 0; i < n; i++)
	{
		Datum		values[4];
		bool		nulls[4] = {false, false, false, false};
		bool		refused = refusals[i].sqlerrcode != 0;

		values[0] = batch.biznos.values[i];
		nulls[0] = batch.biznos.nulls[i];
		nulls[1] = refused;
		if (!refused)
			values[1] = CStringGetTextDatum(settle_results[batch.results[i]]);
		RefusalColumns(&refusals[i], &values[2], &nulls[2]);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}
