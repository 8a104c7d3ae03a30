/*-------------------------------------------------------------------------
 *
 * ledger.h
 *	  The payment API, reached from SQL only.
 *
 *-------------------------------------------------------------------------
 */
#ifndef LEDGER_H
#define LEDGER_H

#include "postgres.h"

#include "fmgr.h"

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
extern Datum pay_confirm_second_charge(PG_FUNCTION_ARGS);

#endif							/* LEDGER_H */
