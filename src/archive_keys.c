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

/* The fewest bytes distance fits in. */
static int
WidthOf(uint64_t distance)
{
	int			width = 1;

	while (width < ARCHIVE_KEYS_MAX_WIDTH && distance >> (8 * width) != 0)
		width++;
	return width;
}

/* The distance of width bytes at at, most significant first. */
static inline uint64_t
DistanceAt(const uint8_t *at, int width)
{
	uint64_t	distance = 0;

	for (int i = 0; i < width; i++)
		distance = distance << 8 | at[i];
	return distance;
}

size_t
archive_keys_pack(const int64_t *hashes, size_t count, uint8_t *out)
{
	uint64_t	lo = Ordinal(hashes[0]);
	int			width;
	uint8_t    *end = out;

	if (count < 2)
		return 0;
	width = WidthOf(Ordinal(hashes[count - 1]) - lo);
	*end++ = (uint8_t) width;
	for (size_t i = 1; i < count; i++)
	{
		uint64_t	distance = Ordinal(hashes[i]) - lo;

		for (int byte = width - 1; byte >= 0; byte--)
			*end++ = (uint8_t) (distance >> (8 * byte));
	}
	return (size_t) (end - out);
}

/*
 * The width and count of the distances packed as bytes[0 .. length - 1]
 * after lo: false when their length does not fit their width, or the last
 * passes the largest hash.  No bytes are no distances.
 */
static bool
ReadShape(uint64_t lo, const uint8_t *bytes, size_t length, int *width, size_t *count)
{
	*width = 0;
	*count = 0;
	if (length == 0)
		return true;
	*width = bytes[0];
	if (length == 1 || *width < 1 || *width > ARCHIVE_KEYS_MAX_WIDTH ||
		(length - 1) % *width != 0)
		return false;
	*count = (length - 1) / *width;
	return DistanceAt(bytes + 1 + (*count - 1) * *width, *width) <= UINT64_MAX - lo;
}

ArchiveKeysLookup
archive_keys_find(int64_t lo, const uint8_t *bytes, size_t length, int64_t hash)
{
	uint64_t	from = Ordinal(lo);
	uint64_t	wanted = Ordinal(hash);
	int			width;
	size_t		count;
	size_t		low = 0;
	size_t		high;

	if (!ReadShape(from, bytes, length, &width, &count))
		return ARCHIVE_KEYS_MALFORMED;
	if (wanted <= from)
		return wanted == from ? ARCHIVE_KEYS_PRESENT : ARCHIVE_KEYS_ABSENT;

	/* the first of distances [low, high) not below wanted's */
	high = count;
	while (low < high)
	{
		size_t		middle = low + (high - low) / 2;

		if (DistanceAt(bytes + 1 + middle * width, width) < wanted - from)
			low = middle + 1;
		else
			high = middle;
	}
	return low < count && DistanceAt(bytes + 1 + low * width, width) == wanted - from ?
		ARCHIVE_KEYS_PRESENT : ARCHIVE_KEYS_ABSENT;
}

size_t
archive_keys_unpack(int64_t lo, const uint8_t *bytes, size_t length, int64_t *out)
{
	uint64_t	from = Ordinal(lo);
	uint64_t	previous = 0;
	int			width;
	size_t		count;

	if (!ReadShape(from, bytes, length, &width, &count))
		return 0;
	out[0] = lo;
	for (size_t i = 0; i < count; i++)
	{
		uint64_t	distance = DistanceAt(bytes + 1 + i * width, width);

		if (distance <= previous)
			return 0;
		out[i + 1] = (int64_t) ((from + distance) ^ SIGN_BIT);
		previous = distance;
	}
	return count + 1;
}
