/*-------------------------------------------------------------------------
 *
 * bizno_format.c
 *	  Formatting, parsing and the check character of bizNos.
 *
 * The check character makes the weighted sum of the whole string vanish
 * modulo 67.  Every character of the key alphabet has a value 0..65 (66
 * symbols); 67 is prime and larger than any difference of two values, and
 * the weight of position i is (i mod 66) + 1, never 0 mod 67 and never equal
 * for neighbours.  So a single substitution changes the sum by w*d != 0 and
 * an adjacent transposition by (a-b)(w_i - w_i+1) != 0: both are always
 * detected.  The generator only emits check characters of [0-9A-Z] by
 * stepping the uniqueness part until the check value is one of them, and
 * the parser takes no other: a key whose sum vanishes with a check character
 * of a-z or -.:_ was never issued, and is refused.
 *
 * No server headers here: this file is compiled on its own for fuzzing.
 *
 *-------------------------------------------------------------------------
 */
#include "bizno_format.h"

#include <string.h>

#define CHECK_MODULUS		67
#define ALPHABET_SIZE		66
/* check values below this are the characters 0-9A-Z, the check alphabet */
#define READABLE_CHECKS		36

#define MS_PER_DAY			INT64_C(86400000)

/* Offsets of the tail's parts, counted from the start of the tail. */
#define TAIL_TIME			1
#define TAIL_NODE_SEP		(TAIL_TIME + BIZNO_TIME_LEN)
#define TAIL_NODE			(TAIL_NODE_SEP + 1)
#define TAIL_UNIQUE_SEP		(TAIL_NODE + BIZNO_NODE_LEN)
#define TAIL_UNIQUE			(TAIL_UNIQUE_SEP + 1)
#define TAIL_CHECK			(TAIL_UNIQUE + BIZNO_UNIQUE_LEN)

static const char key_symbols[ALPHABET_SIZE + 1] =
"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz-.:_";

/* Crockford's base 32: no I, L, O, U to misread. */
static const char crockford[33] = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";

/* The value of a key character, or -1 for a character outside the alphabet. */
static int
key_char_value(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'A' && c <= 'Z')
		return 10 + c - 'A';
	if (c >= 'a' && c <= 'z')
		return 36 + c - 'a';
	switch (c)
	{
		case '-':
			return 62;
		case '.':
			return 63;
		case ':':
			return 64;
		case '_':
			return 65;
		default:
			return -1;
	}
}

static int
check_weight(size_t position)
{
	return (int) (position % ALPHABET_SIZE) + 1;
}

/* Weighted sum modulo 67 of len characters that start at position start. */
static int
weighted_sum(const char *s, size_t start, size_t len)
{
	int			sum = 0;

	for (size_t i = 0; i < len; i++)
		sum = (sum + check_weight(start + i) *
			   key_char_value((unsigned char) s[i])) % CHECK_MODULUS;
	return sum;
}

/* The inverse of w modulo 67 (Fermat: w^65). */
static int
inverse_mod(int w)
{
	int			result = 1;
	int			base = w % CHECK_MODULUS;
	int			exponent = CHECK_MODULUS - 2;

	while (exponent > 0)
	{
		if (exponent & 1)
			result = result * base % CHECK_MODULUS;
		base = base * base % CHECK_MODULUS;
		exponent >>= 1;
	}
	return result;
}

/* The check value that makes body_sum vanish when placed at position. */
static int
check_value(int body_sum, size_t position)
{
	return (CHECK_MODULUS - body_sum) % CHECK_MODULUS *
		inverse_mod(check_weight(position)) % CHECK_MODULUS;
}

static bool
all_chars_valid(const char *s, size_t len, bool (*valid) (unsigned char))
{
	for (size_t i = 0; i < len; i++)
		if (!valid((unsigned char) s[i]))
			return false;
	return true;
}

static bool
is_prefix_char(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

static bool
is_key_char(unsigned char c)
{
	return key_char_value(c) >= 0;
}

/* Whether c is a check character the generator writes: 0-9A-Z. */
static bool
is_issued_check(unsigned char c)
{
	int			value = key_char_value(c);

	return value >= 0 && value < READABLE_CHECKS;
}

static bool
is_digit(unsigned char c)
{
	return c >= '0' && c <= '9';
}

static bool
is_crockford(unsigned char c)
{
	for (int i = 0; i < 32; i++)
		if (crockford[i] == c)
			return true;
	return false;
}

bool
bizno_prefix_is_valid(const char *s, size_t len)
{
	return len >= 1 && len <= BIZNO_PREFIX_MAX_LEN &&
		all_chars_valid(s, len, is_prefix_char);
}

bool
bizno_biz_id_is_valid(const char *s, size_t len)
{
	return len >= 1 && len <= BIZNO_BIZ_ID_MAX_LEN &&
		all_chars_valid(s, len, is_key_char);
}

bool
bizno_key_is_valid(const char *s, size_t len)
{
	return len >= 1 && len <= BIZNO_KEY_MAX_LEN &&
		all_chars_valid(s, len, is_key_char);
}

/*
 * Whether a key claims to be a generated bizNo: at least two of the three
 * separators of the tail are in place.  One substitution or transposition
 * moves at most one of them, so a mistyped bizNo is still recognised and
 * its check character is still enforced.
 */
bool
bizno_looks_generated(const char *s, size_t len)
{
	const char *tail;
	int			separators;

	if (len < 3 + BIZNO_TAIL_LEN)
		return false;
	tail = s + len - BIZNO_TAIL_LEN;
	separators = (tail[0] == '-') + (tail[TAIL_NODE_SEP] == '-') +
		(tail[TAIL_UNIQUE_SEP] == '-');
	return separators >= 2;
}

/*
 * The business action under which the ledger issues a refund of a payment
 * keyed by another system: prefix REFUND, and as much of the key as a
 * biz_id holds.  The router (route.c) sends a key of another system and a
 * bizNo of prefix REFUND by that biz_id alone, so that such a refund goes
 * where its payment is; both ask this function.
 */
void
bizno_action_of_foreign_key(const char *key, size_t len, BiznoParts *action)
{
	action->prefix = BIZNO_REFUND_PREFIX;
	action->prefix_len = strlen(BIZNO_REFUND_PREFIX);
	action->biz_id = key;
	action->biz_id_len = len < BIZNO_BIZ_ID_MAX_LEN ? len : BIZNO_BIZ_ID_MAX_LEN;
	action->issued_ms = 0;
	action->node_id = 0;
}

/* Whether prefix is the one refunds of foreign-keyed payments are issued under. */
bool
bizno_prefix_is_refund(const char *prefix, size_t len)
{
	return len == strlen(BIZNO_REFUND_PREFIX) &&
		memcmp(prefix, BIZNO_REFUND_PREFIX, len) == 0;
}

/* Civil date from days since 1970-01-01 (H. Hinnant's algorithm). */
static void
civil_from_days(int64_t days, int *year, int *month, int *day)
{
	int64_t		z = days + 719468;
	int64_t		era = (z >= 0 ? z : z - 146096) / 146097;
	unsigned	doe = (unsigned) (z - era * 146097);
	unsigned	yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	unsigned	doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	unsigned	mp = (5 * doy + 2) / 153;

	*day = (int) (doy - (153 * mp + 2) / 5 + 1);
	*month = (int) (mp < 10 ? mp + 3 : mp - 9);
	*year = (int) (yoe + era * 400 + (*month <= 2));
}

/* Days since 1970-01-01 of a civil date (H. Hinnant's algorithm). */
static int64_t
days_from_civil(int year, int month, int day)
{
	int64_t		y = year - (month <= 2);
	int64_t		era = (y >= 0 ? y : y - 399) / 400;
	unsigned	yoe = (unsigned) (y - era * 400);
	unsigned	doy = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1;
	unsigned	doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;

	return era * 146097 + (int64_t) doe - 719468;
}

static int
days_in_month(int year, int month)
{
	static const int days[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
	bool		leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;

	return days[month - 1] + (month == 2 && leap);
}

static void
put_digits(char *buf, int64_t value, int width)
{
	for (int i = width - 1; i >= 0; i--)
	{
		buf[i] = (char) ('0' + value % 10);
		value /= 10;
	}
}

static int
get_digits(const char *s, int width)
{
	int			value = 0;

	for (int i = 0; i < width; i++)
		value = value * 10 + (s[i] - '0');
	return value;
}

static void
put_unique(char *buf, uint64_t unique)
{
	for (int i = BIZNO_UNIQUE_LEN - 1; i >= 0; i--)
	{
		buf[i] = crockford[unique & 31];
		unique >>= 5;
	}
}

/*
 * Write a bizNo into buf (at least BIZNO_MAX_LEN + 1 bytes) and return its
 * length.  The caller has validated prefix and biz_id, and issued_ms lies in
 * [0, BIZNO_MS_LIMIT).  *unique is the first uniqueness value to try; on
 * return it holds the one used, the smallest not below it whose check
 * character is one of 0-9A-Z.  Fewer than 64 values are skipped: the 32
 * values of the last digit give 32 distinct check values (the digit's
 * weight is invertible mod 67), more than the 31 unreadable ones, so every
 * run of the last digit holds a readable one.
 */
size_t
bizno_format(char *buf, const char *prefix, size_t prefix_len,
			 const char *biz_id, size_t biz_id_len,
			 int64_t issued_ms, int node_id, uint64_t *unique)
{
	char	   *tail;
	size_t		tail_start = prefix_len + 1 + biz_id_len;
	int64_t		days = issued_ms / MS_PER_DAY;
	int64_t		ms_of_day = issued_ms % MS_PER_DAY;
	int			year,
				month,
				day;
	int			fixed_sum;
	int			check;

	memcpy(buf, prefix, prefix_len);
	buf[prefix_len] = '-';
	memcpy(buf + prefix_len + 1, biz_id, biz_id_len);
	tail = buf + tail_start;

	civil_from_days(days, &year, &month, &day);
	tail[0] = '-';
	put_digits(tail + TAIL_TIME, year, 4);
	put_digits(tail + TAIL_TIME + 4, month, 2);
	put_digits(tail + TAIL_TIME + 6, day, 2);
	put_digits(tail + TAIL_TIME + 8, ms_of_day / 3600000, 2);
	put_digits(tail + TAIL_TIME + 10, ms_of_day / 60000 % 60, 2);
	put_digits(tail + TAIL_TIME + 12, ms_of_day / 1000 % 60, 2);
	put_digits(tail + TAIL_TIME + 14, ms_of_day % 1000, 3);
	tail[TAIL_NODE_SEP] = '-';
	put_digits(tail + TAIL_NODE, node_id, BIZNO_NODE_LEN);
	tail[TAIL_UNIQUE_SEP] = '-';

	fixed_sum = weighted_sum(buf, 0, tail_start + TAIL_UNIQUE);
	for (;;)
	{
		put_unique(tail + TAIL_UNIQUE, *unique);
		check = check_value((fixed_sum +
							 weighted_sum(tail + TAIL_UNIQUE,
										  tail_start + TAIL_UNIQUE,
										  BIZNO_UNIQUE_LEN)) % CHECK_MODULUS,
							tail_start + TAIL_CHECK);
		if (check < READABLE_CHECKS)
			break;
		(*unique)++;
	}
	tail[TAIL_CHECK] = key_symbols[check];
	buf[tail_start + BIZNO_TAIL_LEN] = '\0';
	return tail_start + BIZNO_TAIL_LEN;
}

/*
 * Split s into its parts.  The check passes when the weighted sum vanishes
 * and the check character is one of 0-9A-Z.  When the structure is right
 * but the check fails, *expected_check receives the check character that
 * fits the other characters as written if that is one of 0-9A-Z, and '\0'
 * otherwise: the generator writes no other, so no other is ever named.
 *
 * The result is then BIZNO_UNISSUED_CHECK when the check character as
 * written is none of 0-9A-Z but *expected_check is one: one error explains
 * that only as a mistyped check character, and *expected_check is what it
 * should be.  Otherwise it is BIZNO_BAD_CHECK, and any character may be the
 * mistyped one, or two neighbours swapped: *expected_check is only what the
 * check character of s as written would be, not a correction.
 */
BiznoParseResult
bizno_parse(const char *s, size_t len, BiznoParts *parts, char *expected_check)
{
	const char *dash;
	const char *tail;
	int			year,
				month,
				day,
				hour,
				minute,
				second,
				millisecond;
	int			check;

	if (len < 3 + BIZNO_TAIL_LEN || len > BIZNO_MAX_LEN)
		return BIZNO_MALFORMED;

	dash = memchr(s, '-', len);
	tail = s + len - BIZNO_TAIL_LEN;
	if (dash == NULL || dash >= tail ||
		!bizno_prefix_is_valid(s, (size_t) (dash - s)) ||
		!bizno_biz_id_is_valid(dash + 1, (size_t) (tail - dash - 1)))
		return BIZNO_MALFORMED;

	if (tail[0] != '-' || tail[TAIL_NODE_SEP] != '-' ||
		tail[TAIL_UNIQUE_SEP] != '-' ||
		!all_chars_valid(tail + TAIL_TIME, BIZNO_TIME_LEN, is_digit) ||
		!all_chars_valid(tail + TAIL_NODE, BIZNO_NODE_LEN, is_digit) ||
		!all_chars_valid(tail + TAIL_UNIQUE, BIZNO_UNIQUE_LEN, is_crockford) ||
		!is_key_char((unsigned char) tail[TAIL_CHECK]))
		return BIZNO_MALFORMED;

	year = get_digits(tail + TAIL_TIME, 4);
	month = get_digits(tail + TAIL_TIME + 4, 2);
	day = get_digits(tail + TAIL_TIME + 6, 2);
	hour = get_digits(tail + TAIL_TIME + 8, 2);
	minute = get_digits(tail + TAIL_TIME + 10, 2);
	second = get_digits(tail + TAIL_TIME + 12, 2);
	millisecond = get_digits(tail + TAIL_TIME + 14, 3);
	if (year < 1970 || month < 1 || month > 12 ||
		day < 1 || day > days_in_month(year, month) ||
		hour > 23 || minute > 59 || second > 59)
		return BIZNO_MALFORMED;

	parts->prefix = s;
	parts->prefix_len = (size_t) (dash - s);
	parts->biz_id = dash + 1;
	parts->biz_id_len = (size_t) (tail - dash - 1);
	parts->node_id = get_digits(tail + TAIL_NODE, BIZNO_NODE_LEN);
	parts->issued_ms = days_from_civil(year, month, day) * MS_PER_DAY +
		((hour * 60 + minute) * 60 + second) * INT64_C(1000) + millisecond;
	if (parts->node_id > BIZNO_NODE_ID_MAX)
		return BIZNO_MALFORMED;

	/*
	 * The sum vanishes for the one character of the key alphabet that fits
	 * the others, and that one is a check character only if the generator
	 * writes it.  When one of a-z or -.:_ fits, the check below finds it and
	 * names none: no check character of 0-9A-Z fits, so another character
	 * is wrong.
	 */
	if (is_issued_check((unsigned char) tail[TAIL_CHECK]) &&
		weighted_sum(s, 0, len) == 0)
		return BIZNO_VALID;

	check = check_value(weighted_sum(s, 0, len - 1), len - 1);
	*expected_check = check < READABLE_CHECKS ? key_symbols[check] : '\0';
	if (*expected_check != '\0' &&
		!is_issued_check((unsigned char) tail[TAIL_CHECK]))
		return BIZNO_UNISSUED_CHECK;
	return BIZNO_BAD_CHECK;
}
