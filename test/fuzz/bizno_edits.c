/*
 * bizno_edits.c
 *	  Every single-character edit of generated bizNos, counted (test/run
 *	  check runs it against src/bizno_format.c).
 *
 * It generates bizNos of many prefix and biz_id lengths, times, node ids
 * and uniqueness values, and makes every edit of one character of each:
 * substitution by every character of the key alphabet, deletion, insertion
 * of every character at every position, doubling and adjacent
 * transposition.  An edit that yields another valid bizNo would pass for a
 * payment of its own; one that yields a key the API does not recognise as
 * a bizNo (bizno_resembles_generated) could be recorded as a key of another
 * system.  Both counts must be 0.
 *
 * It also checks, for every bizNo length and every sum of the other
 * characters, that the generator's search ends: some value of the two
 * digits before the last digit of the uniqueness part lets the last digit
 * and the check character solve both sums (bizno_format's bound of 2048
 * steps rests on it).
 *
 *	  bizno_edits [keys]   (default 10000)
 *
 * It prints one line per kind of edit and exits 1 when a count is not 0.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bizno_format.h"

static const char key_alphabet[] =
"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz-.:_";
static const char crockford_digits[] = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";

#define ALPHABET_SIZE	66
#define MODULUS			67

typedef enum EditKind
{
	EDIT_SUBSTITUTION,
	EDIT_DELETION,
	EDIT_INSERTION,
	EDIT_DOUBLING,
	EDIT_TRANSPOSITION,
	EDIT_KINDS
} EditKind;

static const char *const edit_names[EDIT_KINDS] = {
	"substitution", "deletion", "insertion", "doubling", "transposition"
};

typedef struct EditCounts
{
	uint64_t	edits;
	uint64_t	accepted;		/* another valid bizNo */
	uint64_t	unrecognised;	/* not taken for a bizNo at all */
} EditCounts;

static EditCounts counts[EDIT_KINDS];

static uint64_t rng_state = UINT64_C(0x9E3779B97F4A7C15);

/* xorshift64*: the same keys on every run */
static uint64_t
next_random(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * UINT64_C(0x2545F4914F6CDD1D);
}

static void
judge(EditKind kind, const char *original, size_t original_len,
	  const char *edited, size_t len)
{
	BiznoParts	parts;
	char		expected_check;

	if (len == original_len && memcmp(edited, original, len) == 0)
		return;					/* no edit: the same key */
	counts[kind].edits++;
	if (bizno_parse(edited, len, &parts, &expected_check) == BIZNO_VALID)
	{
		if (counts[kind].accepted++ < 5)
			printf("# %s accepted: %.*s -> %.*s\n", edit_names[kind],
				   (int) original_len, original, (int) len, edited);
	}
	else if (!bizno_resembles_generated(edited, len))
		counts[kind].unrecognised++;
}

static void
edit_every_character(const char *key, size_t len)
{
	char		edited[BIZNO_MAX_LEN + 2];

	for (size_t i = 0; i < len; i++)
	{
		/* substitution by every character */
		memcpy(edited, key, len);
		for (int c = 0; c < ALPHABET_SIZE; c++)
		{
			edited[i] = key_alphabet[c];
			judge(EDIT_SUBSTITUTION, key, len, edited, len);
		}

		/* deletion */
		memcpy(edited, key, i);
		memcpy(edited + i, key + i + 1, len - i - 1);
		judge(EDIT_DELETION, key, len, edited, len - 1);

		/* doubling */
		memcpy(edited, key, i + 1);
		memcpy(edited + i + 1, key + i, len - i);
		judge(EDIT_DOUBLING, key, len, edited, len + 1);

		/* adjacent transposition */
		if (i + 1 < len)
		{
			memcpy(edited, key, len);
			edited[i] = key[i + 1];
			edited[i + 1] = key[i];
			judge(EDIT_TRANSPOSITION, key, len, edited, len);
		}
	}

	/* insertion of every character at every position */
	for (size_t i = 0; i <= len; i++)
	{
		memcpy(edited, key, i);
		memcpy(edited + i + 1, key + i, len - i);
		for (int c = 0; c < ALPHABET_SIZE; c++)
		{
			edited[i] = key_alphabet[c];
			judge(EDIT_INSERTION, key, len, edited, len + 1);
		}
	}
}

/* A bizNo of random parts, parsed back to exactly them. */
static size_t
generate(char *bizno, uint64_t n)
{
	char		prefix[BIZNO_PREFIX_MAX_LEN];
	char		biz_id[BIZNO_BIZ_ID_MAX_LEN];
	size_t		prefix_len = 1 + n % BIZNO_PREFIX_MAX_LEN;
	size_t		biz_id_len = 1 + (n / BIZNO_PREFIX_MAX_LEN) % BIZNO_BIZ_ID_MAX_LEN;
	int64_t		issued_ms = (int64_t) (next_random() % (uint64_t) BIZNO_MS_LIMIT);
	int			node_id = (int) (next_random() % (BIZNO_NODE_ID_MAX + 1));
	uint64_t	unique = next_random() >> 1;
	size_t		len;
	BiznoParts	parts;
	char		expected_check;

	for (size_t i = 0; i < prefix_len; i++)
		prefix[i] = key_alphabet[next_random() % 36];
	for (size_t i = 0; i < biz_id_len; i++)
		biz_id[i] = key_alphabet[next_random() % ALPHABET_SIZE];
	len = bizno_format(bizno, prefix, prefix_len, biz_id, biz_id_len, issued_ms, node_id,
					   &unique);
	if (bizno_parse(bizno, len, &parts, &expected_check) != BIZNO_VALID ||
		parts.prefix_len != prefix_len || memcmp(parts.prefix, prefix, prefix_len) != 0 ||
		parts.biz_id_len != biz_id_len || memcmp(parts.biz_id, biz_id, biz_id_len) != 0 ||
		parts.issued_ms != issued_ms || parts.node_id != node_id)
	{
		printf("not ok - generated bizNo %s does not parse back to its parts\n", bizno);
		exit(1);
	}
	return len;
}

static int
weight(size_t position)
{
	return (int) (position % ALPHABET_SIZE) + 1;
}

/* the value of each Crockford digit in the key alphabet */
static int	digit_values[32];
/* the most steps from a multiple of 1024 the generator's search took */
static int	longest_search = 0;

/*
 * Whether, for a bizNo of length len whose characters other than the last
 * four of the uniqueness part and the check character have weighted sum
 * weighted and plain sum plain (length included), some of the 1024 values
 * of the two digits that precede the last lets the last digit and the check
 * character (one of 0-9A-Z) make both sums vanish.
 */
static int
solvable(size_t len, int weighted, int plain)
{
	size_t		check = len - 1;
	size_t		last = len - 2;

	for (int step = 0; step < 1024; step++)
	{
		int			high = step * BIZNO_SEARCH_STRIDE % 1024;
		int			v1 = digit_values[high >> 5];
		int			v2 = digit_values[high & 31];
		int			w = (weighted + weight(len - 4) * v1 + weight(len - 3) * v2) % MODULUS;
		int			p = (plain + v1 + v2) % MODULUS;

		for (int d = 0; d < 32; d++)
		{
			int			a = digit_values[d];
			int			b = (2 * MODULUS - p - a) % MODULUS;

			if (b < 36 && (w + weight(last) * a + weight(check) * b) % MODULUS == 0)
			{
				if (step > longest_search)
					longest_search = step;
				return 1;
			}
		}
	}
	return 0;
}

int
main(int argc, char **argv)
{
	long		keys = argc > 1 ? atol(argv[1]) : 10000;
	uint64_t	total_edits = 0;
	uint64_t	total_bad = 0;
	int			unsolvable = 0;
	char		bizno[BIZNO_MAX_LEN + 1];

	for (long n = 0; n < keys; n++)
		edit_every_character(bizno, generate(bizno, (uint64_t) n));

	for (int kind = 0; kind < EDIT_KINDS; kind++)
	{
		printf("# %-13s %10llu edits, %llu accepted as another bizNo, %llu not recognised as a bizNo\n",
			   edit_names[kind], (unsigned long long) counts[kind].edits,
			   (unsigned long long) counts[kind].accepted,
			   (unsigned long long) counts[kind].unrecognised);
		total_edits += counts[kind].edits;
		total_bad += counts[kind].accepted + counts[kind].unrecognised;
	}

	for (int d = 0; d < 32; d++)
		digit_values[d] = (int) (strchr(key_alphabet, crockford_digits[d]) - key_alphabet);
	for (size_t len = 3 + BIZNO_TAIL_LEN; len <= BIZNO_MAX_LEN; len++)
		for (int weighted = 0; weighted < MODULUS; weighted++)
			for (int plain = 0; plain < MODULUS; plain++)
				unsolvable += !solvable(len, weighted, plain);

	if (total_bad == 0 && unsolvable == 0)
	{
		printf("ok - %ld bizNos, %llu single-character edits: none accepted, every one recognised; "
			   "the generator's search ends for every length and sum, at most %d steps from a run's start\n",
			   keys, (unsigned long long) total_edits, longest_search + 1);
		return 0;
	}
	printf("not ok - %ld bizNos, %llu single-character edits: %llu accepted or not recognised; "
		   "%d unsolvable sums\n",
		   keys, (unsigned long long) total_edits, (unsigned long long) total_bad, unsolvable);
	return 1;
}
