/*-------------------------------------------------------------------------
 *
 * write_card.c
 *	  The write layer's reads and writes of the card flow's rows: finding an
 *	  authorization by its business action, a step by its key, and recording
 *	  new ones.
 *
 * A row found by its key, and a new row, through the access methods as a
 * payment's are read and written (write_direct.c), where they read and write
 * what the SQL would; else, and a business action's row, by saved plans of
 * SQL statements.  The ledger's bookkeeping holds every one to the
 * rules of the card flow (card.c) either way; their claims and settlements
 * are those of any payment (write.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/builtins.h"

#include "catalog.h"
#include "write.h"
#include "write_direct.h"
#include "write_sql.h"

typedef enum CardPlan
{
	CARD_FIND_ORDER,
	CARD_FIND_STEP,
	CARD_READ_AUTHORIZATION,
	CARD_INSERT,
	CARD_INSERT_STRICT,
	CARD_PLAN_COUNT
} CardPlan;

#define CARD_COLUMNS "bizno, status, amount, currency, kind, expires_in"

static const char *const card_queries[CARD_PLAN_COUNT] = {
	[CARD_FIND_ORDER] =
	"SELECT " CARD_COLUMNS " FROM %1$s.pay_ledger "
	"WHERE prefix " PAY_SQL_EQ " $1 AND biz_id " PAY_SQL_EQ " $2",
	[CARD_FIND_STEP] =
	"SELECT " CARD_COLUMNS " FROM %1$s.pay_ledger "
	"WHERE parent " PAY_SQL_EQ " $1 AND refund_key " PAY_SQL_EQ " $2",
	[CARD_READ_AUTHORIZATION] =
	"SELECT " CARD_COLUMNS ", prefix, biz_id FROM %1$s.pay_ledger WHERE bizno " PAY_SQL_EQ " $1",
	[CARD_INSERT] =
	"INSERT INTO %1$s.pay_ledger (bizno, status, amount, currency, kind, expires_in, parent, refund_key, note) "
	"VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT DO NOTHING",
	[CARD_INSERT_STRICT] =
	"INSERT INTO %1$s.pay_ledger (bizno, status, amount, currency, kind, expires_in, parent, refund_key, note) "
	"VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
};

static SPIPlanPtr card_plans[CARD_PLAN_COUNT];
static uint64 card_plans_generation = 0;

static void
PrepareCardPlans(const PayCatalog *catalog)
{
	Oid			two_texts[2] = {TEXTOID, TEXTOID};
	Oid			insert_types[9] = {TEXTOID, catalog->status_type, NUMERICOID, TEXTOID, TEXTOID,
	INTERVALOID, TEXTOID, TEXTOID, TEXTOID};

	if (card_plans_generation == catalog->generation)
		return;
	for (int i = 0; i < CARD_PLAN_COUNT; i++)
	{
		SPIPlanPtr	plan;
		int			nargs = i == CARD_READ_AUTHORIZATION ? 1 : (i >= CARD_INSERT ? 9 : 2);

		if (card_plans[i] != NULL)
		{
			SPI_freeplan(card_plans[i]);
			card_plans[i] = NULL;
		}
		plan = SPI_prepare(psprintf(card_queries[i], catalog->schema), nargs,
						   i >= CARD_INSERT ? insert_types : two_texts);
		if (plan == NULL)
			elog(ERROR, "SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
		SPI_keepplan(plan);
		card_plans[i] = plan;
	}
	card_plans_generation = catalog->generation;
}

/* Whether the ledger has the card flow's columns (since 1.4). */
bool
PayLedgerHasCardFlow(const PayCatalog *catalog)
{
	return catalog->ledger_attnums[LEDGER_KIND] != InvalidAttrNumber &&
		catalog->ledger_attnums[LEDGER_EXPIRES_IN] != InvalidAttrNumber &&
		catalog->ledger_attnums[LEDGER_EXPIRES_AT] != InvalidAttrNumber &&
		PayLedgerHasRefunds(catalog);
}

static bool
ReadCardRow(const PayCatalog *catalog, CardPlan which, Datum *args, PayCardRow *row)
{
	HeapTuple	tuple;
	TupleDesc	tupdesc;
	bool		isnull;
	int			ret;

	PrepareCardPlans(catalog);
	ret = SPI_execute_plan(card_plans[which], args, NULL, false, 1);
	if (ret != SPI_OK_SELECT)
		elog(ERROR, "SPI_execute_plan failed: %s", SPI_result_code_string(ret));
	if (SPI_processed == 0)
		return false;
	tuple = SPI_tuptable->vals[0];
	tupdesc = SPI_tuptable->tupdesc;
	row->bizno = SPI_getbinval(tuple, tupdesc, 1, &isnull);
	row->status = PayStatusFromLabel(catalog, DatumGetObjectId(SPI_getbinval(tuple, tupdesc, 2, &isnull)));
	row->amount = SPI_getbinval(tuple, tupdesc, 3, &row->amount_null);
	row->currency = SPI_getbinval(tuple, tupdesc, 4, &row->currency_null);
	row->kind = SPI_getbinval(tuple, tupdesc, 5, &row->kind_null);
	row->expires_in = SPI_getbinval(tuple, tupdesc, 6, &row->expires_in_null);
	row->order_null = true;
	if (which == CARD_READ_AUTHORIZATION)
	{
		bool		prefix_null;

		row->prefix = SPI_getbinval(tuple, tupdesc, 7, &prefix_null);
		row->biz_id = SPI_getbinval(tuple, tupdesc, 8, &row->order_null);
		row->order_null = row->order_null || prefix_null;
	}
	return true;
}

/* The row of business action (prefix, biz_id); false when there is none. */
bool
PayLedgerFindCardOrder(const PayCatalog *catalog, Datum prefix, Datum biz_id, PayCardRow *row)
{
	Datum		args[2] = {prefix, biz_id};

	return ReadCardRow(catalog, CARD_FIND_ORDER, args, row);
}

/*
 * The step of authorization parent under key; false when there is none.
 * Through the access methods where they read what the SQL would.
 */
bool
PayLedgerFindCardStep(FunctionCallInfo fcinfo, const PayCatalog *catalog, Datum parent,
					  Datum key, PayCardRow *row)
{
	Datum		args[2] = {parent, key};
	bool		found;

	if (PayDirectReadCardRow(fcinfo, parent, true, key, row, &found))
		return found;
	return ReadCardRow(catalog, CARD_FIND_STEP, args, row);
}

/*
 * The row of bizno, with its business action; false when there is none.
 * Through the access methods where they read what the SQL would.
 */
bool
PayLedgerReadCardRow(FunctionCallInfo fcinfo, const PayCatalog *catalog, Datum bizno,
					 PayCardRow *row)
{
	bool		found;

	if (PayDirectReadCardRow(fcinfo, bizno, false, (Datum) 0, row, &found))
		return found;
	return ReadCardRow(catalog, CARD_READ_AUTHORIZATION, &bizno, row);
}

/*
 * Insert a new row of the card flow as INIT: an authorization (parent
 * NULL) or a step.  false when a unique key of the new row is taken and
 * conflict is PAY_INSERT_IF_ABSENT.  That insert goes through the access
 * methods, as a new payment's does, where write_direct_policy.c allows it;
 * the strict one, after a conflict, by SQL, which names the index.
 */
bool
PayLedgerInsertCard(FunctionCallInfo fcinfo, const PayCatalog *catalog,
					const PayCardInsert *insert, PayInsertConflict conflict)
{
	Datum		args[9] = {
		insert->bizno, PayStatusGetDatum(catalog, PAY_INIT), insert->amount, insert->currency,
		CStringGetTextDatum(insert->kind), insert->expires_in, insert->parent, insert->key,
		CStringGetTextDatum(insert->note)
	};
	char		nulls[9] = {
		' ', ' ', insert->amount_null ? 'n' : ' ', insert->currency_null ? 'n' : ' ', ' ',
		insert->expires_in_null ? 'n' : ' ',
		insert->parent_null ? 'n' : ' ',
		insert->parent_null ? 'n' : ' ',
		' '
	};
	MemoryContext context = CurrentMemoryContext;
	int			ret = 0;
	bool		direct = false;
	bool		inserted = false;

	/* a refusal of the bookkeeping reaches the caller without this INSERT as its context */
	PG_TRY();
	{
		direct = conflict == PAY_INSERT_IF_ABSENT && PayDirectInsertCard(fcinfo, insert, &inserted);
		if (!direct)
		{
			PrepareCardPlans(catalog);
			ret = SPI_execute_plan(card_plans[conflict == PAY_INSERT_IF_ABSENT ? CARD_INSERT : CARD_INSERT_STRICT],
								   args, nulls, false, 0);
		}
	}
	PG_CATCH();
	{
		PaySqlRethrowForCaller(context);
	}
	PG_END_TRY();
	if (direct)
		return inserted;
	if (ret != SPI_OK_INSERT)
		elog(ERROR, "SPI_execute_plan failed: %s", SPI_result_code_string(ret));
	return SPI_processed == 1;
}
