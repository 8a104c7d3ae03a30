/*-------------------------------------------------------------------------
 *
 * settings.h
 *	  The settings of idempotent_pay, defined in settings.c.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PAY_SETTINGS_H
#define PAY_SETTINGS_H

#include "postgres.h"

/* idempotent_pay.node_id: this server's part of every bizNo it issues */
extern int	pay_node_id;

/* idempotent_pay.retry_failed: may pay_begin retry a FAILED payment itself? */
typedef enum PayRetryFailed
{
	PAY_RETRY_AUTO,
	PAY_RETRY_MANUAL
} PayRetryFailed;
extern int	pay_retry_failed;

/* idempotent_pay.stuck_after: when pay_stats counts a PROCESSING row as stuck */
extern int	pay_stuck_after_ms;

/* idempotent_pay.notify_channel: where committed transitions are announced */
extern char *pay_notify_channel;

/* idempotent_pay.journal_note: a note for journal rows that carry none */
extern char *pay_journal_note;

/*
 * idempotent_pay.parameter_change: may a known payment's amount change?
 * DEFAULT is the rule of the version whose SQL is installed: refuse since
 * 1.4, allow under 1.3's SQL (ParameterChangeRefused, api_claim.c).
 */
typedef enum PayParameterChange
{
	PAY_PARAMETER_CHANGE_DEFAULT,
	PAY_PARAMETER_CHANGE_ALLOW,
	PAY_PARAMETER_CHANGE_REFUSE
} PayParameterChange;
extern int	pay_parameter_change;

/*
 * idempotent_pay.claim_in_transaction: may a claim run inside a transaction
 * block, where it is not durable before the caller acts on it?
 */
typedef enum PayClaimInTransaction
{
	PAY_CLAIM_IN_TRANSACTION_REFUSE,
	PAY_CLAIM_IN_TRANSACTION_ALLOW
} PayClaimInTransaction;
extern int	pay_claim_in_transaction;

/*
 * idempotent_pay.max_amount: the largest amount of a payment or refund, a
 * whole number of the currency's units, since 1.4
 */
extern int64 pay_max_amount;

/*
 * The largest max_amount: every amount up to it, in every currency (at most
 * 4 minor units), is a bigint count of the currency's minor units.
 */
#define PAY_MAX_AMOUNT_LIMIT INT64CONST(922337203685477)
#define PAY_MAX_AMOUNT_DEFAULT "100000000000000"

/* idempotent_pay.foreign_keys: may a key that is no bizNo start a payment? */
typedef enum PayForeignKeys
{
	PAY_FOREIGN_KEYS_REFUSE,
	PAY_FOREIGN_KEYS_ACCEPT
} PayForeignKeys;
extern int	pay_foreign_keys;

/* idempotent_pay.max_response_bytes: the largest response stored */
extern int	pay_max_response_bytes;

/* idempotent_pay.maintenance: may DDL change the extension's objects? */
extern bool pay_maintenance;

extern void PayDefineSettings(void);

#endif							/* PAY_SETTINGS_H */
