/*-------------------------------------------------------------------------
 *
 * machine.c
 *	  The one table of legal payment transitions (SPEC section 4).
 *
 * Every path that changes a payment status asks PayTransitionVerdict: the
 * SQL API (ledger.c), the guard trigger on the ledger and on user tables
 * (guard.c), and pay_allowed.  The reasons for refusals live beside the
 * table, so an error always says why.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/rel.h"

#include "catalog.h"
#include "machine.h"

#define L	PAY_LEGAL
#define N	PAY_NO_OP
#define X	PAY_ILLEGAL

/* verdicts[from][to]; the last row is a row that does not exist yet */
static const PayVerdict verdicts[PAY_STATUS_COUNT + 1][PAY_STATUS_COUNT] = {
	/* to:			 INIT PROCESSING SUCCESS FAILED */
	/* INIT */		 {N, L, X, X},
	/* PROCESSING */ {X, X, L, L},
	/* SUCCESS */	 {X, X, N, X},
	/* FAILED */	 {L, X, X, N},
	/* new row */	 {L, L, X, X},
};

#undef L
#undef N
#undef X

static const char *const status_names[PAY_STATUS_COUNT] = {
	"INIT", "PROCESSING", "SUCCESS", "FAILED"
};

PG_FUNCTION_INFO_V1(pay_allowed);

const char *
PayStatusName(PayStatus status)
{
	return status_names[status];
}

/*
 * The state whose label is the len bytes at label (not NUL-terminated, as
 * in a text datum); false when it is no label of pay_status.
 */
bool
PayStatusFromText(const char *label, size_t len, PayStatus *status)
{
	for (int s = 0; s < PAY_STATUS_COUNT; s++)
	{
		if (strlen(status_names[s]) == len && memcmp(label, status_names[s], len) == 0)
		{
			*status = (PayStatus) s;
			return true;
		}
	}
	return false;
}

/*
 * The verdict on moving from (a PayStatus, or PAY_NEW_ROW) to to.
 */
PayVerdict
PayTransitionVerdict(int from, PayStatus to)
{
	return verdicts[from][to];
}

/*
 * Why the machine refuses from -> to.
 */
const char *
PayTransitionReason(int from, PayStatus to)
{
	switch (from)
	{
		case PAY_NEW_ROW:
			return "a payment starts in INIT or PROCESSING";
		case PAY_INIT:
			return "a payment settles only from PROCESSING";
		case PAY_PROCESSING:
			if (to == PAY_PROCESSING)
				return "entering PROCESSING again would charge twice";
			return "a payment in flight settles as SUCCESS or FAILED, and only FAILED may be reset";
		case PAY_SUCCESS:
			return "SUCCESS is final";
		case PAY_FAILED:
			if (to == PAY_PROCESSING)
				return "a failed payment is reset to INIT before it is retried";
			return "a failed payment cannot succeed; reset it and pay again";
	}
	return "it is not a transition of the payment state machine";
}

/*
 * Raise 23514 pay_status_transition for from -> to on the row described by
 * key (e.g. "bizNo PAY-..." or "(id)=(42)").  rel may be NULL when no table
 * is at hand (the API refuses before it writes).
 */
void
PayRaiseIllegalTransition(Relation rel, const char *key, int from, PayStatus to)
{
	const char *from_name = from == PAY_NEW_ROW ? "(new row)" : status_names[from];

	ereport(ERROR,
			(errcode(ERRCODE_CHECK_VIOLATION),
			 errmsg("illegal payment status transition from %s to %s",
					from_name, status_names[to]),
			 errdetail("%s: %s -> %s is refused because %s.",
					   key, from_name, status_names[to],
					   PayTransitionReason(from, to)),
			 rel ? errtable(rel) : 0,
			 err_generic_string(PG_DIAG_CONSTRAINT_NAME, "pay_status_transition")));
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
