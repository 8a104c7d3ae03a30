/*-------------------------------------------------------------------------
 *
 * stats.c
 *	  What pay_stats reads besides its maintained counts: how often pay_begin
 *	  answered a retry with ALREADY_SUCCEEDED or IN_PROGRESS, and the two
 *	  questions about other transactions that folding the journal into the
 *	  counts asks.
 *
 * The answer counters live in shared memory, so they exist only when the
 * library is in shared_preload_libraries; otherwise pay_stats shows them as
 * NULL.  On the hot path a count is one atomic add.  They start at zero
 * with the server and with pay_stats_reset().
 *
 * The counts of payments by status are kept by pay_stats_refresh (the
 * install script), which folds the journal rows it has not counted yet into
 * pay_stats_counts; doc/internals.md explains why that is exact.  The
 * journal records no deletion, so the ledger's journal trigger records each
 * one in pay_stats_deletions (PayLedgerRecordDeletion, write.c), numbered
 * in the journal's sequence.  To know from which journal row on it must still
 * look, the fold notes the transactions running when it read the sequence
 * (pay_stats_running_transactions) and moves its start past that value once
 * they have all ended (pay_stats_transactions_ended): every row numbered
 * below it was written by one of them or by one that had ended already.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/ipc.h"
#include "storage/lock.h"
#include "storage/lwlock.h"
#include "storage/procarray.h"
#include "storage/shmem.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "compat.h"
#include "reason.h"
#include "settings.h"
#include "stats.h"

typedef struct PayCounters
{
	pg_atomic_uint64 already_succeeded;
	pg_atomic_uint64 in_progress;
	pg_atomic_uint64 reset_at;	/* a TimestampTz */
} PayCounters;

static PayCounters *counters = NULL;
static shmem_request_hook_type previous_shmem_request_hook = NULL;
static shmem_startup_hook_type previous_shmem_startup_hook = NULL;

PG_FUNCTION_INFO_V1(pay_stats_counters);
PG_FUNCTION_INFO_V1(pay_stats_reset);
PG_FUNCTION_INFO_V1(pay_stats_running_transactions);
PG_FUNCTION_INFO_V1(pay_stats_transactions_ended);

static void
RequestCounters(void)
{
	if (previous_shmem_request_hook)
		previous_shmem_request_hook();
	RequestAddinShmemSpace(MAXALIGN(sizeof(PayCounters)));
}

static void
AttachCounters(void)
{
	bool		found;

	if (previous_shmem_startup_hook)
		previous_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	counters = ShmemInitStruct("idempotent_pay counters", sizeof(PayCounters), &found);
	if (!found)
	{
		pg_atomic_init_u64(&counters->already_succeeded, 0);
		pg_atomic_init_u64(&counters->in_progress, 0);
		pg_atomic_init_u64(&counters->reset_at, (uint64) GetCurrentTimestamp());
	}
	LWLockRelease(AddinShmemInitLock);
}

/*
 * From _PG_init: ask for the counters' shared memory when preloaded.
 */
void
PayStatsRequestShmem(void)
{
	if (!process_shared_preload_libraries_in_progress)
		return;
	previous_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = RequestCounters;
	previous_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = AttachCounters;
}

/*
 * Count a pay_begin answer that saved a second charge.
 */
void
PayStatsCountAnswer(PayAction action)
{
	if (counters == NULL)
		return;
	if (action == PAY_ALREADY_SUCCEEDED)
		pg_atomic_fetch_add_u64(&counters->already_succeeded, 1);
	else if (action == PAY_IN_PROGRESS)
		pg_atomic_fetch_add_u64(&counters->in_progress, 1);
}

/*
 * pay_stats_counters(OUT stuck_after interval, OUT already_succeeded bigint,
 *					  OUT in_progress bigint, OUT stats_reset timestamptz)
 */
Datum
pay_stats_counters(PG_FUNCTION_ARGS)
{
	TupleDesc	tupdesc;
	Datum		values[4];
	bool		nulls[4] = {false, false, false, false};
	Interval   *stuck_after = palloc0(sizeof(Interval));

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");

	stuck_after->time = (int64) pay_stuck_after_ms * 1000;
	values[0] = IntervalPGetDatum(stuck_after);
	if (counters != NULL)
	{
		values[1] = Int64GetDatum((int64) pg_atomic_read_u64(&counters->already_succeeded));
		values[2] = Int64GetDatum((int64) pg_atomic_read_u64(&counters->in_progress));
		values[3] = TimestampTzGetDatum((TimestampTz) pg_atomic_read_u64(&counters->reset_at));
	}
	else
		nulls[1] = nulls[2] = nulls[3] = true;

	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

/*
 * pay_stats_reset() returns void
 */
Datum
pay_stats_reset(PG_FUNCTION_ARGS)
{
	if (counters == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("idempotent_pay keeps no counters"),
				 errhint("Add idempotent_pay to shared_preload_libraries and restart.")));
	pg_atomic_write_u64(&counters->already_succeeded, 0);
	pg_atomic_write_u64(&counters->in_progress, 0);
	pg_atomic_write_u64(&counters->reset_at, (uint64) GetCurrentTimestamp());
	PG_RETURN_VOID();
}

/*
 * pay_stats_running_transactions() returns text[]: the virtual transaction
 * ids ("backend/local") of the transactions of this database running now,
 * this one excepted -- prepared ones included, vacuum's not.
 */
Datum
pay_stats_running_transactions(PG_FUNCTION_ARGS)
{
	int			count;
	VirtualTransactionId *vxids = GetCurrentVirtualXIDs(InvalidTransactionId, false, false,
														PROC_IS_AUTOVACUUM | PROC_IN_VACUUM,
														&count);
	Datum	   *elems = palloc(sizeof(Datum) * Max(count, 1));

	for (int i = 0; i < count; i++)
		elems[i] = CStringGetTextDatum(psprintf("%d/%u", (int) PayVxidBackend(vxids[i]),
												vxids[i].localTransactionId));
	PG_RETURN_ARRAYTYPE_P(construct_array(elems, count, TEXTOID, -1, false, TYPALIGN_INT));
}

/*
 * pay_stats_transactions_ended(vxids text[]) returns boolean: whether every
 * transaction pay_stats_running_transactions listed has ended.  It waits
 * for none of them.
 */
Datum
pay_stats_transactions_ended(PG_FUNCTION_ARGS)
{
	ArrayType  *array = PG_GETARG_ARRAYTYPE_P(0);
	Datum	   *elems;
	bool	   *nulls;
	int			count;

	deconstruct_array(array, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &count);
	for (int i = 0; i < count; i++)
	{
		VirtualTransactionId vxid;
		int			backend;
		char		tail;

		if (nulls[i] ||
			sscanf(TextDatumGetCString(elems[i]), "%d/%u%c", &backend,
				   &vxid.localTransactionId, &tail) != 2)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("\"%s\" is not a virtual transaction id",
							nulls[i] ? "NULL" : PayQuoteTextDatum(elems[i]))));
		PayVxidSetBackend(vxid, backend);
		if (!VirtualXactLock(vxid, false))
			PG_RETURN_BOOL(false);
	}
	PG_RETURN_BOOL(true);
}
