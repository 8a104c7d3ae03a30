/*-------------------------------------------------------------------------
 *
 * prefixes.c
 *	  The prefixes this database issues bizNos under, known per backend.
 *
 * Since 1.4 a key that is no bizNo but starts with such a prefix -- an
 * order's prefix and biz_id joined, SHOP-ORDER-42 -- is refused as a new
 * payment (PayCheckNewKey).  A prefix is issued when the ledger holds a
 * bizNo of it; the ledger's partial unique index on (prefix, biz_id)
 * answers that (PayLedgerHasPrefix), and this file keeps the answers so
 * that a backend asks once per prefix, not once per payment:
 *
 * - "issued" is kept for the life of the ledger (its OID): a prefix, once
 *   issued, stays so;
 * - "not issued" is kept while the catalog's generation stands, that is
 *   until the next relcache invalidation of the ledger.  The API sends one
 *   in the transaction that records the first bizNo of a prefix
 *   (PayPrefixNoteIssued), so every backend forgets its "not issued" once
 *   that bizNo is committed and visible -- as a probe of its own would
 *   see it.  Any other invalidation (VACUUM, DDL) forgets them too.
 *
 * pay_open thus pays a hash lookup per call, and a probe and an
 * invalidation once per prefix and backend.  A bizNo written into the
 * ledger by other means than the API (raw SQL, a restore, replication)
 * sends no invalidation: a backend that knew its prefix as not issued
 * learns otherwise at the ledger's next invalidation.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/memutils.h"

#include "bizno_format.h"
#include "prefixes.h"
#include "write.h"

typedef struct PrefixEntry
{
	char		prefix[BIZNO_PREFIX_MAX_LEN + 1];	/* the hash key */
	Oid			ledger;			/* the ledger the answer is of */
	bool		issued;
	uint64		generation;		/* of the catalog, for "not issued" */
} PrefixEntry;

static HTAB *prefixes = NULL;

/*
 * The keys of callers fill the table with the prefixes they start with:
 * past this many, it starts again empty, so no caller can make a backend
 * keep more.
 */
#define PREFIXES_KEPT			4096

/* The entry of prefix, made empty (ledger invalid) if it is new. */
static PrefixEntry *
PrefixEntryOf(const char *prefix, size_t len)
{
	char		key[BIZNO_PREFIX_MAX_LEN + 1] = {0};
	PrefixEntry *entry;
	bool		found;

	if (prefixes != NULL && hash_get_num_entries(prefixes) >= PREFIXES_KEPT)
	{
		hash_destroy(prefixes);
		prefixes = NULL;
	}
	if (prefixes == NULL)
	{
		HASHCTL		ctl = {0};

		ctl.keysize = sizeof(key);
		ctl.entrysize = sizeof(PrefixEntry);
		ctl.hcxt = TopMemoryContext;
		prefixes = hash_create("idempotent_pay issued prefixes", 16, &ctl,
							   HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
	}
	Assert(len <= BIZNO_PREFIX_MAX_LEN);
	memcpy(key, prefix, len);
	entry = hash_search(prefixes, key, HASH_ENTER, &found);
	if (!found)
		entry->ledger = InvalidOid;
	return entry;
}

/* Whether the entry answers for the ledger as the catalog knows it now. */
static bool
EntryHolds(const PrefixEntry *entry, const PayCatalog *catalog)
{
	return entry->ledger == catalog->ledger &&
		(entry->issued || entry->generation == catalog->generation);
}

/* Ask the ledger, and keep the answer. */
static bool
AskLedger(PrefixEntry *entry, const PayCatalog *catalog, const char *prefix, size_t len)
{
	entry->issued = PayLedgerHasPrefix(catalog,
									   PointerGetDatum(cstring_to_text_with_len(prefix, (int) len)));
	entry->ledger = catalog->ledger;
	entry->generation = catalog->generation;
	return entry->issued;
}

/*
 * Whether the ledger holds a bizNo of prefix, a valid prefix.  Call it
 * inside SPI.
 */
bool
PayPrefixIsIssued(const PayCatalog *catalog, const char *prefix, size_t len)
{
	PrefixEntry *entry = PrefixEntryOf(prefix, len);

	if (EntryHolds(entry, catalog))
		return entry->issued;
	return AskLedger(entry, catalog, prefix, len);
}

/*
 * A bizNo of prefix is about to be recorded.  When the ledger holds none
 * yet, it may be the first: invalidate the ledger's relcache entry, so
 * that at commit every backend forgets that the prefix was not issued.
 * "Issued" is kept only once the ledger says so, after that commit.  Call
 * it inside SPI.
 */
void
PayPrefixNoteIssued(const PayCatalog *catalog, const char *prefix, size_t len)
{
	PrefixEntry *entry = PrefixEntryOf(prefix, len);

	if (entry->ledger == catalog->ledger && entry->issued)
		return;
	if (!AskLedger(entry, catalog, prefix, len))
	{
		CacheInvalidateRelcacheByRelid(catalog->ledger);
		entry->ledger = InvalidOid;
	}
}
