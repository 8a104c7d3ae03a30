/*-------------------------------------------------------------------------
 *
 * write_rows.h
 *	  The rows and values passed across the write layer: what the API reads
 *	  of a payment, and what each write writes.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PAY_WRITE_ROWS_H
#define PAY_WRITE_ROWS_H

#include "postgres.h"

#include "machine.h"

/* A ledger row as the API reads it. */
typedef struct LedgerRow
{
	PayStatus	status;
	Datum		amount;
	bool		amount_null;
	Datum		currency;
	bool		currency_null;
	int32		attempt;
	Datum		bizno;			/* PayLedgerFindOrder, PayLedgerFindRefund */
	/* PayLedgerProbe only: */
	Datum		channel_ref;
	bool		channel_ref_null;
	Datum		response;
	bool		response_null;
} LedgerRow;

/* The amount and currency of a write; either may be absent. */
typedef struct PaymentAmount
{
	bool		has_amount;
	Datum		amount;
	bool		has_currency;
	Datum		currency;
} PaymentAmount;

/* A settlement: the row of bizno moves from settle_from to target. */
typedef struct PaySettleWrite
{
	Datum		bizno;
	PayStatus	target;			/* SUCCESS or FAILED */
	PayStatus	from;			/* PaySettleSource(target) */
	Datum		channel_ref;	/* kept when null */
	bool		channel_ref_null;
	Datum		last_error;		/* kept when null; also the note */
	bool		last_error_null;
	int32		attempt;		/* the attempt it must be */
	bool		attempt_null;	/* any attempt */
	Datum		response;
	bool		response_null;
} PaySettleWrite;

/* A new refund's row. */
typedef struct PayRefundRow
{
	Datum		bizno;
	Datum		amount;
	Datum		currency;
	bool		currency_null;
	Datum		parent;
	Datum		refund_key;
	const char *note;
} PayRefundRow;

/* A row of the card flow as its openers read it (write_card.c). */
typedef struct PayCardRow
{
	Datum		bizno;
	PayStatus	status;
	Datum		amount;
	bool		amount_null;
	Datum		currency;
	bool		currency_null;
	Datum		kind;
	bool		kind_null;
	Datum		expires_in;
	bool		expires_in_null;
	Datum		prefix;			/* PayLedgerReadCardRow only */
	Datum		biz_id;
	bool		order_null;
} PayCardRow;

/* A new row of the card flow: an authorization (no parent) or a step. */
typedef struct PayCardInsert
{
	Datum		bizno;
	Datum		amount;
	bool		amount_null;
	Datum		currency;
	bool		currency_null;
	const char *kind;
	Datum		expires_in;
	bool		expires_in_null;
	Datum		parent;
	Datum		key;
	bool		parent_null;	/* an authorization: no parent, no key */
	const char *note;
} PayCardInsert;

/* What an insert does when a unique key of the new row is taken. */
typedef enum PayInsertConflict
{
	PAY_INSERT_IF_ABSENT,		/* nothing, and returns false (ON CONFLICT DO NOTHING) */
	PAY_INSERT_STRICT			/* raises the violation naming the index */
} PayInsertConflict;

#endif							/* PAY_WRITE_ROWS_H */
