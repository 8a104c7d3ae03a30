/*-------------------------------------------------------------------------
 *
 * catalog.h
 *	  The extension's own objects -- schema, types, enum labels, the ledger
 *	  and the journal with their columns -- looked up once per backend and
 *	  looked up again after any change to them.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PAY_CATALOG_H
#define PAY_CATALOG_H

#include "postgres.h"

#include "fmgr.h"
#include "nodes/primnodes.h"

#include "machine.h"

/* The columns of pay_ledger the C code reads and writes. */
typedef enum LedgerColumn
{
	LEDGER_BIZNO,
	LEDGER_PREFIX,
	LEDGER_BIZ_ID,
	LEDGER_STATUS,
	LEDGER_AMOUNT,
	LEDGER_CURRENCY,
	LEDGER_ATTEMPT,
	LEDGER_CHANNEL_REF,
	LEDGER_LAST_ERROR,
	LEDGER_CREATED_AT,
	LEDGER_UPDATED_AT,
	LEDGER_PROCESSING_SINCE,
	LEDGER_NOTE,				/* since 1.2; InvalidAttrNumber before */
	LEDGER_RESPONSE,			/* since 1.2; InvalidAttrNumber before */
	LEDGER_PARENT,				/* since 1.2; InvalidAttrNumber before */
	LEDGER_REFUND_KEY,			/* since 1.2; InvalidAttrNumber before */
	LEDGER_KIND,				/* since 1.4; InvalidAttrNumber before */
	LEDGER_EXPIRES_IN,			/* since 1.4; InvalidAttrNumber before */
	LEDGER_EXPIRES_AT,			/* since 1.4; InvalidAttrNumber before */
	LEDGER_COLUMNS
} LedgerColumn;

/*
 * The columns of pay_journal the journal trigger fills.  The step into
 * SUCCESS records the answer it settled with, channel_ref and
 * response_digest, from 1.4 on (the journal has response_digest): NULL on
 * every other row, a second charge's row aside, which the API writes by
 * SQL with its own reference.
 */
typedef enum JournalColumn
{
	JOURNAL_SEQ,
	JOURNAL_BIZNO,
	JOURNAL_ATTEMPT,
	JOURNAL_FROM,
	JOURNAL_TO,
	JOURNAL_AMOUNT,
	JOURNAL_CURRENCY,
	JOURNAL_AT,
	JOURNAL_TXID,
	JOURNAL_ACTOR,
	JOURNAL_NOTE,
	JOURNAL_CHANNEL_REF,		/* since 1.3; InvalidAttrNumber before */
	JOURNAL_RESPONSE_DIGEST,	/* since 1.4; InvalidAttrNumber before */
	JOURNAL_COLUMNS
} JournalColumn;

typedef struct PayCatalog
{
	/* bumped whenever anything below is looked up again */
	uint64		generation;

	/* the types: valid until a type changes (DROP/CREATE EXTENSION) */
	Oid			namespace;		/* the extension's schema */
	const char *schema;			/* its name, quoted for SQL text */
	Oid			status_type;	/* pay_status */
	Oid			status_labels[PAY_STATUS_COUNT];
	Oid			action_type;	/* pay_action */
	Oid			action_labels[PAY_ACTION_COUNT];

	/* the tables: valid until a relcache invalidation of either */
	Oid			ledger;			/* pay_ledger */
	Oid			ledger_pkey;	/* its primary key, on bizno */
	AttrNumber	ledger_attnums[LEDGER_COLUMNS];
	Oid			journal;		/* pay_journal */
	Oid			journal_sequence;	/* pay_journal_seq_seq */
	AttrNumber	journal_attnums[JOURNAL_COLUMNS];

	/*
	 * since 1.3, the archive: the hashes of every key and business action
	 * pay_archive moved out, with their primary key on lo, and the archived
	 * ledger rows; InvalidOid before the update
	 */
	Oid			archive_keys;	/* pay_archive_keys */
	Oid			archive_keys_pkey;
	Oid			ledger_archive; /* pay_ledger_archive */

	/* the ledger's own trigger functions (write_direct.c fires them itself) */
	Oid			guard_function;
	Oid			bookkeeping_function;
	Oid			journal_function;
} PayCatalog;

extern const PayCatalog *PayCatalogGet(FunctionCallInfo fcinfo);
extern const PayCatalog *PayCatalogGetTables(FunctionCallInfo fcinfo);
extern PayStatus PayStatusFromLabel(const PayCatalog *catalog, Oid label);
extern bool PayLedgerHasRefunds(const PayCatalog *catalog);
extern Oid	PayLedgerColumnType(const PayCatalog *catalog, LedgerColumn column);
extern const char *PayJournalColumnName(JournalColumn column);
extern Oid	PayJournalColumnType(const PayCatalog *catalog, JournalColumn column);
extern int	PayPinSearchPath(const PayCatalog *catalog);

#define PayStatusGetDatum(catalog, status) \
	ObjectIdGetDatum((catalog)->status_labels[(status)])
#define PayActionGetDatum(catalog, action) \
	ObjectIdGetDatum((catalog)->action_labels[(action)])

/*
 * The equality of the queries the library prepares against the extension's
 * schema (catalog->schema), pinned to pg_catalog so that an operator
 * of a caller's search_path never stands in for it.
 */
#define PAY_SQL_EQ "OPERATOR(pg_catalog.=)"

#endif							/* PAY_CATALOG_H */
