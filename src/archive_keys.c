/*-------------------------------------------------------------------------
 *
 * archive_keys.c
 *	  The packed form of a row of pay_archive_keys (archive_keys.h).
 *
 * The hashes are bigints, ordered as signed numbers (the primary key's
 * order); flipping the sign bit maps that order onto unsigned numbers, in
 * which a distance is a plain difference.
 *
 *-------------------------------------------------------------------------
 */
#include "archive_keys.h"

#define SIGN_BIT UINT64_C(0x8000000000000000)

static inline uint64_t
Ordinal(int64_t hash)
{
	return (uint64_t) hash ^ SIGN_BIT;
}

size_t
archive_keys_pack(const int64_t *hashes, size_t count, uint8_t *out)
{
	uint8_t    *end = out;

	for (size_t i = 1; i < count; i++)
	{
		uint64_t	distance = Ordinal(hashes[i]) - Ordinal(hashes[i - 1]);

		while (distance >= 0x80)
		{
			*end++ = (uint8_t) (distance | 0x80);
			distance >>= 7;
		}
		*end++ = (uint8_t) distance;
	}
	return (size_t) (end - out);
}

/*
 * Read the next distance at *at (before end) and step past it: false when
 * the bytes end inside it, or it is zero or longer than a distance can be.
 */
static bool
NextDistance(const uint8_t **at, const uint8_t *end, uint64_t *distance)
{
	uint64_t	value = 0;

	for (int digit = 0; digit < ARCHIVE_KEYS_MAX_DIGITS && *at < end; digit++)
	{
		uint8_t		byte = *(*at)++;

		value |= (uint64_t) (byte & 0x7F) << (7 * digit);
		if ((byte & 0x80) == 0)
		{
			*distance = value;
			return value != 0;
		}
	}
	return false;
}

/*
 * Step from hash ordinal *ordinal by the next distance at *at: false when
 * the bytes are malformed or the sum passes the largest hash.
 */
static bool
NextOrdinal(const uint8_t **at, const uint8_t *end, uint64_t *ordinal)
{
	uint64_t	distance;

	if (!NextDistance(at, end, &distance) || distance > UINT64_MAX - *ordinal)
		return false;
	*ordinal += distance;
	return true;
}

ArchiveKeysLookup
archive_keys_find(int64_t lo, const uint8_t *bytes, size_t length, int64_t hash)
{
	const uint8_t *at = bytes;
	const uint8_t *end = bytes + length;
	uint64_t	ordinal = Ordinal(lo);
	uint64_t	wanted = Ordinal(hash);

	while (ordinal < wanted && at < end)
	{
		if (!NextOrdinal(&at, end, &ordinal))
			return ARCHIVE_KEYS_MALFORMED;
	}
	return ordinal == wanted ? ARCHIVE_KEYS_PRESENT : ARCHIVE_KEYS_ABSENT;
}

size_t
archive_keys_unpack(int64_t lo, const uint8_t *bytes, size_t length, int64_t *out)
{
	const uint8_t *at = bytes;
	const uint8_t *end = bytes + length;
	uint64_t	ordinal = Ordinal(lo);
	size_t		count = 0;

	out[count++] = lo;
	while (at < end)
	{
		if (!NextOrdinal(&at, end, &ordinal))
			return 0;
		out[count++] = (int64_t) (ordinal ^ SIGN_BIT);
	}
	return count;
}
