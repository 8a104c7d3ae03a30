/*-------------------------------------------------------------------------
 *
 * idempotent_pay.h
 *	  Settings and entry points shared by the files of idempotent_pay.
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEMPOTENT_PAY_H
#define IDEMPOTENT_PAY_H

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

/* src/bizno.c */
extern void BiznoCheckKey(text *key);
extern void BiznoCheckParts(text *prefix, text *biz_id);
extern size_t BiznoGenerate(char *buf, const char *prefix, size_t prefix_len,
							const char *biz_id, size_t biz_id_len);

#endif							/* IDEMPOTENT_PAY_H */
