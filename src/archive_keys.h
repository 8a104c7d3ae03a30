/*-------------------------------------------------------------------------
 *
 * archive_keys.h
 *	  The packed form of a row of pay_archive_keys: sorted 64-bit hashes,
 *	  the first in the row's lo, each next one as its distance from lo,
 *	  all the row's distances in one width, so that finding a hash is a
 *	  search of an array: started where the hash's share of the row's
 *	  span points, as the hashes are uniform.
 *
 * Pure C with no server headers, like machine.h: the claim's lookup
 * (write_archive.c) reads rows with it, pay_archive writes them with it
 * (api_archive.c), so that the two never disagree.
 *
 * The packed bytes are a first byte giving the width w, 1 to 8 bytes,
 * then each distance in w bytes, most significant first; a row of lo
 * alone packs into no bytes.  The width is the fewest bytes the row's
 * last distance fits in.  The hashes are uniform over 2^64 values, so the
 * 512 of a full row among n span about 2^73 / n: at ten million some 50
 * bits, seven bytes a hash where a bigint takes eight.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ARCHIVE_KEYS_H
#define ARCHIVE_KEYS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * A hash's place in the order of the primary key (signed bigints) as an
 * unsigned number, the sign bit flipped: in it a distance is a plain
 * difference, and the top bits name a range of hashes.
 */
static inline uint64_t
archive_keys_ordinal(int64_t hash)
{
	return (uint64_t) hash ^ UINT64_C(0x8000000000000000);
}

/* The widest distance, in bytes. */
#define ARCHIVE_KEYS_MAX_WIDTH 8

/* The most bytes count hashes pack into. */
#define ARCHIVE_KEYS_MAX_LENGTH(count) \
	((count) > 1 ? 1 + ((size_t) (count) - 1) * ARCHIVE_KEYS_MAX_WIDTH : 0)

typedef enum ArchiveKeysLookup
{
	ARCHIVE_KEYS_ABSENT,
	ARCHIVE_KEYS_PRESENT,
	ARCHIVE_KEYS_MALFORMED		/* not distances of one width from lo */
} ArchiveKeysLookup;

/*
 * Pack hashes[1 .. count - 1] after hashes[0] (the row's lo) into out,
 * which holds ARCHIVE_KEYS_MAX_LENGTH(count) bytes; returns the bytes
 * written.  The hashes must ascend strictly.
 */
extern size_t archive_keys_pack(const int64_t *hashes, size_t count, uint8_t *out);

/*
 * Whether the row of lo packed as bytes[0 .. length - 1] holds hash.  It
 * reads the width, the last distance and those the search visits:
 * bytes of the wrong length, a width out of range or a last distance past
 * the largest hash are MALFORMED; that every distance ascends is checked
 * where rows are written (archive_keys_unpack, in the table's CHECK
 * constraint and pay_verify), not by every lookup.
 */
extern ArchiveKeysLookup archive_keys_find(int64_t lo, const uint8_t *bytes,
										   size_t length, int64_t hash);

/*
 * The hashes of the row of lo packed as bytes[0 .. length - 1], lo first,
 * into out, which holds length + 1 of them; returns their count, or 0 when
 * the bytes are not a packed row: of the wrong length for their width, a
 * width out of range, a distance that is zero, not above the one before,
 * or past the largest hash.
 */
extern size_t archive_keys_unpack(int64_t lo, const uint8_t *bytes, size_t length,
								  int64_t *out);

#endif							/* ARCHIVE_KEYS_H */
