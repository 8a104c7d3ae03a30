/*-------------------------------------------------------------------------
 *
 * api_lookup.c
 *	  Reading a payment: pay_get by its bizNo, pay_find by its business
 *	  action.
 *
 * 1.3's pay_get and pay_find are SQL that reads the ledger alone: a payment
 * pay_archive moved out, and a mistyped bizNo, were "no row" -- which a
 * caller checking before it pays reads as "not paid".  Since 1.4 "no row"
 * means that no payment has the key or the business action:
 *
 *	- the ledger's row, when it has one: the one read a live payment costs,
 *	  as before;
 *	- else, a key shaped like a bizNo whose check character fails is 22P02:
 *	  no payment can have it, the caller mistyped it;
 *	- else, when pay_archive_keys holds the payment's hash (the lookup the
 *	  claim makes, write_archive.c), its archived row, with the ledger's
 *	  columns, while its month is kept; 55000 pay_archived once the month is
 *	  dropped, or when the business action was archived under another
 *	  bizNo.
 *
 * Every read is under the snapshot of the query that calls the function, as
 * in a STABLE SQL function: pay_archive deletes the ledger's row and
 * inserts the hash and the archived row in one transaction, so that the
 * snapshot sees one or the others, never neither.  Both functions run as the
 * extension owner (SECURITY DEFINER, with search_path pinned by their SET
 * clause), who alone reads the archive.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/table.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/snapmgr.h"

#include "api.h"
#include "bizno_format.h"
#include "catalog.h"
#include "reason.h"
#include "write.h"

PG_FUNCTION_INFO_V1(pay_get_1_4);
PG_FUNCTION_INFO_V1(pay_find_1_4);

/* The reads, each returning one column: the row as a pay_ledger. */
typedef enum LookupPlan
{
	LOOKUP_LEDGER,
	LOOKUP_LEDGER_ORDER,
	LOOKUP_ARCHIVE,
	LOOKUP_ARCHIVE_ORDER,
	LOOKUP_PLANS
} LookupPlan;

/*
 * %1$s is the quoted schema; %2$s the archive's columns named as the
 * ledger's, in the ledger's order (ArchiveColumns).  A refund is found by
 * its bizNo, never by a business action.
 */
static const char *const lookup_queries[LOOKUP_PLANS] = {
	[LOOKUP_LEDGER] =
	"SELECT l FROM %1$s.pay_ledger AS l WHERE l.bizno " PAY_SQL_EQ " $1",
	[LOOKUP_LEDGER_ORDER] =
	"SELECT l FROM %1$s.pay_ledger AS l "
	"WHERE l.prefix " PAY_SQL_EQ " $1 AND l.biz_id " PAY_SQL_EQ " $2 AND l.parent IS NULL",
	[LOOKUP_ARCHIVE] =
	"SELECT ROW(%2$s)::%1$s.pay_ledger FROM %1$s.pay_ledger_archive AS a WHERE a.bizno " PAY_SQL_EQ " $1",
	[LOOKUP_ARCHIVE_ORDER] =
	"SELECT ROW(%2$s)::%1$s.pay_ledger FROM %1$s.pay_ledger_archive AS a "
	"WHERE a.prefix " PAY_SQL_EQ " $1 AND a.biz_id " PAY_SQL_EQ " $2 AND a.parent IS NULL",
};

static SPIPlanPtr lookup_plans[LOOKUP_PLANS];
/* the catalog generation the plans were made for */
static uint64 lookup_generation = 0;

/*
 * The archive's columns of the ledger's names, a.bizno, a.prefix, ...; NULL
 * for those the archive does not keep.
 */
static char *
ArchiveColumns(const PayCatalog *catalog)
{
	Relation	ledger = table_open(catalog->ledger, AccessShareLock);
	TupleDesc	columns = RelationGetDescr(ledger);
	StringInfoData list;

	initStringInfo(&list);
	for (int i = 0; i < columns->natts; i++)
	{
		Form_pg_attribute column = TupleDescAttr(columns, i);

		if (column->attisdropped)
			continue;
		/* a column the archive does not keep (the card flow's) reads NULL */
		if (get_attnum(catalog->ledger_archive, NameStr(column->attname)) == InvalidAttrNumber)
			appendStringInfo(&list, "%sNULL::%s", list.len > 0 ? ", " : "",
							 format_type_be_qualified(column->atttypid));
		else
			appendStringInfo(&list, "%sa.%s", list.len > 0 ? ", " : "",
							 quote_identifier(NameStr(column->attname)));
	}
	table_close(ledger, NoLock);	/* held to the end, as a SELECT holds it */
	return list.data;
}

/*
 * The saved plan of a read for the catalog as it is now, prepared at its
 * first use: a read of the ledger never touches the archive, not even to
 * be planned, so that it never waits for a pay_archive creating a month's
 * partition (which locks pay_ledger_archive until it commits).  A new
 * catalog generation forgets them all.
 */
static SPIPlanPtr
LookupPlanFor(const PayCatalog *catalog, LookupPlan which)
{
	static const int nargs[LOOKUP_PLANS] = {
		[LOOKUP_LEDGER] = 1,[LOOKUP_LEDGER_ORDER] = 2,
		[LOOKUP_ARCHIVE] = 1,[LOOKUP_ARCHIVE_ORDER] = 2,
	};
	Oid			argtypes[2] = {TEXTOID, TEXTOID};
	SPIPlanPtr	plan;

	if (lookup_generation != catalog->generation)
	{
		for (int i = 0; i < LOOKUP_PLANS; i++)
			if (lookup_plans[i] != NULL)
			{
				SPI_freeplan(lookup_plans[i]);
				lookup_plans[i] = NULL;
			}
		lookup_generation = catalog->generation;
	}
	if (lookup_plans[which] != NULL)
		return lookup_plans[which];

	plan = SPI_prepare(psprintf(lookup_queries[which], catalog->schema,
								which >= LOOKUP_ARCHIVE ? ArchiveColumns(catalog) : ""),
					   nargs[which], argtypes);
	if (plan == NULL)
		elog(ERROR, "SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
	SPI_keepplan(plan);
	lookup_plans[which] = plan;
	return plan;
}

/*
 * The row a read finds, copied into the memory that was current at
 * SPI_connect; false when there is none.  Read-only: under the active
 * snapshot, the calling query's.
 */
static bool
ReadRow(const PayCatalog *catalog, LookupPlan plan, Datum *args, Datum *row)
{
	bool		isnull;
	int			ret;

	ret = SPI_execute_plan(LookupPlanFor(catalog, plan), args, NULL, true, 1);
	if (ret != SPI_OK_SELECT)
		elog(ERROR, "SPI_execute_plan failed: %s", SPI_result_code_string(ret));
	if (SPI_processed == 0)
		return false;
	/* a whole row, or ROW(...): never NULL */
	*row = SPI_datumTransfer(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull),
							 false, -1);
	return true;
}

/* 22P02: a key in the bizNo's format whose check character fails. */
static void
RaiseMistyped(Datum bizno)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
			 errmsg("invalid check character for bizNo \"%s\"", TextDatumGetCString(bizno)),
			 errdetail("The bizNo does not check out: a character was mistyped or two neighbouring characters were swapped. No payment has it."),
			 errhint("Look the payment up by its bizNo exactly as it was issued, or by its business action with pay_find.")));
}

/* 55000: the payment of bizno was archived, and its month dropped. */
static void
RaiseArchiveDropped(const char *payment)
{
	ereport(ERROR,
			(errmsg("%s was archived", payment),
			 errdetail("Its month of the archive was dropped; only the fact that it was archived is kept."),
			 PayReason(PAY_REASON_ARCHIVED)));
}

/*
 * The archived row of bizno, which the ledger does not have: true with it
 * while its month is kept; false when it was never archived.  Refused
 * (55000) once the month is dropped, and when the payment's business
 * action was archived under another bizNo.
 */
static bool
ArchivedPayment(const PayCatalog *catalog, Datum bizno, Datum *row)
{
	text	   *key = DatumGetTextPP(bizno);
	BiznoParts	parts;
	char		expected_check;
	BiznoParseResult parsed = bizno_parse(VARDATA_ANY(key), VARSIZE_ANY_EXHDR(key),
										  &parts, &expected_check);

	if (parsed == BIZNO_BAD_CHECK || parsed == BIZNO_UNISSUED_CHECK)
		RaiseMistyped(bizno);
	if (!PayArchiveHoldsAsOf(catalog, PayArchiveIdentityHash(bizno), GetActiveSnapshot()))
		return false;
	if (ReadRow(catalog, LOOKUP_ARCHIVE, &bizno, row))
		return true;
	if (parsed == BIZNO_VALID)
	{
		Datum		order[2] = {
			PointerGetDatum(cstring_to_text_with_len(parts.prefix, parts.prefix_len)),
			PointerGetDatum(cstring_to_text_with_len(parts.biz_id, parts.biz_id_len))
		};
		Datum		other;
		bool		isnull;

		if (ReadRow(catalog, LOOKUP_ARCHIVE_ORDER, order, &other))
			ereport(ERROR,
					(errmsg("the business action of %s was archived under bizNo %s",
							TextDatumGetCString(bizno),
							TextDatumGetCString(GetAttributeByNum(DatumGetHeapTupleHeader(other),
																  catalog->ledger_attnums[LEDGER_BIZNO],
																  &isnull))),
					 errdetail("No payment has bizNo %s: one business action has one bizNo.",
							   TextDatumGetCString(bizno)),
					 PayReason(PAY_REASON_ARCHIVED)));
	}
	RaiseArchiveDropped(psprintf("payment %s", TextDatumGetCString(bizno)));
	pg_unreachable();
}

/* The same for business action (prefix, biz_id). */
static bool
ArchivedOrder(const PayCatalog *catalog, Datum *order, Datum *row)
{
	if (!PayArchiveHoldsAsOf(catalog, PayArchiveOrderHash(order[0], order[1]), GetActiveSnapshot()))
		return false;
	if (ReadRow(catalog, LOOKUP_ARCHIVE_ORDER, order, row))
		return true;
	RaiseArchiveDropped(psprintf("business action %s %s", TextDatumGetCString(order[0]),
								 TextDatumGetCString(order[1])));
	pg_unreachable();
}

/*
 * Return the row the first call found into the function's memory
 * (user_fctx, NULL for none), then end the set.
 */
static Datum
ReturnFound(FunctionCallInfo fcinfo)
{
	FuncCallContext *funcctx = SRF_PERCALL_SETUP();

	if (funcctx->user_fctx != NULL)
	{
		Datum		row = PointerGetDatum(funcctx->user_fctx);

		funcctx->user_fctx = NULL;
		SRF_RETURN_NEXT(funcctx, row);
	}
	SRF_RETURN_DONE(funcctx);
}

/*
 * pay_get(bizno text) returns setof pay_ledger: the ledger's row, else the
 * archive's.
 */
Datum
pay_get_1_4(PG_FUNCTION_ARGS)
{
	if (SRF_IS_FIRSTCALL())
	{
		FuncCallContext *funcctx = SRF_FIRSTCALL_INIT();
		MemoryContext caller = MemoryContextSwitchTo(funcctx->multi_call_memory_ctx);
		const PayCatalog *catalog = PayCatalogGetTables(fcinfo);
		Datum		bizno = PG_GETARG_DATUM(0);
		Datum		row;

		SPI_connect();
		if (ReadRow(catalog, LOOKUP_LEDGER, &bizno, &row) ||
			ArchivedPayment(catalog, bizno, &row))
			funcctx->user_fctx = DatumGetPointer(row);
		SPI_finish();
		MemoryContextSwitchTo(caller);
	}
	return ReturnFound(fcinfo);
}

/*
 * pay_find(prefix text, biz_id text) returns setof pay_ledger: the payment
 * of the business action, from the ledger, else from the archive.
 */
Datum
pay_find_1_4(PG_FUNCTION_ARGS)
{
	if (SRF_IS_FIRSTCALL())
	{
		FuncCallContext *funcctx = SRF_FIRSTCALL_INIT();
		MemoryContext caller = MemoryContextSwitchTo(funcctx->multi_call_memory_ctx);
		const PayCatalog *catalog = PayCatalogGetTables(fcinfo);
		Datum		order[2] = {PG_GETARG_DATUM(0), PG_GETARG_DATUM(1)};
		Datum		row;

		SPI_connect();
		if (ReadRow(catalog, LOOKUP_LEDGER_ORDER, order, &row) ||
			ArchivedOrder(catalog, order, &row))
			funcctx->user_fctx = DatumGetPointer(row);
		SPI_finish();
		MemoryContextSwitchTo(caller);
	}
	return ReturnFound(fcinfo);
}
