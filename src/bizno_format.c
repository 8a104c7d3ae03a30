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
 * detected.  Only check characters of [0-9A-Z] pass: a key whose sum
 * vanishes with a check character of a-z or -.:_ was never issued, and is
 * refused.
 *
 * The weighted sum alone lets a dropped or added character in the prefix or
 * biz_id through one time in 67: the tail keeps its shape, and the sum
 * changes by an arbitrary amount.  So the bizNos of 1.4 carry a mark, and a
 * marked bizNo must also make its plain sum -- the sum of the values plus
 * the length -- vanish modulo 67.  Dropping a character of value v changes
 * that sum by -(v + 1), adding one by v + 1, and 1 <= v + 1 <= 66: never 0
 * modulo 67.  The mark is the 65th bit of the uniqueness part: its thirteen
 * base-32 digits hold 65 bits, and the 64-bit values of 1.3 never set it, so
 * the first digit of a 1.3 bizNo is one of 0-F and that of a 1.4 bizNo one
 * of G-Z.  An edit keeps the mark or destroys the structure: the mark sits
 * at a fixed distance from the end, and a character dropped or added at or
 * after it moves the separator before it.  A substitution that clears the
 * mark leaves a key judged by the weighted sum, which catches it.  So every
 * single substitution, adjacent transposition, dropped, added or doubled
 * character of a 1.4 bizNo is caught; the bizNos of 1.3 keep their rule and
 * stay valid.
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

/* the first digit of a marked uniqueness part has the 65th bit: G-Z */
#define MARKED_DIGIT		16

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

/*
 * Weighted sum modulo 67 of len characters that start at position start;
 * len is at most a key's length, so the sum fits an int before the modulo.
 */
static int
weighted_sum(const char *s, size_t start, size_t len)
{
	int			sum = 0;
	int			weight = check_weight(start);

	for (size_t i = 0; i < len; i++)
	{
		sum += weight * key_char_value((unsigned char) s[i]);
		weight = weight == ALPHABET_SIZE ? 1 : weight + 1;
	}
	return sum % CHECK_MODULUS;
}

/* The sum of the values of len characters modulo 67. */
static int
value_sum(const char *s, size_t len)
{
	int			sum = 0;

	for (size_t i = 0; i < len; i++)
		sum += key_char_value((unsigned char) s[i]);
	return sum % CHECK_MODULUS;
}

/* The plain sum of a whole key: its values plus its length, modulo 67. */
static int
plain_sum(const char *s, size_t len)
{
	return (value_sum(s, len) + (int) (len % CHECK_MODULUS)) % CHECK_MODULUS;
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

/* 1 + the digit of each Crockford character; 0 for any other byte */
static const unsigned char crockford_digits[256] = {
	['0'] = 1, ['1'] = 2, ['2'] = 3, ['3'] = 4, ['4'] = 5, ['5'] = 6, ['6'] = 7,
	['7'] = 8, ['8'] = 9, ['9'] = 10, ['A'] = 11, ['B'] = 12, ['C'] = 13,
	['D'] = 14, ['E'] = 15, ['F'] = 16, ['G'] = 17, ['H'] = 18, ['J'] = 19,
	['K'] = 20, ['M'] = 21, ['N'] = 22, ['P'] = 23, ['Q'] = 24, ['R'] = 25,
	['S'] = 26, ['T'] = 27, ['V'] = 28, ['W'] = 29, ['X'] = 30, ['Y'] = 31,
	['Z'] = 32
};

/* The digit of a Crockford character, or -1. */
static int
crockford_digit(unsigned char c)
{
	return (int) crockford_digits[c] - 1;
}

static bool
is_crockford(unsigned char c)
{
	return crockford_digit(c) >= 0;
}

/* Whether a uniqueness part that starts with c is marked: a 1.4 bizNo. */
static bool
is_marked(unsigned char c)
{
	return crockford_digit(c) >= MARKED_DIGIT;
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
 * The length of the prefix a key starts with: the characters before its
 * first '-' when they make a valid prefix, else 0.
 */
size_t
bizno_key_prefix_len(const char *s, size_t len)
{
	const char *dash = memchr(s, '-', len);

	if (dash == NULL || !bizno_prefix_is_valid(s, (size_t) (dash - s)))
		return 0;
	return (size_t) (dash - s);
}

/* Whether c may stand at offset i of a tail. */
static bool
fits_tail(size_t i, unsigned char c)
{
	if (i == 0 || i == TAIL_NODE_SEP || i == TAIL_UNIQUE_SEP)
		return c == '-';
	if (i < TAIL_UNIQUE)
		return is_digit(c);
	if (i < TAIL_CHECK)
		return is_crockford(c);
	return is_key_char(c);
}

/*
 * Whether the last BIZNO_TAIL_LEN - shift characters of s, len long, are a
 * tail with one character dropped (shift 1) or added (shift -1): the tail
 * read from its start and the tail read from its end must meet.
 */
static bool
is_tail_one_edit_off(const char *s, size_t len, int shift)
{
	size_t		tail_len = (size_t) ((int) BIZNO_TAIL_LEN - shift);
	const char *tail;
	size_t		from_start = 0;
	size_t		from_end = 0;

	if (len < tail_len + 2)
		return false;
	tail = s + len - tail_len;
	while (from_start < tail_len && from_start < BIZNO_TAIL_LEN &&
		   fits_tail(from_start, (unsigned char) tail[from_start]))
		from_start++;
	while (from_end < tail_len && from_end < BIZNO_TAIL_LEN &&
		   fits_tail(BIZNO_TAIL_LEN - 1 - from_end,
					 (unsigned char) tail[tail_len - 1 - from_end]))
		from_end++;
	return from_start + from_end + (shift < 0 ? 1 : 0) >= tail_len;
}

/*
 * Whether a key is a bizNo as bizno_looks_generated says, or one whose tail
 * lost or gained one character: a bizNo with one character dropped, added
 * or doubled anywhere is still recognised (in the prefix or biz_id the tail
 * keeps its shape), and since 1.4 never taken for a key of another system.
 */
bool
bizno_resembles_generated(const char *s, size_t len)
{
	return bizno_looks_generated(s, len) ||
		is_tail_one_edit_off(s, len, 1) || is_tail_one_edit_off(s, len, -1);
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

/*
 * Write the first twelve digits of a marked uniqueness part: the 65th bit
 * and bits 63..5 of unique, bits 14..5 -- the two digits before the last --
 * as t * BIZNO_SEARCH_STRIDE mod 1024 of their value t.  That is a
 * bijection of the ten bits, so distinct values write distinct digits; and
 * where stepping t would change the second digit alone, and try solutions
 * on one line, it changes both: the search ends after about four steps
 * instead of twenty-three.  The last digit is solve_last_digit's.
 */
static void
put_marked_unique(char *buf, uint64_t unique)
{
	uint64_t	high = unique >> 5;

	high = (high & ~(uint64_t) 1023) | ((high & 1023) * BIZNO_SEARCH_STRIDE & 1023);

	for (int i = BIZNO_UNIQUE_LEN - 2; i > 0; i--)
	{
		buf[i] = crockford[high & 31];
		high >>= 5;
	}
	buf[0] = crockford[MARKED_DIGIT | (int) high];
}

/*
 * The last digit of the uniqueness part at position and the check character
 * after it that make both sums of the bizNo vanish, given the weighted sum
 * and the plain sum (length included) of everything before the digit: two
 * linear equations modulo 67 in the two values a and b,
 *
 *	  weighted + w(position) a + w(position + 1) b = 0
 *	  plain + a + b = 0
 *
 * so a (w(position) - w(position + 1)) = w(position + 1) plain - weighted,
 * where the difference of the weights is 66 or 65, invertible.  false when
 * the solution is no Crockford digit or no check character of 0-9A-Z.
 */
static bool
solve_last_digit(int weighted, int plain, size_t position, int *digit, int *check)
{
	int			w_digit = check_weight(position);
	int			w_check = check_weight(position + 1);
	int			a = (w_check * plain - weighted + CHECK_MODULUS * CHECK_MODULUS) %
		CHECK_MODULUS * inverse_mod(w_digit - w_check + CHECK_MODULUS) % CHECK_MODULUS;
	int			b = (2 * CHECK_MODULUS - plain - a) % CHECK_MODULUS;

	*digit = a < ALPHABET_SIZE ? crockford_digit((unsigned char) key_symbols[a]) : -1;
	*check = b;
	return *digit >= 0 && b < READABLE_CHECKS;
}

/*
 * Write a bizNo into buf (at least BIZNO_MAX_LEN + 1 bytes) and return its
 * length.  The caller has validated prefix and biz_id, and issued_ms lies in
 * [0, BIZNO_MS_LIMIT).  The bizNo is marked, and both of its sums vanish.
 *
 * *unique is the first uniqueness value to try, bits 63..5 of the part; the
 * last digit (bits 4..0) is not the caller's: with the check character it
 * solves the two sums.  When that solution is no digit or no readable check
 * character, the value steps by 32, to the next value of the digits before
 * it.  On return *unique holds the value used, last digit included.  Fewer
 * than 2048 steps are taken: any 1024 steps from a multiple of 1024 run the
 * two digits before the last through all their values, and one of those
 * solves, whatever the other characters and the length
 * (test/fuzz/bizno_edits.c checks every case).
 */
size_t
bizno_format(char *buf, const char *prefix, size_t prefix_len,
			 const char *biz_id, size_t biz_id_len,
			 int64_t issued_ms, int node_id, uint64_t *unique)
{
	char	   *tail;
	size_t		tail_start = prefix_len + 1 + biz_id_len;
	size_t		len = tail_start + BIZNO_TAIL_LEN;
	size_t		last_digit = tail_start + TAIL_CHECK - 1;
	int64_t		days = issued_ms / MS_PER_DAY;
	int64_t		ms_of_day = issued_ms % MS_PER_DAY;
	int			year,
				month,
				day;
	int			fixed_weighted;
	int			fixed_plain;
	int			digit;
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

	fixed_weighted = weighted_sum(buf, 0, tail_start + TAIL_UNIQUE);
	fixed_plain = (value_sum(buf, tail_start + TAIL_UNIQUE) + (int) len) % CHECK_MODULUS;
	*unique &= ~(uint64_t) 31;
	for (;;)
	{
		put_marked_unique(tail + TAIL_UNIQUE, *unique);
		if (solve_last_digit((fixed_weighted +
							  weighted_sum(tail + TAIL_UNIQUE, tail_start + TAIL_UNIQUE,
										   BIZNO_UNIQUE_LEN - 1)) % CHECK_MODULUS,
							 (fixed_plain +
							  value_sum(tail + TAIL_UNIQUE, BIZNO_UNIQUE_LEN - 1)) % CHECK_MODULUS,
							 last_digit, &digit, &check))
			break;
		*unique += 32;
	}
	*unique |= (uint64_t) digit;
	tail[TAIL_CHECK - 1] = crockford[digit];
	tail[TAIL_CHECK] = key_symbols[check];
	buf[len] = '\0';
	return len;
}

/*
 * Split s into its parts.  The check passes when the weighted sum vanishes,
 * the plain sum too when the key is marked, and the check character is one
 * of 0-9A-Z.  When the structure is right but the check fails,
 * *expected_check receives the check character that fits the other
 * characters as written if that is one of 0-9A-Z, and '\0' otherwise: the
 * generator writes no other, so no other is ever named.
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
	int			body_sum;
	int			check;
	bool		marked;

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
	marked = is_marked((unsigned char) tail[TAIL_UNIQUE]);
	body_sum = weighted_sum(s, 0, len - 1);
	if (is_issued_check((unsigned char) tail[TAIL_CHECK]) &&
		(body_sum + check_weight(len - 1) * key_char_value((unsigned char) tail[TAIL_CHECK])) %
		CHECK_MODULUS == 0 &&
		(!marked || plain_sum(s, len) == 0))
		return BIZNO_VALID;

	/*
	 * The weighted sum fixes the check character that fits; in a marked key
	 * it fits only if the plain sum then vanishes as well.
	 */
	check = check_value(body_sum, len - 1);
	if (marked && (value_sum(s, len - 1) + check + (int) len) % CHECK_MODULUS != 0)
		check = CHECK_MODULUS;
	*expected_check = check < READABLE_CHECKS ? key_symbols[check] : '\0';
	if (*expected_check != '\0' &&
		!is_issued_check((unsigned char) tail[TAIL_CHECK]))
		return BIZNO_UNISSUED_CHECK;
	return BIZNO_BAD_CHECK;
}
