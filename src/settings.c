/*-------------------------------------------------------------------------
 *
 * settings.c
 *	  The settings of idempotent_pay (idempotent_pay.*), defined when the
 *	  library is loaded.
 *
 * Every setting is checked when it is set, so a value that would fail a
 * payment later is refused at once (22023).  The node id is set in the
 * server's configuration only (postgresql.conf or ALTER SYSTEM, then a
 * reload): no session, not even a superuser's, issues bizNos under another
 * node's id.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "fmgr.h"
#include "utils/guc.h"

#include "bizno_format.h"
#include "settings.h"

int			pay_node_id = 0;
int			pay_retry_failed = PAY_RETRY_AUTO;
int			pay_stuck_after_ms = 5 * 60 * 1000;
char	   *pay_notify_channel = NULL;
char	   *pay_journal_note = NULL;
int			pay_claim_in_transaction = PAY_CLAIM_IN_TRANSACTION_REFUSE;
int			pay_parameter_change = PAY_PARAMETER_CHANGE_DEFAULT;
int64		pay_max_amount = 0;
static char *pay_max_amount_text = NULL;
int			pay_foreign_keys = PAY_FOREIGN_KEYS_REFUSE;
int			pay_max_response_bytes = 65536;
bool		pay_maintenance = false;

static const struct config_enum_entry retry_failed_options[] = {
	{"auto", PAY_RETRY_AUTO, false},
	{"manual", PAY_RETRY_MANUAL, false},
	{NULL, 0, false}
};

static const struct config_enum_entry foreign_keys_options[] = {
	{"refuse", PAY_FOREIGN_KEYS_REFUSE, false},
	{"accept", PAY_FOREIGN_KEYS_ACCEPT, false},
	{NULL, 0, false}
};

static const struct config_enum_entry parameter_change_options[] = {
	{"default", PAY_PARAMETER_CHANGE_DEFAULT, false},
	{"allow", PAY_PARAMETER_CHANGE_ALLOW, false},
	{"refuse", PAY_PARAMETER_CHANGE_REFUSE, false},
	{NULL, 0, false}
};

static const struct config_enum_entry claim_in_transaction_options[] = {
	{"refuse", PAY_CLAIM_IN_TRANSACTION_REFUSE, false},
	{"allow", PAY_CLAIM_IN_TRANSACTION_ALLOW, false},
	{NULL, 0, false}
};

/*
 * A channel name NOTIFY accepts: shorter than NAMEDATALEN bytes.
 */
static bool
CheckNotifyChannel(char **newval, void **extra, GucSource source)
{
	if (strlen(*newval) >= NAMEDATALEN)
	{
		GUC_check_errdetail("A NOTIFY channel name is at most %d bytes long.",
							NAMEDATALEN - 1);
		return false;
	}
	return true;
}

/*
 * A max_amount is a whole number from 1 to PAY_MAX_AMOUNT_LIMIT, written in
 * digits (no sign, no exponent, no point): it is compared with amounts as
 * a number, and shown as it was given.  false when text is not one.
 */
static bool
ParseMaxAmount(const char *text, int64 *value)
{
	*value = 0;
	if (*text == '\0')
		return false;
	for (const char *c = text; *c != '\0'; c++)
	{
		if (*c < '0' || *c > '9' || *value > (PAY_MAX_AMOUNT_LIMIT - (*c - '0')) / 10)
			return false;
		*value = *value * 10 + (*c - '0');
	}
	return *value >= 1;
}

static bool
CheckMaxAmount(char **newval, void **extra, GucSource source)
{
	int64		value;

	if (ParseMaxAmount(*newval, &value))
		return true;
	GUC_check_errdetail("idempotent_pay.max_amount is a whole number from 1 to " INT64_FORMAT
						", the largest amount that is a bigint count of minor units in every currency.",
						PAY_MAX_AMOUNT_LIMIT);
	return false;
}

/* the value passed its check: parsing it again cannot fail */
static void
AssignMaxAmount(const char *newval, void *extra)
{
	(void) ParseMaxAmount(newval, &pay_max_amount);
}

void
PayDefineSettings(void)
{
	/*
	 * The server's configuration only: a session that could change the node
	 * id could issue bizNos from another node's space.
	 */
	DefineCustomIntVariable("idempotent_pay.node_id",
							"Node id written into every bizNo this server issues.",
							"Give every node of a cluster a distinct id, 0 to 1023, in postgresql.conf.",
							&pay_node_id,
							0, 0, BIZNO_NODE_ID_MAX,
							PGC_SIGHUP,
							0,
							NULL, NULL, NULL);

	/*
	 * Superuser-only: whether a failed charge is retried without a human is
	 * the operator's policy, not the application's.
	 */
	DefineCustomEnumVariable("idempotent_pay.retry_failed",
							 "Whether pay_begin retries a FAILED payment itself.",
							 "auto: FAILED -> INIT -> PROCESSING and PROCEED; "
							 "manual: NEEDS_RESET until pay_reset.",
							 &pay_retry_failed,
							 PAY_RETRY_AUTO, retry_failed_options,
							 PGC_SUSET,
							 0,
							 NULL, NULL, NULL);

	/*
	 * Superuser-only, as retry_failed: whether an order's amount may change
	 * under the same bizNo is the business's rule, not one caller's.
	 */
	DefineCustomEnumVariable("idempotent_pay.parameter_change",
							 "Whether a known payment's amount or currency may change while it is INIT or FAILED.",
							 "default: refuse, or allow where the extension's SQL is 1.3's; "
							 "allow: the new values replace the old ones, journaled; "
							 "refuse: 55000 pay_parameter_changed.",
							 &pay_parameter_change,
							 PAY_PARAMETER_CHANGE_DEFAULT, parameter_change_options,
							 PGC_SUSET,
							 0,
							 NULL, NULL, NULL);

	/*
	 * Any role: whether a claim is committed before the bank is called is
	 * decided by the caller's own code, which is what this lets a test
	 * harness, or code that commits the claim itself, say.
	 */
	DefineCustomEnumVariable("idempotent_pay.claim_in_transaction",
							 "Whether pay_claim, pay_open_claim and pay_begin may run inside a transaction block.",
							 "refuse: 25001 pay_claim_in_transaction, since a claim rolled back after the bank call "
							 "is claimed again and charged twice; allow: for code that commits the claim itself before calling the bank.",
							 &pay_claim_in_transaction,
							 PAY_CLAIM_IN_TRANSACTION_REFUSE, claim_in_transaction_options,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);

	/*
	 * Any role's: a caller that keys its payments by another system's ids
	 * says so for its own calls.  Whatever it says, a key shaped like a
	 * bizNo is held to the bizNo's checks.
	 */
	DefineCustomEnumVariable("idempotent_pay.foreign_keys",
							 "Whether a key that is not a bizNo may start a new payment (since 1.4).",
							 "refuse: 22P02 pay_foreign_key; "
							 "accept: recorded as a payment keyed by another system.",
							 &pay_foreign_keys,
							 PAY_FOREIGN_KEYS_REFUSE, foreign_keys_options,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);

	/*
	 * Superuser-only, as parameter_change.  A string: an amount's bound
	 * needs more digits than an integer setting holds.
	 */
	DefineCustomStringVariable("idempotent_pay.max_amount",
							   "The largest amount of a payment or refund, in whole units of its currency (since 1.4).",
							   "A larger amount is 22003, through the API and by raw SQL; at most 922337203685477.",
							   &pay_max_amount_text,
							   PAY_MAX_AMOUNT_DEFAULT,
							   PGC_SUSET,
							   0,
							   CheckMaxAmount, AssignMaxAmount, NULL);

	DefineCustomIntVariable("idempotent_pay.max_response_bytes",
							"The largest response pay_succeed stores for retries to replay.",
							NULL,
							&pay_max_response_bytes,
							65536, 0, 1024 * 1024 * 1024,
							PGC_SUSET,
							GUC_UNIT_BYTE,
							NULL, NULL, NULL);

	DefineCustomIntVariable("idempotent_pay.stuck_after",
							"How long a payment may be PROCESSING before pay_stats counts it as stuck.",
							NULL,
							&pay_stuck_after_ms,
							5 * 60 * 1000, 0, INT_MAX,
							PGC_USERSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	/*
	 * Superuser-only: the channel is the operators' contract with the
	 * workers that LISTEN on it.
	 */
	DefineCustomStringVariable("idempotent_pay.notify_channel",
							   "NOTIFY channel for committed payment transitions; empty for none.",
							   "Each transition sends {\"bizno\", \"from\", \"to\", \"attempt\"} as JSON.",
							   &pay_notify_channel,
							   "",
							   PGC_SUSET,
							   0,
							   CheckNotifyChannel, NULL, NULL);

	/*
	 * Superuser-only: DDL on the extension's own objects can undo what it
	 * guarantees, so it passes only where a superuser says so, and each
	 * statement is recorded (pay_refuse_ddl, src/ddl.c).
	 */
	DefineCustomBoolVariable("idempotent_pay.maintenance",
							 "Lets DDL change the extension's own tables, types and domains.",
							 "Each statement it lets through is recorded in pay_maintenance_log; "
							 "set it for the maintenance alone (SET LOCAL).",
							 &pay_maintenance,
							 false,
							 PGC_SUSET,
							 0,
							 NULL, NULL, NULL);

	DefineCustomStringVariable("idempotent_pay.journal_note",
							   "Note written to the journal rows of transitions that come without one.",
							   "For example SET LOCAL idempotent_pay.journal_note = 'ticket 4711' before a manual fix.",
							   &pay_journal_note,
							   "",
							   PGC_USERSET,
							   0,
							   NULL, NULL, NULL);
}
