/*-------------------------------------------------------------------------
 *
 * lifecycle.c
 *	  The extension's life in a database: DROP EXTENSION idempotent_pay,
 *	  with or without CASCADE, and DROP SCHEMA ... CASCADE of its schema
 *	  are refused while the ledger holds a payment.
 *
 * The ledger is the memory that stops a second charge: dropping it re-opens
 * every old order to PROCEED.  pay_refuse_drop() is an event trigger on
 * ddl_command_start (ENABLE ALWAYS), so it sees the DROP before anything is
 * dropped and counts the payments that would go.  README.md shows the
 * deliberate way out: archive, empty the tables as a superuser, then drop.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "commands/event_trigger.h"
#include "executor/spi.h"
#include "nodes/parsenodes.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

#include "catalog.h"
#include "lifecycle.h"

#define EXTENSION_NAME "idempotent_pay"

PG_FUNCTION_INFO_V1(pay_refuse_drop);

/* Whether stmt drops the extension, or its schema with everything in it. */
static bool
DropsTheLedger(DropStmt *stmt, const PayCatalog *catalog)
{
	const char *schema = get_namespace_name(catalog->namespace);
	ListCell   *cell;

	if (stmt->removeType != OBJECT_EXTENSION &&
		!(stmt->removeType == OBJECT_SCHEMA && stmt->behavior == DROP_CASCADE))
		return false;

	foreach(cell, stmt->objects)
	{
		const char *name = strVal(lfirst(cell));

		if (strcmp(name, stmt->removeType == OBJECT_EXTENSION ? EXTENSION_NAME : schema) == 0)
			return true;
	}
	return false;
}

static int64
CountPayments(const PayCatalog *catalog)
{
	bool		isnull;
	int64		payments;

	SPI_connect();
	if (SPI_execute(psprintf("SELECT pg_catalog.count(*) FROM %s.pay_ledger", catalog->schema),
					true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not count the payments of pay_ledger");
	payments = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc,
										   1, &isnull));
	SPI_finish();
	return payments;
}

/*
 * pay_refuse_drop() returns event_trigger
 */
Datum
pay_refuse_drop(PG_FUNCTION_ARGS)
{
	EventTriggerData *trigdata = (EventTriggerData *) fcinfo->context;
	const PayCatalog *catalog;
	int64		payments;

	if (!CALLED_AS_EVENT_TRIGGER(fcinfo) || strcmp(trigdata->event, "ddl_command_start") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_EVENT_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("pay_refuse_drop() must be fired as an event trigger on ddl_command_start")));

	if (!IsA(trigdata->parsetree, DropStmt))
		PG_RETURN_VOID();
	catalog = PayCatalogGet(fcinfo);
	if (!DropsTheLedger((DropStmt *) trigdata->parsetree, catalog))
		PG_RETURN_VOID();

	payments = CountPayments(catalog);
	if (payments > 0)
		ereport(ERROR,
				(errcode(ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST),
				 errmsg("cannot drop idempotent_pay: pay_ledger holds " INT64_FORMAT " payment%s",
						payments, payments == 1 ? "" : "s"),
				 errdetail("Dropping the extension drops the ledger and the journal, the record that stops a second charge of every one of them."),
				 errhint("Archive them first (\\copy pay_ledger TO 'pay_ledger.csv' CSV HEADER, the same for pay_journal), "
						 "then empty both tables as a superuser as README.md shows, and drop again.")));
	PG_RETURN_VOID();
}
