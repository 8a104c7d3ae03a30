/*-------------------------------------------------------------------------
 *
 * archive_keys.h
 *	  The packed form of a row of pay_archive_keys: sorted 64-bit hashes,
 *	  the first in the row's lo, each next one as its distance from the one
 *	  before, in base-128 digits.
 *
 * Pure C with no server headers, like machine.h: the claim's lookup
 * (write_archive.c) reads rows with it, pay_archive writes them with it
 * (api_archive.c), so that the two never disagree.
 *
 * The hashes are uniform over 2^64 values, so between n of them the
 * distance is about 2^64 / n: at ten million hashes some 41 bits, six
 * bytes where a bigint takes eight.  A distance is written low digits
 * first, seven bits a byte, the high bit set on every byte but its last.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ARCHIVE_KEYS_H
#define ARCHIVE_KEYS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The most bytes one distance takes: ceil(64 / 7). */
#define ARCHIVE_KEYS_MAX_DIGITS 10

typedef enum ArchiveKeysLookup
{
	ARCHIVE_KEYS_ABSENT,
	ARCHIVE_KEYS_PRESENT,
	ARCHIVE_KEYS_MALFORMED		/* not the distances of ascending hashes */
} ArchiveKeysLookup;

/*
 * Pack hashes[1 .. count - 1] after hashes[0] (the row's lo) into out,
 * which holds (count - 1) * ARCHIVE_KEYS_MAX_DIGITS bytes; returns the
 * bytes written.  The hashes must ascend strictly.
 */
extern size_t archive_keys_pack(const int64_t *hashes, size_t count, uint8_t *out);

/* Whether the row of lo packed as bytes[0 .. length - 1] holds hash. */
extern ArchiveKeysLookup archive_keys_find(int64_t lo, const uint8_t *bytes,
										   size_t length, int64_t hash);

/*
 * The hashes of the row of lo packed as bytes[0 .. length - 1], lo first,
 * into out, which holds length + 1 of them; returns their count, or 0 when
 * the bytes are not a packed row.
 */
extern size_t archive_keys_unpack(int64_t lo, const uint8_t *bytes, size_t length,
								  int64_t *out);

#endif							/* ARCHIVE_KEYS_H */
