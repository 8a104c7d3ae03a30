/*-------------------------------------------------------------------------
 *
 * trigger_archive.c
 *	  pay_archive_moved(): the archive tables' trigger, which notes each
 *	  row the archive receives so that the guard lets the same transaction
 *	  delete it from the ledger or the journal.
 *
 * Installed BEFORE INSERT FOR EACH ROW, ENABLE ALWAYS (a BEFORE trigger
 * queues nothing for the end of the statement), on
 * pay_ledger_archive (argument 'ledger') and pay_journal_archive
 * ('journal'), and so on each of their partitions.  It fires wherever rows
 * arrive in the archive: in pay_archive, and in a logical replica applying
 * pay_archive's transaction, whose deletions from the ledger and the
 * journal then pass the guard as they did on the publisher.  A restore
 * of pg_dump's output deletes nothing: it notes nothing.  pay_guard()
 * without arguments keeps the archive append-only besides: its rows are
 * never updated or deleted one by one; a month goes as a whole, with DROP
 * TABLE of its partitions.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "commands/trigger.h"
#include "utils/rel.h"

#include "catalog.h"
#include "trigger_common.h"
#include "triggers.h"
#include "write.h"

PG_FUNCTION_INFO_V1(pay_archive_moved);

typedef struct MovedConfig
{
	PayArchiveMove kind;
	AttrNumber	key_attnum;		/* bizno, or seq */
} MovedConfig;

static MovedConfig *
BuildMovedConfig(FunctionCallInfo fcinfo, TriggerData *trigdata)
{
	Trigger    *trigger = trigdata->tg_trigger;
	MovedConfig *config = MemoryContextAllocZero(fcinfo->flinfo->fn_mcxt, sizeof(MovedConfig));
	const char *column;

	if (trigger->tgnargs != 1 ||
		(strcmp(trigger->tgargs[0], "ledger") != 0 && strcmp(trigger->tgargs[0], "journal") != 0))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("pay_archive_moved() takes one argument, 'ledger' or 'journal'")));
	config->kind = strcmp(trigger->tgargs[0], "ledger") == 0 ?
		PAY_MOVED_LEDGER_ROW : PAY_MOVED_JOURNAL_ROW;
	column = config->kind == PAY_MOVED_LEDGER_ROW ? "bizno" : "seq";
	config->key_attnum = PayColumnNumber(trigdata->tg_relation, column);
	return config;
}

/*
 * pay_archive_moved() returns trigger
 */
Datum
pay_archive_moved(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	MovedConfig *config;
	HeapTuple	tuple;
	Datum		key;
	bool		isnull;

	PayCheckTriggerProtocol(fcinfo, "pay_archive_moved()", TRIGGER_EVENT_BEFORE,
							PAY_ON_INSERT, false);
	config = fcinfo->flinfo->fn_extra;
	if (config == NULL)
		fcinfo->flinfo->fn_extra = config = BuildMovedConfig(fcinfo, trigdata);

	tuple = trigdata->tg_trigtuple;
	if (PayRestoring())
		return PointerGetDatum(tuple);
	key = heap_getattr(tuple, config->key_attnum, RelationGetDescr(trigdata->tg_relation),
					   &isnull);
	if (!isnull)
		PayArchiveNoteMoved(config->kind,
							config->kind == PAY_MOVED_LEDGER_ROW ?
							PayArchiveKeyHash(key) : (uint64) DatumGetInt64(key));
	return PointerGetDatum(tuple);
}
