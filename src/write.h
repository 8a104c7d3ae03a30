/*-------------------------------------------------------------------------
 *
 * write.h
 *	  The one interface through which the API reads and writes the ledger
 *	  and through which the ledger's journal trigger appends to the journal.
 *
 * Below it, each write goes one of two ways, and write.c alone chooses:
 * straight through the table and index access methods (write_direct.c)
 * when write_direct_policy.c says nothing the executor would do is left
 * undone, else through a saved plan of an SQL statement (write_sql.c).
 * Callers never know which way a write went.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PAY_WRITE_H
#define PAY_WRITE_H

#include "postgres.h"

#include "fmgr.h"
#include "utils/relcache.h"
#include "utils/snapshot.h"

#include "catalog.h"
#include "machine.h"
#include "write_rows.h"

/* Reads: false when there is no such row.  Call the rest inside SPI. */
extern bool PayLedgerProbe(FunctionCallInfo fcinfo, Datum bizno, LedgerRow *row);
extern bool PayLedgerLock(FunctionCallInfo fcinfo, const PayCatalog *catalog, Datum bizno,
						  LedgerRow *row);
extern bool PayLedgerFindOrder(FunctionCallInfo fcinfo, const PayCatalog *catalog,
							   Datum prefix, Datum biz_id, LedgerRow *row);
extern bool PayLedgerHasPrefix(const PayCatalog *catalog, Datum prefix);
extern bool PayLedgerFindRefund(const PayCatalog *catalog, Datum parent, Datum refund_key,
								LedgerRow *row);
extern bool PayLedgerReadParent(const PayCatalog *catalog, Datum parent, Datum *currency,
								bool *currency_null, Datum *prefix, Datum *biz_id,
								bool *order_null);

/* Writes. */
extern bool PayLedgerInsert(FunctionCallInfo fcinfo, const PayCatalog *catalog, Datum bizno,
							PayStatus status, const PaymentAmount *amount,
							PayInsertConflict conflict);
extern bool PayLedgerInsertRead(FunctionCallInfo fcinfo, const PayCatalog *catalog, Datum bizno,
								PayStatus status, const PaymentAmount *amount,
								PayInsertConflict conflict, LedgerRow *row);
extern bool PayLedgerInsertRefund(const PayCatalog *catalog, const PayRefundRow *refund,
								  PayInsertConflict conflict);
extern void PayLedgerSetStatus(const PayCatalog *catalog, Datum bizno, PayStatus status,
							   const char *note);
extern void PayLedgerAdvance(FunctionCallInfo fcinfo, const PayCatalog *catalog, Datum bizno,
							 PayStatus from, PayStatus to);
extern void PayLedgerSetAmount(const PayCatalog *catalog, Datum bizno,
							   bool amount_null, Datum amount,
							   bool currency_null, Datum currency);
extern bool PayLedgerSettle(FunctionCallInfo fcinfo, const PayCatalog *catalog,
							const PaySettleWrite *settle);
extern void PayJournalSecondCharge(const PayCatalog *catalog, Datum bizno, const char *kind,
								   Datum channel_ref, const char *note);
extern void PayJournalAppend(const PayCatalog *catalog, Relation journal,
							 const Datum *values, const bool *nulls);
extern void PayLedgerRecordDeletion(const PayCatalog *catalog, Relation ledger, Datum bizno,
									PayStatus status, bool refund, Datum kind, bool kind_null);

extern void PayRequireRowWritten(bool written, Datum bizno);

/*
 * A batch segment, run in a subtransaction of its own: Begin after the
 * subtransaction starts (false inside another segment, which then shares
 * nothing), End before it commits, Abandon before it is rolled back.
 */
extern bool PayWriteSegmentBegin(void);
extern void PayWriteSegmentEnd(void);
extern void PayWriteSegmentAbandon(void);

/* The card flow's rows (write_card.c); call inside SPI. */
extern bool PayLedgerHasCardFlow(const PayCatalog *catalog);
extern bool PayLedgerFindCardOrder(const PayCatalog *catalog, Datum prefix, Datum biz_id,
								   PayCardRow *row);
extern bool PayLedgerFindCardStep(FunctionCallInfo fcinfo, const PayCatalog *catalog,
								  Datum parent, Datum key, PayCardRow *row);
extern bool PayLedgerReadCardRow(FunctionCallInfo fcinfo, const PayCatalog *catalog,
								 Datum bizno, PayCardRow *row);
extern bool PayLedgerInsertCard(FunctionCallInfo fcinfo, const PayCatalog *catalog,
								const PayCardInsert *insert, PayInsertConflict conflict);

/* The archive (write_archive.c): what pay_archive moved out of the ledger. */
typedef enum PayArchived
{
	PAY_NOT_ARCHIVED,
	PAY_ARCHIVED_KEPT,			/* its row is in pay_ledger_archive */
	PAY_ARCHIVED_DROPPED		/* its partition was dropped: only its hash is kept */
} PayArchived;

/* The two kinds of row the archive receives. */
typedef enum PayArchiveMove
{
	PAY_MOVED_LEDGER_ROW,		/* keyed by PayArchiveKeyHash(bizno) */
	PAY_MOVED_JOURNAL_ROW		/* keyed by seq */
} PayArchiveMove;

extern uint64 PayArchiveKeyHash(Datum key);
extern uint64 PayArchiveIdentityHash(Datum key);
extern uint64 PayArchiveOrderHash(Datum prefix, Datum biz_id);
extern PayArchived PayArchiveFind(const PayCatalog *catalog, Datum bizno, LedgerRow *row);
extern PayArchived PayArchiveFindOrder(const PayCatalog *catalog, Datum prefix, Datum biz_id,
									   LedgerRow *row);
extern bool PayArchiveHolds(const PayCatalog *catalog, Datum bizno);
extern bool PayArchiveHoldsAsOf(const PayCatalog *catalog, uint64 hash, Snapshot snapshot);
extern void PayArchiveRefuseArchivedMeanwhile(const PayCatalog *catalog, Datum bizno);
extern void PayArchiveForgetChecked(void);
extern bool PayArchiveHoldsNewRow(const PayCatalog *catalog, Datum bizno);
extern void PayArchiveNoteMoved(PayArchiveMove kind, uint64 key);
extern bool PayArchiveWasMoved(PayArchiveMove kind, uint64 key);

#endif							/* PAY_WRITE_H */
