/*-------------------------------------------------------------------------
 *
 * write.c
 *	  The one place that sends each of the ledger's and journal's writes
 *	  one way or the other: through the access methods (write_direct.c)
 *	  when write_direct_policy.c allows it, else through SQL (write_sql.c).
 *
 * Only the hot writes have two ways: a new payment's INSERT (and a card
 * step's), the settling UPDATE (and a claim's INIT -> PROCESSING, written
 * as one), a claim's lock of an existing row (FOR UPDATE), and the journal
 * trigger's row.  Every other read and write is rare enough to be planned
 * SQL always; the probe of the primary key is always direct, as it only
 * reads, and checks the privilege a SELECT would need; the probe of a
 * business action, a new payment's first read, is direct where the direct
 * writes are.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/builtins.h"

#include "reason.h"
#include "write.h"
#include "write_direct.h"
#include "write_direct_policy.h"
#include "write_sql.h"

bool
PayLedgerProbe(FunctionCallInfo fcinfo, Datum bizno, LedgerRow *row)
{
	return PayDirectProbe(fcinfo, bizno, row);
}

/*
 * The row of bizno, locked FOR UPDATE, in every column a probe reads: the
 * version locked, through the access methods where write_direct_policy.c
 * lets the UPDATE that follows a lock go direct; else the SQL's lock, then
 * the probe (which reads the version locked: no other transaction can have
 * changed it since, and a snapshot of the transaction that could not see
 * it would have failed the lock).
 */
bool
PayLedgerLock(FunctionCallInfo fcinfo, const PayCatalog *catalog, Datum bizno, LedgerRow *row)
{
	bool		found;

	if (PayDirectLock(fcinfo, bizno, row, &found))
		return found;
	return PaySqlLock(catalog, bizno, row) && PayLedgerProbe(fcinfo, bizno, row);
}

/*
 * The row of business action (prefix, biz_id): through the index on
 * (prefix, biz_id) where write_direct_policy.c allows it, else by SQL.
 */
bool
PayLedgerFindOrder(FunctionCallInfo fcinfo, const PayCatalog *catalog, Datum prefix,
				   Datum biz_id, LedgerRow *row)
{
	bool		found;

	if (PayDirectFindOrder(fcinfo, prefix, biz_id, row, &found))
		return found;
	return PaySqlFindOrder(catalog, prefix, biz_id, row);
}

/* Whether the ledger holds a bizNo of prefix (prefixes.c keeps the answer). */
bool
PayLedgerHasPrefix(const PayCatalog *catalog, Datum prefix)
{
	return PaySqlHasPrefix(catalog, prefix);
}

/* The row of refund refund_key of payment parent; the ledger has refunds. */
bool
PayLedgerFindRefund(const PayCatalog *catalog, Datum parent, Datum refund_key, LedgerRow *row)
{
	return PaySqlFindRefund(catalog, parent, refund_key, row);
}

/*
 * The currency and business action of payment parent, the parts of it a
 * refund takes; order_null when it has none (a key of another system).
 */
bool
PayLedgerReadParent(const PayCatalog *catalog, Datum parent, Datum *currency,
					bool *currency_null, Datum *prefix, Datum *biz_id, bool *order_null)
{
	return PaySqlReadParent(catalog, parent, currency, currency_null, prefix, biz_id,
							order_null);
}

/*
 * Insert a new ledger row.  PAY_INSERT_IF_ABSENT: false when a row with any
 * unique key of it exists (ON CONFLICT DO NOTHING); PAY_INSERT_STRICT: such
 * a row raises the unique violation that names its index (SQL always).
 */
bool
PayLedgerInsert(FunctionCallInfo fcinfo, const PayCatalog *catalog, Datum bizno,
				PayStatus status, const PaymentAmount *amount, PayInsertConflict conflict)
{
	bool		inserted;

	if (conflict == PAY_INSERT_IF_ABSENT &&
		PayDirectInsert(fcinfo, bizno, status, amount, &inserted))
		return inserted;
	return PaySqlInsert(catalog, bizno, status, amount, conflict);
}

/*
 * PayLedgerInsert, and when the row went in, the row as a probe of its
 * bizNo reads it, in *row: the tuple the direct insert wrote, or, after an
 * INSERT statement (whose rules and triggers of the DBA's may have written
 * more), the probe itself.
 */
bool
PayLedgerInsertRead(FunctionCallInfo fcinfo, const PayCatalog *catalog, Datum bizno,
					PayStatus status, const PaymentAmount *amount, PayInsertConflict conflict,
					LedgerRow *row)
{
	bool		inserted;

	if (conflict == PAY_INSERT_IF_ABSENT &&
		PayDirectInsertRead(fcinfo, bizno, status, amount, &inserted, row))
		return inserted;
	inserted = PaySqlInsert(catalog, bizno, status, amount, conflict);
	if (inserted && !PayLedgerProbe(fcinfo, bizno, row))
		PayRequireRowWritten(false, bizno);
	return inserted;
}

/* Insert a new refund's row, as PayLedgerInsert does a payment's. */
bool
PayLedgerInsertRefund(const PayCatalog *catalog, const PayRefundRow *refund,
					  PayInsertConflict conflict)
{
	return PaySqlInsertRefund(catalog, refund, conflict);
}

/* Move the row of bizno to status; the write must be made. */
void
PayLedgerSetStatus(const PayCatalog *catalog, Datum bizno, PayStatus status, const char *note)
{
	PayRequireRowWritten(PaySqlSetStatus(catalog, bizno, status, note), bizno);
}

/*
 * Move the row of bizno, locked (or inserted by this transaction), from
 * status from to status to without a note: through the access methods, as
 * a settlement, when write_direct_policy.c allows it, else as
 * PayLedgerSetStatus; the write must be made.  The direct write also sets
 * the row's response and note to NULL, which an INIT or FAILED payment's
 * are.
 */
void
PayLedgerAdvance(FunctionCallInfo fcinfo, const PayCatalog *catalog, Datum bizno,
				 PayStatus from, PayStatus to)
{
	PaySettleWrite step = {
		.bizno = bizno,
		.target = to,
		.from = from,
		.channel_ref_null = true,
		.last_error_null = true,
		.attempt_null = true,
		.response_null = true,
	};
	bool		written;

	if (PayDirectSettle(fcinfo, &step, &written))
		PayRequireRowWritten(written, bizno);
	else
		PayLedgerSetStatus(catalog, bizno, to, NULL);
}

/* Set the amount and currency of the row of bizno; the write must be made. */
void
PayLedgerSetAmount(const PayCatalog *catalog, Datum bizno, bool amount_null, Datum amount,
				   bool currency_null, Datum currency)
{
	PayRequireRowWritten(PaySqlSetAmount(catalog, bizno, amount_null, amount,
										 currency_null, currency), bizno);
}

/* Settle a payment; false when no row matched (or a trigger skipped it). */
bool
PayLedgerSettle(FunctionCallInfo fcinfo, const PayCatalog *catalog,
				const PaySettleWrite *settle)
{
	bool		settled;

	if (PayDirectSettle(fcinfo, settle, &settled))
		return settled;
	return PaySqlSettle(catalog, settle);
}

/*
 * Journal a second charge of bizno under channel_ref, once per kind and
 * reference (kind NULL: 1.2's journal, where the note is the record); the
 * actor is the session's role.
 */
void
PayJournalSecondCharge(const PayCatalog *catalog, Datum bizno, const char *kind,
					   Datum channel_ref, const char *note)
{
	PaySqlJournalSecondCharge(catalog, bizno, kind, channel_ref, note);
}

/*
 * Append the journal trigger's row to the journal, opened and locked by the
 * trigger; values and nulls are indexed by JournalColumn.
 */
void
PayJournalAppend(const PayCatalog *catalog, Relation journal, const Datum *values,
				 const bool *nulls)
{
	if (PayDirectJournalAppendAllowed(catalog, journal))
		PayDirectJournalInsert(catalog, journal, values, nulls);
	else
		PaySqlJournalInsert(catalog, journal, values, nulls);
}

/*
 * Record that the ledger row bizno, in status, was deleted, for the counts
 * of pay_stats (the journal records no deletion), with the card flow's kind
 * of the row (kind_null for a payment or refund); rare, so always by SQL.
 */
void
PayLedgerRecordDeletion(const PayCatalog *catalog, Relation ledger, Datum bizno,
						PayStatus status, bool refund, Datum kind, bool kind_null)
{
	PaySqlRecordDeletion(catalog, ledger, bizno, status, refund, kind, kind_null);
}

/*
 * The inputs of a batch segment, one subtransaction, are as many
 * statements: the direct writes among them share the executor state they
 * set up -- the result relations, their indexes opened, their slots
 * (write_direct.c) -- from the segment's first write to its end.
 */
bool
PayWriteSegmentBegin(void)
{
	return PayDirectSegmentBegin();
}

void
PayWriteSegmentEnd(void)
{
	PayDirectSegmentEnd();
}

void
PayWriteSegmentAbandon(void)
{
	PayDirectSegmentAbandon();
}

/*
 * Refuse (55000) when a write that must write one row wrote none: a trigger
 * or rule of the DBA's on pay_ledger suppressed it, and the API must not
 * answer as though it had written.
 */
void
PayRequireRowWritten(bool written, Datum bizno)
{
	if (!written)
		ereport(ERROR,
				(errmsg("the write of payment %s was suppressed", TextDatumGetCString(bizno)),
				 errdetail("A trigger or rule on pay_ledger skipped a write of the API."),
				 PayReason(PAY_REASON_WRITE_SUPPRESSED)));
}
