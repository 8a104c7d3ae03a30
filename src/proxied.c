/*-------------------------------------------------------------------------
 *
 * proxied.c
 *	  A shard's errors as idempotent_pay_proxy needs them: with the
 *	  constraint name in a line of context.
 *
 * idempotent_pay names every refusal by constraint (pay_stale_attempt,
 * pay_amount_frozen, ...), and a caller branches on that name.  PL/Proxy
 * 2.10 passes a shard's SQLSTATE, message, detail, hint and context on to
 * the proxy, but not its constraint name.  So a session that sets
 * idempotent_pay.report_constraint -- each call of the proxy sets it on
 * the partition's session before it calls the API -- gets an ERROR's
 * constraint name as the last line of its context:
 *
 *	  idempotent_pay constraint: pay_amount_frozen
 *
 * and the proxy (pay_proxy_raise, route.c) raises the error again with
 * that constraint name and without the context.  Off, the default, no
 * error changes.
 *
 * The line is added by an emit_log_hook, which EmitErrorReport calls
 * before it sends the error to the client, and only when the error goes
 * to the server log too (log_min_messages at ERROR or below, as by
 * default: with fatal or panic the hook is not called and the proxy gets
 * no constraint name).  PostgreSQL documents changes of an ErrorData in
 * this hook other than output_to_server as unsupported; appending to its
 * context, allocated where EmitErrorReport allocates, is what the
 * message sent next is built from, and test/tap/007_proxy.pl checks the
 * name arrives.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/elog.h"
#include "utils/guc.h"

#include "proxied.h"

/* idempotent_pay.report_constraint */
static bool pay_report_constraint = false;

static emit_log_hook_type previous_emit_log_hook = NULL;

/*
 * Append the constraint name of an ERROR sent to a client that asked for
 * it to the error's context; then call the hook installed before ours.
 */
static void
ReportConstraint(ErrorData *edata)
{
	if (pay_report_constraint && edata->elevel == ERROR && edata->output_to_client &&
		edata->constraint_name != NULL)
	{
		char	   *line = psprintf("%s%s", PAY_CONSTRAINT_CONTEXT_LINE, edata->constraint_name);

		edata->context = edata->context != NULL ? psprintf("%s\n%s", edata->context, line) : line;
	}
	if (previous_emit_log_hook != NULL)
		previous_emit_log_hook(edata);
}

/*
 * Define idempotent_pay.report_constraint and install the hook; called
 * from _PG_init.
 */
void
PayProxiedInit(void)
{
	DefineCustomBoolVariable("idempotent_pay.report_constraint",
							 "Adds an error's constraint name to its context, for idempotent_pay_proxy.",
							 "Each call of idempotent_pay_proxy sets it in the session PL/Proxy opens to a "
							 "partition: PL/Proxy passes a partition's context on, not its constraint name.",
							 &pay_report_constraint,
							 false,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);

	previous_emit_log_hook = emit_log_hook;
	emit_log_hook = ReportConstraint;
}
