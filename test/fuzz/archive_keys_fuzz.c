/*
 * archive_keys_fuzz.c
 *	  libFuzzer harness for the packed rows of pay_archive_keys
 *	  (src/archive_keys.c).
 *
 * The input is read twice.  As a stored row -- a lo, a hash looked for, and
 * the packed bytes -- it must never crash, and when it unpacks the hashes
 * must ascend strictly from lo and be found exactly: each one present, the
 * looked-for hash present only if it is one of them.  As hashes -- its
 * 8-byte words, sorted, without repeats -- they must pack into a width
 * byte and at most eight bytes a distance (no bytes for one hash alone) and
 * unpack to the same list, every one found and the
 * values next to them found only if they are in the list.  A violated
 * property aborts, which libFuzzer reports as a crash.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "archive_keys.h"

int			LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
require(int condition)
{
	if (!condition)
		abort();
}

static int64_t
read_i64(const uint8_t *data)
{
	uint64_t	value = 0;

	for (int i = 0; i < 8; i++)
		value = value << 8 | data[i];
	return (int64_t) value;
}

static int
compare_i64(const void *a, const void *b)
{
	int64_t		x = *(const int64_t *) a;
	int64_t		y = *(const int64_t *) b;

	return (x > y) - (x < y);
}

static int
contains(const int64_t *hashes, size_t count, int64_t hash)
{
	return bsearch(&hash, hashes, count, sizeof(int64_t), compare_i64) != NULL;
}

static void
check_stored_row(const uint8_t *data, size_t size)
{
	int64_t		lo = read_i64(data);
	int64_t		wanted = read_i64(data + 8);
	const uint8_t *bytes = data + 16;
	size_t		length = size - 16;
	int64_t    *hashes = malloc((length + 1) * sizeof(int64_t));
	size_t		count = archive_keys_unpack(lo, bytes, length, hashes);
	ArchiveKeysLookup found = archive_keys_find(lo, bytes, length, wanted);

	if (count > 0)
	{
		require(hashes[0] == lo);
		for (size_t i = 1; i < count; i++)
			require(hashes[i] > hashes[i - 1]);
		for (size_t i = 0; i < count; i++)
			require(archive_keys_find(lo, bytes, length, hashes[i]) == ARCHIVE_KEYS_PRESENT);
		require(found == (contains(hashes, count, wanted) ? ARCHIVE_KEYS_PRESENT : ARCHIVE_KEYS_ABSENT));
	}
	free(hashes);
}

static void
check_round_trip(const uint8_t *data, size_t size)
{
	size_t		count = size / 8;
	size_t		unique = 0;
	int64_t    *hashes = malloc(count * sizeof(int64_t));
	uint8_t    *packed;
	int64_t    *unpacked;
	size_t		length;

	for (size_t i = 0; i < count; i++)
		hashes[i] = read_i64(data + 8 * i);
	qsort(hashes, count, sizeof(int64_t), compare_i64);
	for (size_t i = 0; i < count; i++)
		if (unique == 0 || hashes[i] != hashes[unique - 1])
			hashes[unique++] = hashes[i];

	packed = malloc(ARCHIVE_KEYS_MAX_LENGTH(unique) + 1);
	length = archive_keys_pack(hashes, unique, packed);
	require(length <= ARCHIVE_KEYS_MAX_LENGTH(unique));
	require(unique == 1 ? length == 0 : length >= unique);
	unpacked = malloc((length + 1) * sizeof(int64_t));
	require(archive_keys_unpack(hashes[0], packed, length, unpacked) == unique);
	require(memcmp(unpacked, hashes, unique * sizeof(int64_t)) == 0);
	for (size_t i = 0; i < unique; i++)
	{
		require(archive_keys_find(hashes[0], packed, length, hashes[i]) == ARCHIVE_KEYS_PRESENT);
		if (hashes[i] < INT64_MAX)
			require(archive_keys_find(hashes[0], packed, length, hashes[i] + 1) ==
					(contains(hashes, unique, hashes[i] + 1) ? ARCHIVE_KEYS_PRESENT : ARCHIVE_KEYS_ABSENT));
		if (hashes[i] > INT64_MIN)
			require(archive_keys_find(hashes[0], packed, length, hashes[i] - 1) ==
					(contains(hashes, unique, hashes[i] - 1) ? ARCHIVE_KEYS_PRESENT : ARCHIVE_KEYS_ABSENT));
	}
	free(unpacked);
	free(packed);
	free(hashes);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size >= 16)
		check_stored_row(data, size);
	if (size >= 8)
		check_round_trip(data, size);
	return 0;
}
