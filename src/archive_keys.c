/*-------------------------------------------------------------------------
 *
 * archive_keys.c
 *	  The packed form of a row of pay_archive_keys (archive_keys.h).
 *
 * The hashes are bigints, ordered as signed numbers (the primary key's
 * order); distances are taken between their ordinals (archive_keys.h).
 *
 *-------------------------------------------------------------------------
 */
#include "archive_keys.h"

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
	uint64_t	lo = archive_keys_ordinal(hashes[0]);
	int			width;
	uint8_t    *end = out;

	if (count < 2)
		return 0;
	width = WidthOf(archive_keys_ordinal(hashes[count - 1]) - lo);
	*end++ = (uint8_t) width;
	for (size_t i = 1; i < count; i++)
	{
		uint64_t	distance = archive_keys_ordinal(hashes[i]) - lo;

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

/*
 * The first of the count distances at bytes, each of width bytes, not
 * below target, for distances that ascend and a last one not below target.
 * The hashes are uniform, so target's share of the last distance points
 * near it: the search starts there and widens in doubling steps until the
 * distances there bracket target, then halves the bracket -- a few reads,
 * most in one or two cache lines, where a binary search of the whole row
 * reads one line a step.  Every index read lies in [0, count - 1], and
 * low never passes high, whatever the distances: out-of-order ones give a
 * wrong index, never a read outside the row.
 */
static size_t
FirstNotBelow(const uint8_t *bytes, size_t count, int width, uint64_t target)
{
	uint64_t	last = DistanceAt(bytes + (count - 1) * width, width);
	size_t		guess = (size_t) ((double) target / (double) last * (double) (count - 1));
	size_t		low;			/* the distances below low are below target */
	size_t		high;			/* the one at high is not */
	size_t		step = 1;

	if (guess > count - 1)
		guess = count - 1;
	if (DistanceAt(bytes + guess * width, width) < target)
	{
		low = guess + 1;
		high = count - 1;
		while (guess + step < high && DistanceAt(bytes + (guess + step) * width, width) < target)
		{
			low = guess + step + 1;
			step *= 2;
		}
		if (guess + step < high)
			high = guess + step;
	}
	else
	{
		low = 0;
		high = guess;
		while (step <= guess && DistanceAt(bytes + (guess - step) * width, width) >= target)
		{
			high = guess - step;
			step *= 2;
		}
		if (step <= guess)
			low = guess - step + 1;
	}
	while (low < high)
	{
		size_t		middle = low + (high - low) / 2;

		if (DistanceAt(bytes + middle * width, width) < target)
			low = middle + 1;
		else
			high = middle;
	}
	return low;
}

ArchiveKeysLookup
archive_keys_find(int64_t lo, const uint8_t *bytes, size_t length, int64_t hash)
{
	uint64_t	from = archive_keys_ordinal(lo);
	uint64_t	wanted = archive_keys_ordinal(hash);
	int			width;
	size_t		count;
	size_t		at;

	if (!ReadShape(from, bytes, length, &width, &count))
		return ARCHIVE_KEYS_MALFORMED;
	if (wanted <= from)
		return wanted == from ? ARCHIVE_KEYS_PRESENT : ARCHIVE_KEYS_ABSENT;
	if (count == 0 || DistanceAt(bytes + 1 + (count - 1) * width, width) < wanted - from)
		return ARCHIVE_KEYS_ABSENT;
	at = FirstNotBelow(bytes + 1, count, width, wanted - from);
	return DistanceAt(bytes + 1 + at * width, width) == wanted - from ?
		ARCHIVE_KEYS_PRESENT : ARCHIVE_KEYS_ABSENT;
}

size_t
archive_keys_unpack(int64_t lo, const uint8_t *bytes, size_t length, int64_t *out)
{
	uint64_t	from = archive_keys_ordinal(lo);
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
		out[i + 1] = (int64_t) archive_keys_ordinal((int64_t) (from + distance));
		previous = distance;
	}
	return count + 1;
}
