/*-------------------------------------------------------------------------
 *
 * write_sql.c
 *	  The ledger's and the journal's reads and writes as saved plans of SQL
 *	  statements, which the executor runs with everything it does for any
 *	  statement: the DBA's triggers, rules, constraints, row security and
 *	  the hooks of other modules.
 *
 * The API's functions run as the extension owner (SECURITY DEFINER); every
 * name in these statements is schema-qualified, = is pinned to pg_catalog,
 * and each runs with search_path pinned to the extension's schema and
 * pg_temp (PayPinSearchPath), as a function's SET clause would pin it, so
 * that nothing a statement fires resolves a name on the caller's path.  The
 * plans are prepared once per backend and again whenever the catalog was
 * looked up again (its generation changed), all of them together.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"

#include "catalog.h"
#include "trigger_common.h"
#include "write_sql.h"

/* The saved plans, in the order of plan_queries. */
typedef enum LedgerPlan
{
	PLAN_LOCK,
	PLAN_INSERT,
	PLAN_INSERT_STRICT,
	PLAN_SET_STATUS,
	PLAN_SETTLE,
	PLAN_SET_AMOUNT,
	PLAN_FIND_ORDER,
	PLAN_JOURNAL_SECOND_CHARGE,
	PLAN_PREFIX_ISSUED,
	/* since 1.2: the ledger has parent and refund_key */
	PLAN_FIND_REFUND,
	PLAN_READ_PARENT,
	PLAN_INSERT_REFUND,
	PLAN_INSERT_REFUND_STRICT,
	/* since 1.3: the archive, and a second charge's kind in its own column */
	PLAN_FIND_ARCHIVED,
	PLAN_FIND_ARCHIVED_ORDER,
	PLAN_JOURNAL_SECOND_CHARGE_1_3,
	PLAN_COUNT
} LedgerPlan;

#define FirstRefundPlan PLAN_FIND_REFUND
#define FirstArchivePlan PLAN_FIND_ARCHIVED

/*
 * %1$s is the quoted schema; = is pinned to pg_catalog.  %2$s sets the
 * columns a 1.2 ledger has and older ones lack (ExtraSets): the note, and
 * a success's response; it is the empty string before the update.
 */
static const char *const plan_queries[PLAN_COUNT] = {
	[PLAN_LOCK] =
	"SELECT status, amount, currency, attempt FROM %1$s.pay_ledger WHERE bizno " PAY_SQL_EQ " $1 FOR UPDATE",
	[PLAN_INSERT] =
	"INSERT INTO %1$s.pay_ledger (bizno, status, amount, currency) VALUES ($1, $2, $3, $4) "
	"ON CONFLICT DO NOTHING",
	[PLAN_INSERT_STRICT] =
	"INSERT INTO %1$s.pay_ledger (bizno, status, amount, currency) VALUES ($1, $2, $3, $4)",
	[PLAN_SET_STATUS] =
	"UPDATE %1$s.pay_ledger SET status = $2%2$s WHERE bizno " PAY_SQL_EQ " $1",
	[PLAN_SETTLE] =
	"UPDATE %1$s.pay_ledger SET status = $2, channel_ref = COALESCE($3, channel_ref), "
	"last_error = COALESCE($4, last_error)%2$s "
	"WHERE bizno " PAY_SQL_EQ " $1 AND status " PAY_SQL_EQ " $5 AND attempt " PAY_SQL_EQ " COALESCE($6, attempt)",
	/* $7: the response of a success */
	[PLAN_SET_AMOUNT] =
	"UPDATE %1$s.pay_ledger SET amount = $2, currency = $3 WHERE bizno " PAY_SQL_EQ " $1",
	/* once per second reference: a repeated report is the same charge */
	[PLAN_JOURNAL_SECOND_CHARGE] =
	"INSERT INTO %1$s.pay_journal (bizno, attempt, from_status, to_status, amount, currency, note, actor) "
	"SELECT l.bizno, l.attempt, l.status, l.status, l.amount, l.currency, $2, $3 "
	"FROM %1$s.pay_ledger AS l WHERE l.bizno " PAY_SQL_EQ " $1 AND NOT EXISTS ("
	"SELECT FROM %1$s.pay_journal AS j WHERE j.bizno " PAY_SQL_EQ " $1 AND j.from_status " PAY_SQL_EQ " l.status "
	"AND j.to_status " PAY_SQL_EQ " l.status AND j.note " PAY_SQL_EQ " $2)",
	/* the unique index on (prefix, biz_id), partial, answers it */
	[PLAN_PREFIX_ISSUED] =
	"SELECT FROM %1$s.pay_ledger WHERE prefix " PAY_SQL_EQ " $1 AND biz_id IS NOT NULL LIMIT 1",
	[PLAN_FIND_REFUND] =
	"SELECT status, amount, currency, attempt, bizno FROM %1$s.pay_ledger "
	"WHERE parent " PAY_SQL_EQ " $1 AND refund_key " PAY_SQL_EQ " $2",
	[PLAN_READ_PARENT] =
	"SELECT currency, prefix, biz_id FROM %1$s.pay_ledger WHERE bizno " PAY_SQL_EQ " $1",
	[PLAN_INSERT_REFUND] =
	"INSERT INTO %1$s.pay_ledger (bizno, status, amount, currency, parent, refund_key, note) "
	"VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING",
	[PLAN_INSERT_REFUND_STRICT] =
	"INSERT INTO %1$s.pay_ledger (bizno, status, amount, currency, parent, refund_key, note) "
	"VALUES ($1, $2, $3, $4, $5, $6, $7)",
	[PLAN_FIND_ORDER] =
	"SELECT status, amount, currency, attempt, bizno FROM %1$s.pay_ledger "
	"WHERE prefix " PAY_SQL_EQ " $1 AND biz_id " PAY_SQL_EQ " $2",
	[PLAN_FIND_ARCHIVED] =
	"SELECT status, amount, currency, attempt, bizno, channel_ref, response "
	"FROM %1$s.pay_ledger_archive WHERE bizno " PAY_SQL_EQ " $1",
	[PLAN_FIND_ARCHIVED_ORDER] =
	"SELECT status, amount, currency, attempt, bizno, channel_ref, response "
	"FROM %1$s.pay_ledger_archive WHERE prefix " PAY_SQL_EQ " $1 AND biz_id " PAY_SQL_EQ " $2",
	[PLAN_JOURNAL_SECOND_CHARGE_1_3] =
	"INSERT INTO %1$s.pay_journal (bizno, attempt, from_status, to_status, amount, currency, note, actor, "
	"channel_ref, second_charge) "
	"SELECT l.bizno, l.attempt, l.status, l.status, l.amount, l.currency, $2, $3, $4, $5 "
	"FROM %1$s.pay_ledger AS l WHERE l.bizno " PAY_SQL_EQ " $1 AND NOT EXISTS ("
	"SELECT FROM %1$s.pay_journal AS j WHERE j.bizno " PAY_SQL_EQ " $1 AND j.second_charge " PAY_SQL_EQ " $5 "
	"AND j.channel_ref " PAY_SQL_EQ " $4)",
};

static SPIPlanPtr plans[PLAN_COUNT];
/* the catalog generation the plans were made for */
static uint64 plans_generation = 0;

/*
 * The journal trigger's INSERT, kept apart: it is prepared inside the
 * execution of the ledger's plans (the trigger fires in them), where
 * preparing those again would free a plan that is running.
 */
static SPIPlanPtr journal_insert_plan = NULL;
static uint64 journal_insert_generation = 0;

/*
 * What a plan sets in the columns of a 1.2 ledger: the note of the write
 * (a failure's reason is its note), and the response of a success.
 */
static const char *
ExtraSets(LedgerPlan plan)
{
	switch (plan)
	{
		case PLAN_SET_STATUS:
			return ", note = $3";
		case PLAN_SETTLE:
			return ", note = $4, response = $7";
		default:
			return "";
	}
}

/* Whether the ledger has the columns of 1.2 a write's note and answer go in. */
static bool
LedgerHasNote(const PayCatalog *catalog)
{
	return catalog->ledger_attnums[LEDGER_NOTE] != InvalidAttrNumber &&
		catalog->ledger_attnums[LEDGER_RESPONSE] != InvalidAttrNumber;
}

/*
 * The journal's INSERT of every column the trigger fills that the journal
 * has (an older version's lacks the answer's), in their order; $n is
 * JournalColumn n - 1.
 */
static const char *
JournalInsertQuery(const PayCatalog *catalog)
{
	StringInfoData columns;
	StringInfoData params;

	initStringInfo(&columns);
	initStringInfo(&params);
	for (int i = 0; i < JOURNAL_COLUMNS; i++)
	{
		if (catalog->journal_attnums[i] == InvalidAttrNumber)
			continue;
		appendStringInfo(&columns, "%s%s", columns.len > 0 ? ", " : "",
						 quote_identifier(PayJournalColumnName(i)));
		appendStringInfo(&params, "%s$%d", params.len > 0 ? ", " : "", i + 1);
	}
	return psprintf("INSERT INTO %s.pay_journal (%s) VALUES (%s)",
					catalog->schema, columns.data, params.data);
}

/*
 * Prepare the plans for the catalog as it is now: once per backend, and
 * again whenever the catalog was looked up again.
 */
static void
PreparePlans(const PayCatalog *catalog)
{
	Oid			status = catalog->status_type;
	Oid			argtypes[PLAN_COUNT][7] = {
		[PLAN_LOCK] = {TEXTOID},
		[PLAN_INSERT] = {TEXTOID, status, NUMERICOID, TEXTOID},
		[PLAN_INSERT_STRICT] = {TEXTOID, status, NUMERICOID, TEXTOID},
		[PLAN_SET_STATUS] = {TEXTOID, status, TEXTOID},
		[PLAN_SETTLE] = {TEXTOID, status, TEXTOID, TEXTOID, status, INT4OID, JSONBOID},
		[PLAN_SET_AMOUNT] = {TEXTOID, NUMERICOID, TEXTOID},
		[PLAN_FIND_ORDER] = {TEXTOID, TEXTOID},
		[PLAN_JOURNAL_SECOND_CHARGE] = {TEXTOID, TEXTOID, TEXTOID},
		[PLAN_PREFIX_ISSUED] = {TEXTOID},
		[PLAN_FIND_REFUND] = {TEXTOID, TEXTOID},
		[PLAN_READ_PARENT] = {TEXTOID},
		[PLAN_INSERT_REFUND] = {TEXTOID, status, NUMERICOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID},
		[PLAN_INSERT_REFUND_STRICT] = {TEXTOID, status, NUMERICOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID},
		[PLAN_FIND_ARCHIVED] = {TEXTOID},
		[PLAN_FIND_ARCHIVED_ORDER] = {TEXTOID, TEXTOID},
		[PLAN_JOURNAL_SECOND_CHARGE_1_3] = {TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID},
	};
	static const int nargs[PLAN_COUNT] = {
		[PLAN_LOCK] = 1,[PLAN_INSERT] = 4,[PLAN_INSERT_STRICT] = 4,
		[PLAN_SET_STATUS] = 3,[PLAN_SETTLE] = 7,[PLAN_SET_AMOUNT] = 3,
		[PLAN_FIND_ORDER] = 2,[PLAN_JOURNAL_SECOND_CHARGE] = 3,
		[PLAN_PREFIX_ISSUED] = 1,
		[PLAN_FIND_REFUND] = 2,[PLAN_READ_PARENT] = 1,
		[PLAN_INSERT_REFUND] = 7,[PLAN_INSERT_REFUND_STRICT] = 7,
		[PLAN_FIND_ARCHIVED] = 1,[PLAN_FIND_ARCHIVED_ORDER] = 2,
		[PLAN_JOURNAL_SECOND_CHARGE_1_3] = 5,
	};
	bool		write_note = LedgerHasNote(catalog);

	if (plans_generation == catalog->generation)
		return;

	/* an error part-way leaves the generation old: all are prepared again */
	for (int i = 0; i < PLAN_COUNT; i++)
	{
		SPIPlanPtr	plan;

		if (plans[i] != NULL)
		{
			SPI_freeplan(plans[i]);
			plans[i] = NULL;
		}
		if (i >= FirstRefundPlan && !PayLedgerHasRefunds(catalog))
			continue;			/* the ledger of 1.1: no refunds before the update */
		if (i >= FirstArchivePlan && !OidIsValid(catalog->archive_keys))
			continue;			/* no archive, nor a second charge's columns, before 1.3 */
		plan = SPI_prepare(psprintf(plan_queries[i], catalog->schema,
									write_note ? ExtraSets(i) : ""),
						   nargs[i], argtypes[i]);
		if (plan == NULL)
			elog(ERROR, "SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
		SPI_keepplan(plan);
		plans[i] = plan;
	}
	plans_generation = catalog->generation;
}

/*
 * Raise the error being handled again without its CONTEXT, which would show
 * the API's own SQL, and with a HINT for a serialization failure.
 */
void
PaySqlRethrowForCaller(MemoryContext context)
{
	ErrorData  *error;

	MemoryContextSwitchTo(context);
	error = CopyErrorData();
	FlushErrorState();
	error->context = NULL;
	if (error->sqlerrcode == ERRCODE_T_R_SERIALIZATION_FAILURE && error->hint == NULL)
		error->hint = pstrdup("Another transaction changed this payment meanwhile: retry the whole transaction.");
	ReThrowError(error);
}

/* Run a saved plan; nulls as SPI wants them ('n' or ' '). */
static uint64
RunPlan(const PayCatalog *catalog, LedgerPlan plan, Datum *values, const char *nulls)
{
	MemoryContext context = CurrentMemoryContext;
	int			nest_level = PayPinSearchPath(catalog);
	int			ret = 0;

	PG_TRY();
	{
		PreparePlans(catalog);
		ret = SPI_execute_plan(plans[plan], values, nulls, false, 0);
	}
	PG_CATCH();
	{
		PaySqlRethrowForCaller(context);
	}
	PG_END_TRY();
	AtEOXact_GUC(true, nest_level);
	if (ret < 0)
		elog(ERROR, "SPI_execute_plan failed: %s", SPI_result_code_string(ret));
	return SPI_processed;
}

/*
 * Run a plan that writes a note (NULL for none).  The note is one of the
 * plan's parameters, stored in the row it writes; a ledger of an older
 * version has no note column until ALTER EXTENSION UPDATE, and there the
 * note is given to the journal as idempotent_pay.journal_note for the
 * duration of the statement alone, as a function's SET clause would.
 */
static uint64
RunNotedPlan(const PayCatalog *catalog, LedgerPlan plan, Datum *values, const char *nulls,
			 const char *note)
{
	int			nest_level;
	uint64		processed;

	if (LedgerHasNote(catalog) || note == NULL)
		return RunPlan(catalog, plan, values, nulls);

	nest_level = NewGUCNestLevel();
	(void) set_config_option("idempotent_pay.journal_note", note, PGC_USERSET,
							 PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	processed = RunPlan(catalog, plan, values, nulls);
	AtEOXact_GUC(true, nest_level);
	return processed;
}

/*
 * Read a row through a plan: the row of a bizNo locked (PLAN_LOCK), the
 * row of a business action (PLAN_FIND_ORDER) or of a refund
 * (PLAN_FIND_REFUND); false when there is none.
 */
static bool
ReadRow(const PayCatalog *catalog, LedgerPlan plan, Datum *args, LedgerRow *row)
{
	HeapTuple	tuple;
	TupleDesc	tupdesc;
	bool		isnull;

	if (RunPlan(catalog, plan, args, NULL) == 0)
		return false;

	tuple = SPI_tuptable->vals[0];
	tupdesc = SPI_tuptable->tupdesc;
	row->status = PayStatusFromLabel(catalog,
									 DatumGetObjectId(SPI_getbinval(tuple, tupdesc, 1, &isnull)));
	row->amount = SPI_getbinval(tuple, tupdesc, 2, &row->amount_null);
	row->currency = SPI_getbinval(tuple, tupdesc, 3, &row->currency_null);
	row->attempt = DatumGetInt32(SPI_getbinval(tuple, tupdesc, 4, &isnull));
	if (plan == PLAN_FIND_ORDER || plan == PLAN_FIND_REFUND || plan >= FirstArchivePlan)
		row->bizno = SPI_getbinval(tuple, tupdesc, 5, &isnull);
	if (plan >= FirstArchivePlan)
	{
		row->channel_ref = SPI_getbinval(tuple, tupdesc, 6, &row->channel_ref_null);
		row->response = SPI_getbinval(tuple, tupdesc, 7, &row->response_null);
	}
	return true;
}

/* The row of bizno, locked FOR UPDATE. */
bool
PaySqlLock(const PayCatalog *catalog, Datum bizno, LedgerRow *row)
{
	return ReadRow(catalog, PLAN_LOCK, &bizno, row);
}

/* The row of business action (prefix, biz_id). */
bool
PaySqlFindOrder(const PayCatalog *catalog, Datum prefix, Datum biz_id, LedgerRow *row)
{
	Datum		args[2] = {prefix, biz_id};

	return ReadRow(catalog, PLAN_FIND_ORDER, args, row);
}

/* Whether the ledger holds a bizNo of prefix. */
bool
PaySqlHasPrefix(const PayCatalog *catalog, Datum prefix)
{
	return RunPlan(catalog, PLAN_PREFIX_ISSUED, &prefix, NULL) > 0;
}

/* The archived row of bizno, while its partition is kept. */
bool
PaySqlFindArchived(const PayCatalog *catalog, Datum bizno, LedgerRow *row)
{
	return ReadRow(catalog, PLAN_FIND_ARCHIVED, &bizno, row);
}

/* The archived row of business action (prefix, biz_id), while kept. */
bool
PaySqlFindArchivedOrder(const PayCatalog *catalog, Datum prefix, Datum biz_id, LedgerRow *row)
{
	Datum		args[2] = {prefix, biz_id};

	return ReadRow(catalog, PLAN_FIND_ARCHIVED_ORDER, args, row);
}

/* The row of refund refund_key of payment parent; refunds must exist. */
bool
PaySqlFindRefund(const PayCatalog *catalog, Datum parent, Datum refund_key, LedgerRow *row)
{
	Datum		args[2] = {parent, refund_key};

	return ReadRow(catalog, PLAN_FIND_REFUND, args, row);
}

/*
 * The currency and business action of payment parent, the parts of it a
 * refund takes; order_null when it has none (a key of another system).
 */
bool
PaySqlReadParent(const PayCatalog *catalog, Datum parent, Datum *currency,
					bool *currency_null, Datum *prefix, Datum *biz_id, bool *order_null)
{
	HeapTuple	tuple;
	TupleDesc	tupdesc;
	bool		prefix_null;
	bool		biz_id_null;

	if (RunPlan(catalog, PLAN_READ_PARENT, &parent, NULL) == 0)
		return false;
	tuple = SPI_tuptable->vals[0];
	tupdesc = SPI_tuptable->tupdesc;
	*currency = SPI_getbinval(tuple, tupdesc, 1, currency_null);
	*prefix = SPI_getbinval(tuple, tupdesc, 2, &prefix_null);
	*biz_id = SPI_getbinval(tuple, tupdesc, 3, &biz_id_null);
	*order_null = prefix_null || biz_id_null;
	return true;
}

bool
PaySqlInsert(const PayCatalog *catalog, Datum bizno, PayStatus status,
			 const PaymentAmount *amount, PayInsertConflict conflict)
{
	Datum		args[4] = {bizno, PayStatusGetDatum(catalog, status),
	amount->amount, amount->currency};
	char		nulls[4] = {' ', ' ', amount->has_amount ? ' ' : 'n',
	amount->has_currency ? ' ' : 'n'};

	return RunPlan(catalog, conflict == PAY_INSERT_IF_ABSENT ? PLAN_INSERT : PLAN_INSERT_STRICT,
				   args, nulls) == 1;
}

bool
PaySqlInsertRefund(const PayCatalog *catalog, const PayRefundRow *refund,
					  PayInsertConflict conflict)
{
	Datum		args[7] = {refund->bizno, PayStatusGetDatum(catalog, PAY_INIT), refund->amount,
		refund->currency, refund->parent, refund->refund_key,
	CStringGetTextDatum(refund->note)};
	char		nulls[7] = {' ', ' ', ' ', refund->currency_null ? 'n' : ' ', ' ', ' ', ' '};

	return RunPlan(catalog, conflict == PAY_INSERT_IF_ABSENT ?
				   PLAN_INSERT_REFUND : PLAN_INSERT_REFUND_STRICT, args, nulls) == 1;
}

bool
PaySqlSetStatus(const PayCatalog *catalog, Datum bizno, PayStatus status, const char *note)
{
	Datum		args[3] = {bizno, PayStatusGetDatum(catalog, status),
	note ? CStringGetTextDatum(note) : (Datum) 0};
	char		nulls[3] = {' ', ' ', note ? ' ' : 'n'};

	return RunNotedPlan(catalog, PLAN_SET_STATUS, args, nulls, note) == 1;
}

bool
PaySqlSetAmount(const PayCatalog *catalog, Datum bizno, bool amount_null, Datum amount,
				bool currency_null, Datum currency)
{
	Datum		args[3] = {bizno, amount, currency};
	char		nulls[3] = {' ', amount_null ? 'n' : ' ', currency_null ? 'n' : ' '};

	return RunPlan(catalog, PLAN_SET_AMOUNT, args, nulls) == 1;
}

/* The settling UPDATE; false when no row matched (or a trigger skipped it). */
bool
PaySqlSettle(const PayCatalog *catalog, const PaySettleWrite *settle)
{
	Datum		args[7] = {
		settle->bizno, PayStatusGetDatum(catalog, settle->target), settle->channel_ref,
		settle->last_error, PayStatusGetDatum(catalog, settle->from),
		Int32GetDatum(settle->attempt), settle->response
	};
	char		nulls[7] = {
		' ', ' ', settle->channel_ref_null ? 'n' : ' ', settle->last_error_null ? 'n' : ' ',
		' ', settle->attempt_null ? 'n' : ' ', settle->response_null ? 'n' : ' '
	};

	return RunNotedPlan(catalog, PLAN_SETTLE, args, nulls,
						settle->last_error_null ? NULL :
						TextDatumGetCString(settle->last_error)) == 1;
}

/*
 * Journal a second charge of bizno under the bank's reference channel_ref,
 * once per kind and reference; the actor is the session's role, as the
 * journal trigger names it, not the owner.  Since 1.3 the kind ("reported"
 * or "confirmed") and the reference are columns of the row, which readers
 * go by; the note only tells a person.  1.2's journal has no such columns:
 * there (kind NULL) the note, which names the reference, is the record.
 */
void
PaySqlJournalSecondCharge(const PayCatalog *catalog, Datum bizno, const char *kind,
						  Datum channel_ref, const char *note)
{
	Datum		args[5] = {
		bizno, CStringGetTextDatum(note),
		CStringGetTextDatum(GetUserNameFromId(GetOuterUserId(), false)),
		channel_ref, kind != NULL ? CStringGetTextDatum(kind) : (Datum) 0
	};
	/* the journal's guard lets this row alone pass */
	bool		permit = PayPermitOwnRow();

	PG_TRY();
	{
		RunPlan(catalog, kind != NULL ? PLAN_JOURNAL_SECOND_CHARGE_1_3 : PLAN_JOURNAL_SECOND_CHARGE,
				args, NULL);
	}
	PG_FINALLY();
	{
		PayEndOwnRow(permit);
	}
	PG_END_TRY();
}

/*
 * Record the deletion of ledger row bizno in pay_stats_deletions, as the
 * ledger's owner (the deleting role may not write that table).  Only a row
 * of the card flow names its kind: a ledger of before 1.4, which has none,
 * has a pay_stats_deletions without the column.
 */
void
PaySqlRecordDeletion(const PayCatalog *catalog, Relation ledger, Datum bizno,
					 PayStatus status, bool refund, Datum kind, bool kind_null)
{
	Oid			types[4] = {TEXTOID, catalog->status_type, BOOLOID, TEXTOID};
	Datum		values[4] = {bizno, PayStatusGetDatum(catalog, status), BoolGetDatum(refund), kind};
	PayOwnerContext owner;

	PayBecomeOwner(ledger, &owner);
	SPI_connect();
	if (SPI_execute_with_args(kind_null ?
							  psprintf("INSERT INTO %s.pay_stats_deletions (bizno, status, refund) "
									   "VALUES ($1, $2, $3)", catalog->schema) :
							  psprintf("INSERT INTO %s.pay_stats_deletions (bizno, status, refund, kind) "
									   "VALUES ($1, $2, $3, $4)", catalog->schema),
							  kind_null ? 3 : 4, types, values, NULL, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "could not record the deletion of a ledger row");
	SPI_finish();
	PayRestoreUser(&owner);
}

/*
 * Append one row to the journal by an INSERT statement: defaults, triggers,
 * rules and everything else an INSERT does apply.  It runs as the journal's
 * owner (PayBecomeOwner: the session's role may not insert into it; the
 * actor column still names that role), so what a DBA's trigger or default
 * there resolves does not depend on the caller.  values and nulls are
 * indexed by JournalColumn.
 */
void
PaySqlJournalInsert(const PayCatalog *catalog, Relation journal,
					const Datum *values, const bool *nulls)
{
	char		spi_nulls[JOURNAL_COLUMNS];
	PayOwnerContext owner;
	volatile int ret = 0;
	bool		permit;

	for (int i = 0; i < JOURNAL_COLUMNS; i++)
		spi_nulls[i] = nulls[i] ? 'n' : ' ';

	PayBecomeOwner(journal, &owner);
	SPI_connect();
	if (journal_insert_generation != catalog->generation)
	{
		Oid			types[JOURNAL_COLUMNS];
		SPIPlanPtr	plan;

		if (journal_insert_plan != NULL)
		{
			SPI_freeplan(journal_insert_plan);
			journal_insert_plan = NULL;
		}
		for (int i = 0; i < JOURNAL_COLUMNS; i++)
			types[i] = PayJournalColumnType(catalog, i);
		plan = SPI_prepare(JournalInsertQuery(catalog), JOURNAL_COLUMNS, types);
		if (plan == NULL)
			elog(ERROR, "SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
		SPI_keepplan(plan);
		journal_insert_plan = plan;
		journal_insert_generation = catalog->generation;
	}
	/*
	 * A rule of the DBA's may rewrite the INSERT: that is the DBA's will.
	 * The journal's guard lets this row alone pass.
	 */
	permit = PayPermitOwnRow();
	PG_TRY();
	{
		ret = SPI_execute_plan(journal_insert_plan, (Datum *) values, spi_nulls, false, 0);
	}
	PG_FINALLY();
	{
		PayEndOwnRow(permit);
	}
	PG_END_TRY();
	if (ret != SPI_OK_INSERT && ret != SPI_OK_REWRITTEN)
		elog(ERROR, "SPI_execute_plan failed: %s", SPI_result_code_string(ret));
	SPI_finish();
	PayRestoreUser(&owner);
}
