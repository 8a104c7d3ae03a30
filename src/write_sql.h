/*-------------------------------------------------------------------------
 *
 * write_sql.h
 *	  The ledger's and the journal's reads and writes as saved plans of SQL
 *	  statements: the way every write can go.  Called by the write layer
 *	  (write.c, write_card.c) only.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PAY_WRITE_SQL_H
#define PAY_WRITE_SQL_H

#include "postgres.h"

#include "utils/relcache.h"

#include "catalog.h"
#include "compat.h"
#include "write_rows.h"

extern bool PaySqlLock(const PayCatalog *catalog, Datum bizno, LedgerRow *row);
extern bool PaySqlHasPrefix(const PayCatalog *catalog, Datum prefix);
extern bool PaySqlFindOrder(const PayCatalog *catalog, Datum prefix, Datum biz_id,
							LedgerRow *row);
extern bool PaySqlFindArchived(const PayCatalog *catalog, Datum bizno, LedgerRow *row);
extern bool PaySqlFindArchivedOrder(const PayCatalog *catalog, Datum prefix, Datum biz_id,
									LedgerRow *row);
extern bool PaySqlFindRefund(const PayCatalog *catalog, Datum parent, Datum refund_key,
							 LedgerRow *row);
extern bool PaySqlReadParent(const PayCatalog *catalog, Datum parent, Datum *currency,
							 bool *currency_null, Datum *prefix, Datum *biz_id,
							 bool *order_null);
extern bool PaySqlInsert(const PayCatalog *catalog, Datum bizno, PayStatus status,
						 const PaymentAmount *amount, PayInsertConflict conflict);
extern bool PaySqlInsertRefund(const PayCatalog *catalog, const PayRefundRow *refund,
							   PayInsertConflict conflict);
extern bool PaySqlSetStatus(const PayCatalog *catalog, Datum bizno, PayStatus status,
							const char *note);
extern bool PaySqlSetAmount(const PayCatalog *catalog, Datum bizno,
							bool amount_null, Datum amount,
							bool currency_null, Datum currency);
extern bool PaySqlSettle(const PayCatalog *catalog, const PaySettleWrite *settle);
extern void PaySqlJournalSecondCharge(const PayCatalog *catalog, Datum bizno,
									  const char *kind, Datum channel_ref, const char *note);
extern void PaySqlRecordDeletion(const PayCatalog *catalog, Relation ledger, Datum bizno,
								 PayStatus status, bool refund, Datum kind, bool kind_null);
extern void PaySqlJournalInsert(const PayCatalog *catalog, Relation journal,
								const Datum *values, const bool *nulls);

PayNoReturn extern void PaySqlRethrowForCaller(MemoryContext context);

#endif							/* PAY_WRITE_SQL_H */
