/*-------------------------------------------------------------------------
 *
 * api.h
 *	  The payment API's SQL entry points (api_claim.c, api_settle.c,
 *	  api_refund.c), and the versions of its rules.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PAY_API_H
#define PAY_API_H

#include "postgres.h"

#include "fmgr.h"

#include "card.h"
#include "catalog.h"

/*
 * The rules a version's SQL promised its callers; later versions keep the
 * earlier ones' rules and add their own.  Each version's SQL binds entry
 * points of its own where the rules changed, as pg_stat_statements does,
 * so an installed 1.2 keeps 1.2's rules until ALTER EXTENSION UPDATE.
 */
typedef enum PayApi
{
	PAY_API_1_1,				/* 1.0 and 1.1 */
	PAY_API_1_2,				/* a new payment needs its amount */
	PAY_API_1_3,				/* the guarantee does not depend on the caller */
	PAY_API_1_4					/* the caller's ordinary mistakes refused */
} PayApi;

extern Datum pay_open(PG_FUNCTION_ARGS);
extern Datum pay_begin(PG_FUNCTION_ARGS);
extern Datum pay_begin_1_2(PG_FUNCTION_ARGS);
extern Datum pay_claim(PG_FUNCTION_ARGS);
extern Datum pay_open_claim(PG_FUNCTION_ARGS);
extern Datum pay_succeed(PG_FUNCTION_ARGS);
extern Datum pay_fail(PG_FUNCTION_ARGS);
extern Datum pay_reset(PG_FUNCTION_ARGS);
extern Datum pay_transition(PG_FUNCTION_ARGS);
extern Datum pay_refund_open(PG_FUNCTION_ARGS);
extern Datum pay_open_1_3(PG_FUNCTION_ARGS);
extern Datum pay_begin_1_3(PG_FUNCTION_ARGS);
extern Datum pay_claim_1_3(PG_FUNCTION_ARGS);
extern Datum pay_open_claim_1_3(PG_FUNCTION_ARGS);
extern Datum pay_succeed_1_3(PG_FUNCTION_ARGS);
extern Datum pay_fail_1_3(PG_FUNCTION_ARGS);
extern Datum pay_reset_1_3(PG_FUNCTION_ARGS);
extern Datum pay_transition_1_3(PG_FUNCTION_ARGS);
extern Datum pay_refund_open_1_3(PG_FUNCTION_ARGS);
extern Datum pay_open_1_4(PG_FUNCTION_ARGS);
extern Datum pay_begin_1_4(PG_FUNCTION_ARGS);
extern Datum pay_claim_1_4(PG_FUNCTION_ARGS);
extern Datum pay_open_claim_1_4(PG_FUNCTION_ARGS);
extern Datum pay_succeed_1_4(PG_FUNCTION_ARGS);
extern Datum pay_fail_1_4(PG_FUNCTION_ARGS);
extern Datum pay_confirm_second_charge(PG_FUNCTION_ARGS);
extern Datum pay_open_authorization(PG_FUNCTION_ARGS);
extern Datum pay_capture_open(PG_FUNCTION_ARGS);
extern Datum pay_void_open(PG_FUNCTION_ARGS);
extern Datum pay_increment_open(PG_FUNCTION_ARGS);

/* api_refund.c: the bizNo of a new child (a refund, a step) of parent */
extern Datum PayIssueChildBizno(Datum parent, bool order_null, Datum prefix, Datum biz_id);
/* api_card.c: refuses when key of parent names a row of another kind */
extern void PayRefuseStepKeyTaken(FunctionCallInfo fcinfo, const PayCatalog *catalog,
								  Datum parent, Datum key, PayCardKind kind);

#endif							/* PAY_API_H */
