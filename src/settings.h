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

/* idempotent_pay.parameter_change: may a known payment's amount change? */
typedef enum PayParameterChange
{
	PAY_PARAMETER_CHANGE_ALLOW,
	PAY_PARAMETER_CHANGE_REFUSE
} PayParameterChange;
extern int	pay_parameter_change;

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
