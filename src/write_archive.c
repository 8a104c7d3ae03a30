/*-------------------------------------------------------------------------
 *
 * write_archive.c
 *	  What the API and the ledger's triggers ask of the archive: whether a
 *	  key or a business action was archived, and which rows the
 *	  transaction moved into the archive.
 *
 * pay_archive moves settled payments into pay_ledger_archive and
 * pay_journal_archive, and records a 64-bit hash of each archived payment's
 * identity -- its business action (prefix, biz_id) when its key is a bizNo
 * of pay_bizno, else its key -- in pay_archive_keys, which outlives the
 * archive's partitions: a DBA drops those, the hashes stay, and a late
 * retry of an archived payment is refused however late it comes.  The
 * hashes are packed, sorted, in rows of up to 512, each row answering for
 * the hashes from its lo to its hi, the ranges of rows never overlapping,
 * each hash after lo as its distance from lo, all of one width
 * (archive_keys.h).  Finding one is a read of the row that covers it --
 * straight from the heap at the address the backend remembered for the
 * hash, or through a probe of the primary key on lo for the last row at or
 * below it -- and a search of that row.  That lookup is what a new payment
 * pays for the archive: it runs when the key is not in the live ledger,
 * read straight through the heap and index access methods under the
 * snapshot the ledger's probe would take now, so that a payment whose
 * ledger row the probe no longer sees (archived meanwhile, and committed)
 * is seen archived.  The readers, pay_get and pay_find (api_lookup.c), look
 * up under their query's snapshot instead (PayArchiveHoldsAsOf), the one
 * their read of the ledger took.
 *
 * The hash is hashtextextended's with seed 0 over the key's bytes, which
 * SQL computes as pg_catalog.hashtextextended(key COLLATE "C", 0); a
 * business action is hashed as prefix || ' ' || biz_id (no key holds a
 * space, so the two never meet): pay_archive_key_hash in SQL.  Two different keys share a hash with a
 * probability of one in 2^64 per archived key: such a new key would be
 * refused as archived, never charged twice.
 *
 * A settled payment's ledger row and a journal row may be deleted only
 * once the same transaction inserted them into the archive: the archive's
 * trigger notes each row it receives (PayArchiveNoteMoved), the guard asks
 * (PayArchiveWasMoved).  The notes live in the transaction's memory and go
 * with it; a subtransaction that rolls back takes every note with it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/itup.h"
#include "access/relation.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_am_d.h"
#include "catalog/pg_type.h"
#include "common/hashfn.h"
#include "executor/tuptable.h"
#include "storage/bufmgr.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

#include "archive_keys.h"
#include "bizno_format.h"
#include "compat.h"
#include "write.h"
#include "write_sql.h"

/* The hash of a key (a bizNo) as pay_archive_keys holds it. */
uint64
PayArchiveKeyHash(Datum key)
{
	text	   *t = DatumGetTextPP(key);

	return DatumGetUInt64(hash_any_extended((unsigned char *) VARDATA_ANY(t),
											VARSIZE_ANY_EXHDR(t), 0));
}

/* The hash of business action (prefix, biz_id): of "prefix biz_id". */
uint64
PayArchiveOrderHash(Datum prefix, Datum biz_id)
{
	text	   *p = DatumGetTextPP(prefix);
	text	   *b = DatumGetTextPP(biz_id);
	int			plen = VARSIZE_ANY_EXHDR(p);
	int			blen = VARSIZE_ANY_EXHDR(b);
	char	   *buf = palloc(plen + 1 + blen);
	uint64		hash;

	memcpy(buf, VARDATA_ANY(p), plen);
	buf[plen] = ' ';
	memcpy(buf + plen + 1, VARDATA_ANY(b), blen);
	hash = DatumGetUInt64(hash_any_extended((unsigned char *) buf, plen + 1 + blen, 0));
	pfree(buf);
	return hash;
}

/* Whether the row of pay_archive_keys from lo, packed as hashes, holds hash. */
static bool
RowHoldsHash(int64 lo, Datum hashes, int64 hash)
{
	bytea	   *packed = DatumGetByteaPP(hashes);
	ArchiveKeysLookup found = archive_keys_find(lo, (const uint8 *) VARDATA_ANY(packed),
												VARSIZE_ANY_EXHDR(packed), hash);

	/* its CHECK constraint keeps such rows out; a DBA may have dropped it */
	if (found == ARCHIVE_KEYS_MALFORMED)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("pay_archive_keys holds a row that is not a list of hashes"),
				 errdetail("The row of lo %lld.", (long long) lo),
				 errhint("Restore pay_archive_keys from the last dump.")));
	return found == ARCHIVE_KEYS_PRESENT;
}

/* 40001: the payment was archived after the transaction's snapshot. */
static void
RaiseArchivedConcurrently(void)
{
	ereport(ERROR,
			(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
			 errmsg("could not serialize access due to a concurrent pay_archive"),
			 errdetail("The payment was archived after this transaction's snapshot was taken."),
			 errhint("Retry the whole transaction: the archive will answer.")));
}

/* 55000: pay_archive_keys' columns or primary key were changed. */
static void
RaiseKeysNotAsCreated(void)
{
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("pay_archive_keys is not as idempotent_pay created it"),
			 errdetail("Its columns must be lo bigint, hi bigint and hashes bytea, its primary key on lo."),
			 errhint("Restore pay_archive_keys from the last dump.")));
}

/* lo bigint, hi bigint, hashes bytea, as the extension made them: read by type */
static void
RequireKeysColumns(Relation keys)
{
	TupleDesc	columns = RelationGetDescr(keys);

	if (columns->natts < 3 || TupleDescAttr(columns, 0)->atttypid != INT8OID ||
		TupleDescAttr(columns, 1)->atttypid != INT8OID ||
		TupleDescAttr(columns, 2)->atttypid != BYTEAOID)
		RaiseKeysNotAsCreated();
}

/* The columns of a tuple of pay_archive_keys: false when one is NULL. */
static bool
ReadKeysRow(HeapTuple tuple, TupleDesc columns, int64 *lo, int64 *hi, Datum *hashes)
{
	bool		lo_null;
	bool		hi_null;
	bool		hashes_null;

	*lo = DatumGetInt64(heap_getattr(tuple, 1, columns, &lo_null));
	*hi = DatumGetInt64(heap_getattr(tuple, 2, columns, &hi_null));
	*hashes = heap_getattr(tuple, 3, columns, &hashes_null);
	return !lo_null && !hi_null && !hashes_null;
}

/*
 * The heap addresses of rows of pay_archive_keys this backend found, by
 * the hashes they answer for: 2^bits slots, slot i for the hashes whose
 * top bits (as unsigned numbers, the sign bit flipped) are i, each the
 * address of a row whose range covered the whole slot, or covered the last
 * hash looked up in it.  A row's range never overlapping another's, a
 * remembered row that is visible to the snapshot and covers the hash is
 * the one that answers for it, whatever was written since: a lookup reads
 * it straight from the heap, without the primary key's descent and scan.
 * A row pay_archive replaced since is not visible, and sends the lookup to
 * the primary key, which remembers the new row.  The cache is per backend,
 * at most 2^17 addresses (768 kB), sized from the table's pages (two rows
 * to a page, some sixteen slots to a row), and forgotten when the table's
 * relcache entry is invalidated (TRUNCATE, VACUUM FULL, pg_repack, and
 * VACUUM's update of its statistics); an address past the table's end,
 * which a VACUUM truncating it leaves until that update, is not read.
 */
#define KEY_ROW_SLOTS_MIN_BITS 10
#define KEY_ROW_SLOTS_MAX_BITS 17

static struct
{
	Oid			relid;			/* pay_archive_keys, or InvalidOid: none */
	int			bits;
	ItemPointerData *slots;		/* invalid: no row remembered */
	bool		callback_registered;
} key_rows = {InvalidOid};

static void
ForgetKeyRows(Datum arg, Oid relid)
{
	if (relid == InvalidOid || relid == key_rows.relid)
		key_rows.relid = InvalidOid;	/* the slots are freed at the next use */
}

static inline uint64
KeyRowSlot(int64 hash)
{
	return archive_keys_ordinal(hash) >> (64 - key_rows.bits);
}

/* Remember the row at tid, covering [lo, hi], found for hash. */
static void
RememberKeyRow(int64 lo, int64 hi, int64 hash, ItemPointer tid)
{
	int			shift = 64 - key_rows.bits;
	uint64		lo_ordinal = archive_keys_ordinal(lo);
	uint64		hi_ordinal = archive_keys_ordinal(hi);
	int64		first = (int64) (lo_ordinal >> shift);
	int64		last = (int64) (hi_ordinal >> shift);

	/* the slots the range covers whole: not those it starts or ends inside */
	if (lo_ordinal != (uint64) first << shift)
		first++;
	if (hi_ordinal + 1 != (uint64) (last + 1) << shift)
		last--;
	for (int64 slot = first; slot <= last; slot++)
		key_rows.slots[slot] = *tid;
	key_rows.slots[KeyRowSlot(hash)] = *tid;
}

/*
 * Fill the slots from the primary key's entries, each row taken to cover
 * the hashes up to the next entry's lo: one pass over the index's leaves,
 * without reading the table, so that a backend's first lookups find their
 * rows remembered.  An entry of a row version since replaced, or not yet
 * visible, is only a guess the lookup's fetch rejects.  Read under
 * SnapshotAny, which takes no predicate locks: a SERIALIZABLE transaction
 * is not made to conflict with every pay_archive by rows it never read.
 * At most twice as many entries as slots: beyond that the rows are
 * remembered as lookups find them.
 */
static void
PreloadKeyRows(Relation keys, Oid pkey_oid)
{
	Relation	pkey = index_open(pkey_oid, AccessShareLock);
	IndexScanDesc scan = PayIndexBeginScan(keys, pkey, SnapshotAny, 0, 0);
	ItemPointer tid = NULL;
	ItemPointerData row_tid;
	int64		row_lo = 0;
	bool		have_row = false;
	uint64		entries = 0;

	scan->xs_want_itup = true;
	index_rescan(scan, NULL, 0, NULL, 0);
	while (entries++ < (UINT64CONST(2) << key_rows.bits) &&
		   (tid = index_getnext_tid(scan, ForwardScanDirection)) != NULL)
	{
		bool		null;
		int64		lo = DatumGetInt64(index_getattr(scan->xs_itup, 1, scan->xs_itupdesc, &null));

		if (null)
			continue;
		if (have_row && lo != row_lo)
			RememberKeyRow(row_lo, lo - 1, row_lo, &row_tid);
		row_lo = lo;
		row_tid = *tid;
		have_row = true;
	}
	if (have_row)
		RememberKeyRow(row_lo, tid != NULL ? row_lo : PG_INT64_MAX, row_lo, &row_tid);
	index_endscan(scan);
	index_close(pkey, NoLock);	/* held to the end, as a SELECT holds it */
}

/* The remembered rows of keys, sized for the table as it is now. */
static bool
KeyRowsFor(const PayCatalog *catalog, Relation keys)
{
	BlockNumber pages;
	int			bits = KEY_ROW_SLOTS_MIN_BITS;

	if (keys->rd_rel->relam != HEAP_TABLE_AM_OID)
		return false;			/* another access method's addresses may move */
	if (key_rows.relid == RelationGetRelid(keys))
		return true;
	if (!key_rows.callback_registered)
	{
		CacheRegisterRelcacheCallback(ForgetKeyRows, (Datum) 0);
		key_rows.callback_registered = true;
	}
	if (key_rows.slots != NULL)
		pfree(key_rows.slots);
	pages = RelationGetNumberOfBlocks(keys);
	while (bits < KEY_ROW_SLOTS_MAX_BITS && ((uint64) 1 << bits) < (uint64) pages * 32)
		bits++;
	key_rows.slots = MemoryContextAllocZero(TopMemoryContext,
											sizeof(ItemPointerData) << bits);
	key_rows.bits = bits;
	key_rows.relid = RelationGetRelid(keys);
	PreloadKeyRows(keys, catalog->archive_keys_pkey);
	return true;
}

/*
 * Whether the row remembered for hash's slot is visible to snapshot and
 * covers hash: then whether it holds hash into *holds.
 */
static bool
RememberedRowAnswers(const PayCatalog *catalog, Relation keys, Snapshot snapshot, int64 hash,
					 bool *holds)
{
	HeapTupleData tuple;
	Buffer		buffer;
	int64		lo;
	int64		hi;
	Datum		hashes;
	bool		answers;

	if (!KeyRowsFor(catalog, keys))
		return false;
	tuple.t_self = key_rows.slots[KeyRowSlot(hash)];
	if (!ItemPointerIsValid(&tuple.t_self) ||
		ItemPointerGetBlockNumber(&tuple.t_self) >= RelationGetNumberOfBlocks(keys) ||
		!heap_fetch(keys, snapshot, &tuple, &buffer, false))
		return false;
	answers = ReadKeysRow(&tuple, RelationGetDescr(keys), &lo, &hi, &hashes) &&
		lo <= hash && hash <= hi;
	if (answers)
		*holds = RowHoldsHash(lo, hashes, hash);
	ReleaseBuffer(buffer);
	return answers;
}

/*
 * How far below hash the row holding it starts, at most, but for rows far
 * wider than the others: eight times the mean distance between two rows'
 * lo, from the row count VACUUM and ANALYZE last recorded.  A backward scan
 * of the primary key reads every item of the leaf page below where it
 * starts before it returns the first; bounded, it stops at the first item
 * below *bound.  false when the table is too small, or never counted, for
 * a bound to spare anything.
 */
static bool
ProbeLowerBound(Relation keys, int64 hash, int64 *bound)
{
	float4		rows = keys->rd_rel->reltuples;
	int64		reach;

	if (rows < 32)
		return false;
	/* at most 2^62: neither the cast nor the subtraction below overflows */
	reach = (int64) (8.0 * 18446744073709551616.0 / rows);
	if (hash < PG_INT64_MIN + reach)
		return false;
	*bound = hash - reach;
	return true;
}

/*
 * The row visible to the active snapshot whose lo is the last at or below
 * hash, and not below *bound unless bound is NULL, into slot.
 */
static bool
FetchLastRowAtOrBelow(Relation keys, Relation pkey, int64 hash, const int64 *bound,
					  TupleTableSlot *slot)
{
	ScanKeyData key[2];
	int			nkeys = 1;
	IndexScanDesc scan;
	bool		found;

	ScanKeyEntryInitialize(&key[0], 0, 1, BTLessEqualStrategyNumber, InvalidOid,
						   InvalidOid, F_INT8LE, Int64GetDatum(hash));
	if (bound != NULL)
		ScanKeyEntryInitialize(&key[nkeys++], 0, 1, BTGreaterEqualStrategyNumber, InvalidOid,
							   InvalidOid, F_INT8GE, Int64GetDatum(*bound));
	scan = PayIndexBeginScan(keys, pkey, GetActiveSnapshot(), nkeys, 0);
	index_rescan(scan, key, nkeys, NULL, 0);
	found = index_getnext_slot(scan, BackwardScanDirection, slot);
	index_endscan(scan);
	return found;
}

/*
 * Whether the row of pay_archive_keys visible to snapshot whose lo is the
 * last at or below hash holds it, read through the primary key: first
 * within the reach a row usually has (ProbeLowerBound), then, only when no
 * row starts there, below it too.  The row found is remembered for hash's
 * slot.
 */
static bool
ProbeKeys(const PayCatalog *catalog, Relation keys, Snapshot snapshot, int64 hash)
{
	Relation	pkey = index_open(catalog->archive_keys_pkey, AccessShareLock);
	TupleTableSlot *slot;
	int64		bound;
	bool		holds = false;

	if (pkey->rd_index->indnkeyatts < 1 || pkey->rd_index->indkey.values[0] != 1)
		RaiseKeysNotAsCreated();
	slot = table_slot_create(keys, NULL);

	PushActiveSnapshot(snapshot);
	if ((ProbeLowerBound(keys, hash, &bound) &&
		 FetchLastRowAtOrBelow(keys, pkey, hash, &bound, slot)) ||
		FetchLastRowAtOrBelow(keys, pkey, hash, NULL, slot))
	{
		bool		should_free;
		HeapTuple	tuple = ExecFetchSlotHeapTuple(slot, false, &should_free);
		int64		lo;
		int64		hi;
		Datum		hashes;

		/*
		 * Searched whatever its hi, as a hash the row holds past it is still
		 * found here; remembered only for a hash its range covers.
		 */
		if (ReadKeysRow(tuple, RelationGetDescr(keys), &lo, &hi, &hashes))
		{
			holds = RowHoldsHash(lo, hashes, hash);
			if (hash <= hi && KeyRowsFor(catalog, keys))
				RememberKeyRow(lo, hi, hash, &slot->tts_tid);
		}
		if (should_free)
			heap_freetuple(tuple);
	}
	PopActiveSnapshot();
	ExecDropSingleTupleTableSlot(slot);
	index_close(pkey, NoLock);	/* held to the end, as a SELECT holds it */
	return holds;
}

/*
 * Whether the row of pay_archive_keys visible to snapshot that answers for
 * hash holds it: the row remembered for it when it still answers, else the
 * one the primary key finds.
 */
static bool
HashVisible(const PayCatalog *catalog, Snapshot snapshot, uint64 hash)
{
	Relation	keys = table_open(catalog->archive_keys, AccessShareLock);
	bool		holds;

	RequireKeysColumns(keys);
	if (!RememberedRowAnswers(catalog, keys, snapshot, (int64) hash, &holds))
		holds = ProbeKeys(catalog, keys, snapshot, (int64) hash);
	table_close(keys, NoLock);	/* held to the end, as a SELECT holds it */
	return holds;
}

/* whether this backend saw a page in pay_archive_keys (ArchiveMayHoldHashes) */
static bool archive_keys_had_pages = false;

/*
 * Whether pay_archive_keys may hold any hash.  A table of no page holds no
 * row, committed or not: all a database that never archived pays for a
 * lookup is the table's size, without a snapshot or an index scan.  Once
 * it has seen a page, the backend stops asking: the lookup answers right
 * either way, and a table that received hashes keeps its pages.
 */
static bool
ArchiveMayHoldHashes(const PayCatalog *catalog)
{
	if (!OidIsValid(catalog->archive_keys))
		return false;			/* an installation of 1.2 or older */
	if (!archive_keys_had_pages)
	{
		Relation	keys = table_open(catalog->archive_keys, AccessShareLock);

		archive_keys_had_pages = RelationGetNumberOfBlocks(keys) > 0;
		table_close(keys, NoLock);	/* held to the end, as a SELECT holds it */
	}
	return archive_keys_had_pages;
}

/*
 * Whether pay_archive_keys holds hash, under the snapshot the ledger's
 * probe would take now.
 *
 * Under REPEATABLE READ and SERIALIZABLE the transaction's snapshot may
 * predate an archive that committed since: its payment is gone from the
 * ledger, its hash invisible.  Looked up past the snapshot, as a unique
 * check looks, such a hash is a concurrent change: the transaction is
 * retried, and then answered from the archive.
 */
static bool
ArchiveHoldsHash(const PayCatalog *catalog, uint64 hash)
{
	if (!ArchiveMayHoldHashes(catalog))
		return false;
	if (HashVisible(catalog, GetTransactionSnapshot(), hash))
		return true;
	if (IsolationUsesXactSnapshot() && HashVisible(catalog, GetLatestSnapshot(), hash))
		RaiseArchivedConcurrently();
	return false;
}

/*
 * The business action a key names, when it is a bizNo of pay_bizno: true,
 * with *prefix and *biz_id.  The parser is the pure one every check of a
 * key uses; a key of another system names none.
 */
static bool
KeyBusinessAction(Datum key, Datum *prefix, Datum *biz_id)
{
	text	   *t = DatumGetTextPP(key);
	BiznoParts	parts;
	char		expected_check;

	if (bizno_parse(VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t), &parts, &expected_check) != BIZNO_VALID)
		return false;
	*prefix = PointerGetDatum(cstring_to_text_with_len(parts.prefix, parts.prefix_len));
	*biz_id = PointerGetDatum(cstring_to_text_with_len(parts.biz_id, parts.biz_id_len));
	return true;
}

/*
 * The hash pay_archive_keys holds for the payment of key: of its business
 * action when the key is a bizNo of pay_bizno -- one business action has
 * one bizNo, and a refund's bizNo is issued under its payment's, so one
 * hash answers for the payment, its refunds and any other bizNo of the
 * same action --, else of the key itself.
 */
uint64
PayArchiveIdentityHash(Datum key)
{
	Datum		prefix;
	Datum		biz_id;

	if (KeyBusinessAction(key, &prefix, &biz_id))
		return PayArchiveOrderHash(prefix, biz_id);
	return PayArchiveKeyHash(key);
}

/*
 * The payment the API found absent from the archive just before inserting
 * its row: the ledger's trigger need not look again for that row.
 */
static uint64 checked_hash;
static bool checked_valid = false;

static void
RememberChecked(uint64 hash)
{
	checked_hash = hash;
	checked_valid = true;
}

/*
 * Whether the payment of bizno was archived: PAY_NOT_ARCHIVED, and the row
 * the API inserts next need not be looked up again; PAY_ARCHIVED_KEPT with
 * the archived row in *row -- of this bizNo, or of the business action
 * under another bizNo --; PAY_ARCHIVED_DROPPED when its month is gone.
 * Call it inside SPI, when the ledger's probe found no row.
 */
PayArchived
PayArchiveFind(const PayCatalog *catalog, Datum bizno, LedgerRow *row)
{
	uint64		hash = PayArchiveIdentityHash(bizno);
	Datum		prefix;
	Datum		biz_id;

	if (!ArchiveHoldsHash(catalog, hash))
	{
		RememberChecked(hash);
		return PAY_NOT_ARCHIVED;
	}
	if (PaySqlFindArchived(catalog, bizno, row) ||
		(KeyBusinessAction(bizno, &prefix, &biz_id) &&
		 PaySqlFindArchivedOrder(catalog, prefix, biz_id, row)))
		return PAY_ARCHIVED_KEPT;
	return PAY_ARCHIVED_DROPPED;
}

/* The same for business action (prefix, biz_id); *row has its bizno. */
PayArchived
PayArchiveFindOrder(const PayCatalog *catalog, Datum prefix, Datum biz_id, LedgerRow *row)
{
	uint64		hash = PayArchiveOrderHash(prefix, biz_id);

	if (!ArchiveHoldsHash(catalog, hash))
	{
		RememberChecked(hash);
		return PAY_NOT_ARCHIVED;
	}
	return PaySqlFindArchivedOrder(catalog, prefix, biz_id, row) ?
		PAY_ARCHIVED_KEPT : PAY_ARCHIVED_DROPPED;
}

/*
 * Whether pay_archive_keys holds hash as snapshot sees it: for the readers
 * (pay_get, pay_find), which read the ledger, the hashes and the archive's
 * rows under the one snapshot of the query that calls them.  pay_archive
 * deletes a payment's ledger row and adds its hash and archived row in one
 * transaction, so that the snapshot sees either the ledger's row or the
 * other two; a reader never writes, and raises no serialization failure.
 */
bool
PayArchiveHoldsAsOf(const PayCatalog *catalog, uint64 hash, Snapshot snapshot)
{
	return ArchiveMayHoldHashes(catalog) && HashVisible(catalog, snapshot, hash);
}

/* Whether the payment of bizno was archived, kept or not. */
bool
PayArchiveHolds(const PayCatalog *catalog, Datum bizno)
{
	return ArchiveHoldsHash(catalog, PayArchiveIdentityHash(bizno));
}

/*
 * A row just inserted for bizno under REPEATABLE READ or SERIALIZABLE, when
 * an archive of its payment committed meanwhile -- the insert waited for
 * the archive's deletion of the old row, and then found no conflict -- is a
 * serialization failure, as a conflict with a row the snapshot cannot see
 * is.  Under READ COMMITTED the claim's probes saw the row or the archive.
 */
void
PayArchiveRefuseArchivedMeanwhile(const PayCatalog *catalog, Datum bizno)
{
	if (IsolationUsesXactSnapshot() && OidIsValid(catalog->archive_keys) &&
		HashVisible(catalog, GetLatestSnapshot(), PayArchiveIdentityHash(bizno)))
		RaiseArchivedConcurrently();
}

/* Forget the payment found absent: the API's insert is over. */
void
PayArchiveForgetChecked(void)
{
	checked_valid = false;
}

/*
 * Whether a new ledger row's payment was archived; the row the API just
 * checked is not looked up again.
 */
bool
PayArchiveHoldsNewRow(const PayCatalog *catalog, Datum bizno)
{
	uint64		hash = PayArchiveIdentityHash(bizno);
	bool		checked = checked_valid && checked_hash == hash;

	checked_valid = false;
	return !checked && ArchiveHoldsHash(catalog, hash);
}

/* The rows this transaction moved into the archive, by kind and key. */
typedef struct MovedRow
{
	uint64		key;			/* the bizNo's hash, or the journal's seq */
	PayArchiveMove kind;
} MovedRow;

static HTAB *moved_rows = NULL;
static bool moved_callbacks_registered = false;

static void
ForgetMovedAtEnd(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT ||
		event == XACT_EVENT_PARALLEL_COMMIT || event == XACT_EVENT_PARALLEL_ABORT ||
		event == XACT_EVENT_PREPARE)
		moved_rows = NULL;		/* its memory goes with the transaction */
}

static void
ForgetMovedOnRollback(SubXactEvent event, SubTransactionId mySubid,
					  SubTransactionId parentSubid, void *arg)
{
	if (event == SUBXACT_EVENT_ABORT_SUB)
		moved_rows = NULL;
}

/* The archive received a row of kind with key, in this transaction. */
void
PayArchiveNoteMoved(PayArchiveMove kind, uint64 key)
{
	MovedRow	entry = {0};
	bool		found;

	if (!moved_callbacks_registered)
	{
		RegisterXactCallback(ForgetMovedAtEnd, NULL);
		RegisterSubXactCallback(ForgetMovedOnRollback, NULL);
		moved_callbacks_registered = true;
	}
	if (moved_rows == NULL)
	{
		HASHCTL		ctl = {0};

		ctl.keysize = sizeof(MovedRow);
		ctl.entrysize = sizeof(MovedRow);
		ctl.hcxt = TopTransactionContext;
		moved_rows = hash_create("idempotent_pay rows moved into the archive", 1024, &ctl,
								 HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
	entry.key = key;
	entry.kind = kind;
	(void) hash_search(moved_rows, &entry, HASH_ENTER, &found);
}

/* Whether this transaction moved the row of kind with key into the archive. */
bool
PayArchiveWasMoved(PayArchiveMove kind, uint64 key)
{
	MovedRow	entry = {0};

	if (moved_rows == NULL)
		return false;
	entry.key = key;
	entry.kind = kind;
	return hash_search(moved_rows, &entry, HASH_FIND, NULL) != NULL;
}
