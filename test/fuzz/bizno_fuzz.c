/*
 * bizno_fuzz.c
 *	  libFuzzer harness for the pure-C bizNo code (src/bizno_format.c).
 *
 * Every input is parsed and validated as it comes: that must never crash,
 * and a VALID answer must describe a well-formed key.  Inputs of 16 bytes or
 * more also steer the generator: the bizNo formatted from their bytes must
 * parse back to exactly its parts, and one substitution, one adjacent
 * transposition, one dropped and one added character chosen by the input
 * must be caught by the check (bizno_edits.c makes every such edit of ten
 * thousand bizNos); a dropped or added character also leaves a key still
 * recognised as a mistyped bizNo.
 * Only a check character the generator writes ever passes, even where
 * another fits the rest of the key; a failed check never names a check
 * character the generator cannot write, and says what the check character
 * should be only when it was the one mistyped.  A violated property aborts,
 * which libFuzzer reports as a crash.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bizno_format.h"

static const char key_alphabet[] =
"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz-.:_";
static const char crockford_digits[] = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";

int			LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
require(int condition)
{
	if (!condition)
		abort();
}

static int
is_issued_check(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z');
}

static uint64_t
read_u64(const uint8_t *data)
{
	uint64_t	value = 0;

	for (int i = 0; i < 8; i++)
		value = value << 8 | data[i];
	return value;
}

static void
check_arbitrary_input(const char *s, size_t size)
{
	BiznoParts	parts;
	char		expected_check = 0;
	BiznoParseResult result = bizno_parse(s, size, &parts, &expected_check);

	(void) bizno_looks_generated(s, size);
	(void) bizno_resembles_generated(s, size);
	(void) bizno_key_prefix_len(s, size);
	if (result == BIZNO_VALID)
	{
		require(bizno_key_is_valid(s, size));
		require(bizno_looks_generated(s, size));
		require(bizno_resembles_generated(s, size));
		require(is_issued_check(s[size - 1]));
		require(bizno_prefix_is_valid(parts.prefix, parts.prefix_len));
		require(bizno_biz_id_is_valid(parts.biz_id, parts.biz_id_len));
		require(parts.node_id >= 0 && parts.node_id <= BIZNO_NODE_ID_MAX);
		require(parts.issued_ms >= 0 && parts.issued_ms < BIZNO_MS_LIMIT);
	}
	if (result == BIZNO_BAD_CHECK)
		require(expected_check == '\0' || is_issued_check(expected_check));
	if (result == BIZNO_UNISSUED_CHECK)
		require(is_issued_check(expected_check) && !is_issued_check(s[size - 1]));
}

static void
check_generated(const uint8_t *data, size_t size)
{
	char		prefix[BIZNO_PREFIX_MAX_LEN];
	char		biz_id[BIZNO_BIZ_ID_MAX_LEN];
	size_t		prefix_len = 1 + data[0] % BIZNO_PREFIX_MAX_LEN;
	size_t		biz_id_len = 1 + data[1] % BIZNO_BIZ_ID_MAX_LEN;
	int64_t		issued_ms = (int64_t) (read_u64(data + 2) % (uint64_t) BIZNO_MS_LIMIT);
	int			node_id = (data[10] << 8 | data[11]) % (BIZNO_NODE_ID_MAX + 1);
	uint64_t	unique = read_u64(data + 8) >> 1;
	char		bizno[BIZNO_MAX_LEN + 1];
	char		mutant[BIZNO_MAX_LEN + 2];
	size_t		len;
	BiznoParts	parts;
	char		expected_check;
	size_t		position;
	BiznoParseResult result;

	for (size_t i = 0; i < prefix_len; i++)
		prefix[i] = key_alphabet[data[(12 + i) % size] % 36];
	for (size_t i = 0; i < biz_id_len; i++)
		biz_id[i] = key_alphabet[data[(13 + i) % size] % 66];

	len = bizno_format(bizno, prefix, prefix_len, biz_id, biz_id_len, issued_ms, node_id, &unique);
	require(len == strlen(bizno) && len <= BIZNO_MAX_LEN);
	require(bizno_parse(bizno, len, &parts, &expected_check) == BIZNO_VALID);
	require(parts.prefix_len == prefix_len && memcmp(parts.prefix, prefix, prefix_len) == 0);
	require(parts.biz_id_len == biz_id_len && memcmp(parts.biz_id, biz_id, biz_id_len) == 0);
	require(parts.issued_ms == issued_ms && parts.node_id == node_id);

	/*
	 * one substitution: of the check character, the right one is named;
	 * elsewhere, no check character is said to be the right one
	 */
	position = data[14] % len;
	memcpy(mutant, bizno, len + 1);
	mutant[position] = key_alphabet[data[15] % 66];
	if (mutant[position] != bizno[position])
	{
		result = bizno_parse(mutant, len, &parts, &expected_check);
		require(result != BIZNO_VALID);
		if (position == len - 1)
			require(expected_check == bizno[len - 1] &&
					result == (is_issued_check(mutant[position]) ?
							   BIZNO_BAD_CHECK : BIZNO_UNISSUED_CHECK));
		else
			require(result != BIZNO_UNISSUED_CHECK);
	}

	/* one adjacent transposition: no check character is said to be right */
	position = data[13] % (len - 1);
	memcpy(mutant, bizno, len + 1);
	mutant[position] = bizno[position + 1];
	mutant[position + 1] = bizno[position];
	if (mutant[position] != bizno[position])
	{
		result = bizno_parse(mutant, len, &parts, &expected_check);
		require(result != BIZNO_VALID && result != BIZNO_UNISSUED_CHECK);
	}

	/* one character dropped: caught, and still taken for a bizNo */
	position = data[12] % len;
	memcpy(mutant, bizno, position);
	memcpy(mutant + position, bizno + position + 1, len - position);
	require(bizno_parse(mutant, len - 1, &parts, &expected_check) != BIZNO_VALID);
	require(bizno_resembles_generated(mutant, len - 1));

	/* one character added: caught, and still taken for a bizNo */
	position = data[15] % (len + 1);
	memcpy(mutant, bizno, position);
	mutant[position] = key_alphabet[data[14] % 66];
	memcpy(mutant + position + 1, bizno + position, len - position + 1);
	require(bizno_parse(mutant, len + 1, &parts, &expected_check) != BIZNO_VALID);
	require(bizno_resembles_generated(mutant, len + 1));

	/*
	 * another last digit of the uniqueness part, which the generator may
	 * have stepped past, and a check character of a-z or -.:_: it never
	 * passes, even where it is the one that fits the rest
	 */
	memcpy(mutant, bizno, len + 1);
	mutant[len - 2] = crockford_digits[data[12] % 32];
	mutant[len - 1] = key_alphabet[36 + data[13] % 30];
	require(bizno_parse(mutant, len, &parts, &expected_check) != BIZNO_VALID);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	check_arbitrary_input((const char *) data, size);
	if (size >= 16)
		check_generated(data, size);
	return 0;
}
