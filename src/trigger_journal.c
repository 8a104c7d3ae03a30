/*-------------------------------------------------------------------------
 *
 * trigger_journal.c
 *	  pay_ledger_journal(), the ledger's AFTER trigger: one journal row per
 *	  transition and per amount change.
 *
 * pay_ledger_journal() (AFTER INSERT OR UPDATE) appends one journal row per
 * transition and per amount change (an UPDATE that changes none of status,
 * amount and currency is skipped), whoever wrote the ledger row -- the API
 * or a raw statement -- so the latest journal entry of a bizNo always names
 * its status, and the entry into SUCCESS the answer: the reference and a
 * digest of the response.  AFTER DELETE (of an INIT or FAILED row, or of a
 * settled one pay_archive moved into the archive: all the guard lets go) it records
 * the deletion for pay_stats' counts, which the journal alone would go on
 * counting as a payment.  The note comes with the row written (the ledger's note
 * column, set by the API or by hand), else from idempotent_pay.journal_note.
 *
 * While the journal has exactly the columns the trigger fills, of exactly
 * the types it fills them with, and nothing else an INSERT would run
 * (write_direct_policy.c decides), a row goes straight into its heap and
 * indexes with its NOT NULL and CHECK constraints checked, as logical
 * replication's apply does, without planning a statement per row
 * (PayJournalAppend chooses).  Otherwise -- a DBA added a
 * column or a trigger -- it is inserted by an SQL statement, as the
 * journal's owner, so the executor does everything it does for any INSERT.
 *
 * When idempotent_pay.notify_channel is set, every transition is also
 * announced with NOTIFY, which PostgreSQL delivers at commit, so listeners
 * hear only of transitions that happened.
 *
 * It does not fire under session_replication_role = replica, and writes
 * nothing for a row a restore of pg_dump's output inserts (PayRestoring):
 * a replica or a restore receives the journal as it was.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/table.h"
#include "access/xact.h"
#include "commands/async.h"
#include "commands/sequence.h"
#include "commands/trigger.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/rel.h"
#include "utils/timestamp.h"
#include "utils/xid8.h"

#include "catalog.h"
#include "machine.h"
#include "settings.h"
#include "trigger_common.h"
#include "triggers.h"
#include "write.h"

/* The name of the role last journaled as actor. */
static Oid	actor_role = InvalidOid;
static char actor_name[NAMEDATALEN];

PG_FUNCTION_INFO_V1(pay_ledger_journal);

static const char *
ActorName(void)
{
	Oid			role = GetOuterUserId();

	if (role != actor_role)
	{
		strlcpy(actor_name, GetUserNameFromId(role, false), NAMEDATALEN);
		actor_role = role;
	}
	return actor_name;
}

/*
 * Whether an UPDATE of a ledger row changes what the journal records: its
 * status, amount or currency.
 */
static bool
JournaledChange(const PayCatalog *catalog, Relation rel, const PayLedgerValues *old,
				const PayLedgerValues *new)
{
	const AttrNumber *col = catalog->ledger_attnums;

	return !PayLedgerValueUnchanged(rel, old, new, col[LEDGER_STATUS]) ||
		!PayLedgerValueUnchanged(rel, old, new, col[LEDGER_AMOUNT]) ||
		!PayLedgerValueUnchanged(rel, old, new, col[LEDGER_CURRENCY]);
}

/*
 * NOTIFY the transition as JSON, with the payment a refund pays back or the
 * authorization a step belongs to (parent NULL for a payment), and the
 * card flow's kind of the row (since 1.4; absent for a payment or refund).
 * Keys hold only [A-Za-z0-9_.:-], so they need no escaping; a kind is
 * escaped, a raw write in replica mode may bring any.
 */
static void
NotifyTransition(const char *bizno, int from, PayStatus to, int32 attempt,
				 const char *parent, const char *kind)
{
	char	   *from_json = from == PAY_NEW_ROW ? "null" :
		psprintf("\"%s\"", PayStatusName(from));
	StringInfoData kind_json;

	initStringInfo(&kind_json);
	if (kind)
	{
		appendStringInfoString(&kind_json, ", \"kind\": ");
		escape_json(&kind_json, kind);
	}
	Async_Notify(pay_notify_channel,
				 psprintf("{\"bizno\": \"%s\", \"from\": %s, \"to\": \"%s\", \"attempt\": %d%s%s%s%s}",
						  bizno, from_json, PayStatusName(to), attempt,
						  parent ? ", \"parent\": \"" : "", parent ? parent : "",
						  parent ? "\"" : "", kind_json.data));
}

/*
 * pay_ledger_journal() returns trigger
 */
Datum
pay_ledger_journal(PG_FUNCTION_ARGS)
{
	const PayCatalog *catalog = PayCheckLedgerTrigger(fcinfo, "pay_ledger_journal()",
												   TRIGGER_EVENT_AFTER,
												   PAY_ON_INSERT | PAY_ON_UPDATE | PAY_ON_DELETE);
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	Relation	rel = trigdata->tg_relation;
	bool		is_update = TRIGGER_FIRED_BY_UPDATE(trigdata->tg_event);
	PayLedgerValues row;
	PayLedgerValues old;
	Relation	journal;
	const AttrNumber *col;
	Datum		values[JOURNAL_COLUMNS];
	bool		nulls[JOURNAL_COLUMNS];
	int			from = PAY_NEW_ROW;
	PayStatus	to;
	bool		isnull;
	Datum		bizno;

	if (!is_update && !TRIGGER_FIRED_BY_DELETE(trigdata->tg_event) && PayRestoring())
		return PointerGetDatum(NULL);	/* the journal arrives with the data */
	PayDeformLedgerRow(rel, is_update ? trigdata->tg_newtuple : trigdata->tg_trigtuple, &row);
	if (TRIGGER_FIRED_BY_DELETE(trigdata->tg_event))
	{
		Datum		kind = (Datum) 0;
		bool		kind_null = true;

		col = catalog->ledger_attnums;
		isnull = col[LEDGER_PARENT] == InvalidAttrNumber ||
			PayLedgerValueIsNull(&row, col[LEDGER_PARENT]);
		if (col[LEDGER_KIND] != InvalidAttrNumber)
			kind = PayLedgerValue(&row, col[LEDGER_KIND], &kind_null);
		bizno = PayRequiredValue(rel, &row, col[LEDGER_BIZNO]);
		/* pay_archive records the deletions of the rows it moves, all at once */
		if (!PayArchiveWasMoved(PAY_MOVED_LEDGER_ROW, PayArchiveKeyHash(bizno)))
			PayLedgerRecordDeletion(catalog, rel, bizno, PayLedgerStatus(catalog, rel, &row),
									!isnull, kind, kind_null);
		return PointerGetDatum(NULL);
	}
	if (is_update)
	{
		PayDeformLedgerRow(rel, trigdata->tg_trigtuple, &old);
		if (!JournaledChange(catalog, rel, &old, &row))
			return PointerGetDatum(NULL);
	}
	else
		PayArchiveRefuseArchivedMeanwhile(catalog,
										  PayRequiredValue(rel, &row,
														   catalog->ledger_attnums[LEDGER_BIZNO]));

	/* lock the journal, then read its columns: an ALTER is seen */
	journal = table_open(catalog->journal, RowExclusiveLock);
	catalog = PayCatalogGetTables(fcinfo);
	col = catalog->ledger_attnums;

	to = PayLedgerStatus(catalog, rel, &row);
	if (is_update)
		from = PayLedgerStatus(catalog, rel, &old);

	memset(nulls, false, sizeof(nulls));
	values[JOURNAL_SEQ] = Int64GetDatum(nextval_internal(catalog->journal_sequence,
														 false));
	values[JOURNAL_BIZNO] = PayLedgerValue(&row, col[LEDGER_BIZNO], &isnull);
	values[JOURNAL_ATTEMPT] = PayLedgerValue(&row, col[LEDGER_ATTEMPT], &isnull);
	nulls[JOURNAL_FROM] = from == PAY_NEW_ROW;
	values[JOURNAL_FROM] = nulls[JOURNAL_FROM] ? (Datum) 0 : PayStatusGetDatum(catalog, from);
	values[JOURNAL_TO] = PayStatusGetDatum(catalog, to);
	values[JOURNAL_AMOUNT] = PayLedgerValue(&row, col[LEDGER_AMOUNT], &nulls[JOURNAL_AMOUNT]);
	values[JOURNAL_CURRENCY] = PayLedgerValue(&row, col[LEDGER_CURRENCY], &nulls[JOURNAL_CURRENCY]);
	values[JOURNAL_AT] = TimestampTzGetDatum(GetCurrentTransactionStartTimestamp());
	values[JOURNAL_TXID] = FullTransactionIdGetDatum(GetTopFullTransactionId());
	values[JOURNAL_ACTOR] = CStringGetTextDatum(ActorName());

	/* the note of this write, else the session's, else what changed */
	nulls[JOURNAL_NOTE] = true;
	if (col[LEDGER_NOTE] != InvalidAttrNumber)
		values[JOURNAL_NOTE] = PayLedgerValue(&row, col[LEDGER_NOTE], &nulls[JOURNAL_NOTE]);
	if (nulls[JOURNAL_NOTE] && pay_journal_note != NULL && pay_journal_note[0] != '\0')
	{
		values[JOURNAL_NOTE] = CStringGetTextDatum(pay_journal_note);
		nulls[JOURNAL_NOTE] = false;
	}
	if (nulls[JOURNAL_NOTE] && from == (int) to)
	{
		values[JOURNAL_NOTE] = CStringGetTextDatum("amount or currency changed");
		nulls[JOURNAL_NOTE] = false;
	}

	/*
	 * The step into SUCCESS records the answer it settled with, which the
	 * ledger keeps from then on and pay_verify compares: the reference, and
	 * PostgreSQL's hash of the response (jsonb_hash_extended, seed 0, which
	 * pg_upgrade keeps: hash partitions rely on it).  Since 1.4, whose
	 * journal has response_digest; one hash per payment.
	 */
	nulls[JOURNAL_CHANNEL_REF] = true;
	nulls[JOURNAL_RESPONSE_DIGEST] = true;
	if (to == PAY_SUCCESS && from != PAY_SUCCESS &&
		catalog->journal_attnums[JOURNAL_RESPONSE_DIGEST] != InvalidAttrNumber)
	{
		values[JOURNAL_CHANNEL_REF] = PayLedgerValue(&row, col[LEDGER_CHANNEL_REF],
													 &nulls[JOURNAL_CHANNEL_REF]);
		if (col[LEDGER_RESPONSE] != InvalidAttrNumber &&
			!PayLedgerValueIsNull(&row, col[LEDGER_RESPONSE]))
		{
			values[JOURNAL_RESPONSE_DIGEST] =
				DirectFunctionCall2(jsonb_hash_extended,
									PayLedgerValue(&row, col[LEDGER_RESPONSE], &isnull),
									Int64GetDatum(0));
			nulls[JOURNAL_RESPONSE_DIGEST] = false;
		}
	}

	PayJournalAppend(catalog, journal, values, nulls);
	table_close(journal, NoLock);

	if (from != (int) to && pay_notify_channel != NULL && pay_notify_channel[0] != '\0')
	{
		Datum		parent = (Datum) 0;
		Datum		kind = (Datum) 0;
		bool		kind_null = true;

		isnull = true;
		if (col[LEDGER_PARENT] != InvalidAttrNumber)
			parent = PayLedgerValue(&row, col[LEDGER_PARENT], &isnull);
		if (col[LEDGER_KIND] != InvalidAttrNumber)
			kind = PayLedgerValue(&row, col[LEDGER_KIND], &kind_null);
		NotifyTransition(TextDatumGetCString(values[JOURNAL_BIZNO]), from, to,
						 DatumGetInt32(values[JOURNAL_ATTEMPT]),
						 isnull ? NULL : TextDatumGetCString(parent),
						 kind_null ? NULL : TextDatumGetCString(kind));
	}

	return PointerGetDatum(NULL);
}

