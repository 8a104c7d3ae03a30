/*-------------------------------------------------------------------------
 *
 * bizno.c
 *	  pay_bizno, pay_bizno_valid, pay_bizno_parse: bizNos in SQL.
 *
 * The grammar and the check character live in bizno_format.c; this file
 * adds the clock, the randomness and the SQL interface.
 *
 * Uniqueness: a bizNo carries (node id, millisecond, uniqueness part), and
 * the uniqueness part is (process slot, counter) and a last digit that
 * bizno_format chooses with the check character.  The process slot
 * (PGPROC number) is held by one live backend at a time, so two concurrent
 * backends of one node never share a value.  In one backend the pair
 * (millisecond, counter) strictly increases: a new millisecond starts the
 * counter at a random point drawn with pg_strong_random, and every further
 * id in the same millisecond -- or after the wall clock stepped back, when
 * we keep the last millisecond (RFC 9562 section 6.2) -- takes the next
 * value.  Only a later backend in the same slot that issues in the same
 * millisecond (a clock stepped back, possibly across a restart) relies on
 * the random start, which README.md bounds.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "fmgr.h"
#include "funcapi.h"
#include "port.h"
#include "storage/proc.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "bizno.h"
#include "bizno_format.h"
#include "compat.h"
#include "reason.h"
#include "settings.h"

/* milliseconds from 1970-01-01 to 2000-01-01, PostgreSQL's epoch */
#define POSTGRES_EPOCH_MS \
	((int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY * 1000)

/*
 * The uniqueness part below its mark (the 65th bit, bizno_format's): the
 * process slot in the top SLOT_BITS bits, the counter below, and the last
 * digit's DIGIT_BITS, which are not the counter's.  A counter starts below
 * COUNTER_START_LIMIT, so at least as many ids again fit into one
 * millisecond before it reaches COUNTER_LIMIT and the millisecond is
 * advanced instead.
 */
#define SLOT_BITS				18
#define DIGIT_BITS				5
#define COUNTER_BITS			(64 - SLOT_BITS - DIGIT_BITS)
#define COUNTER_LIMIT			(UINT64CONST(1) << COUNTER_BITS)
#define COUNTER_START_LIMIT		(UINT64CONST(1) << (COUNTER_BITS - 1))
/* bizno_format steps the counter past fewer values than this */
#define CHECK_SKIP_MARGIN		2048

/* The millisecond of the last bizNo this backend issued, -1 before any. */
static int64 last_issued_ms = -1;
/* The counter the next bizNo in last_issued_ms starts from. */
static uint64 next_counter;

PG_FUNCTION_INFO_V1(pay_bizno);
PG_FUNCTION_INFO_V1(pay_bizno_valid);
PG_FUNCTION_INFO_V1(pay_bizno_parse);

static int64
CurrentUnixMilliseconds(void)
{
	int64		ms = GetCurrentTimestamp() / 1000 + POSTGRES_EPOCH_MS;

	return Max(ms, 0);
}

/*
 * Write a new bizNo into buf (BIZNO_MAX_LEN + 1 bytes) and return its
 * length.  The caller has validated prefix and biz_id.
 */
size_t
BiznoGenerate(char *buf, const char *prefix, size_t prefix_len,
			  const char *biz_id, size_t biz_id_len)
{
	int64		now_ms = CurrentUnixMilliseconds();
	uint64		slot = (uint64) PayMyProcNumber() & ((UINT64CONST(1) << SLOT_BITS) - 1);
	uint64		unique;
	size_t		len;

	if (now_ms <= last_issued_ms &&
		next_counter >= COUNTER_LIMIT - CHECK_SKIP_MARGIN)
		now_ms = last_issued_ms + 1;	/* counter exhausted: step the time */

	if (now_ms > last_issued_ms)
	{
		if (!pg_strong_random(&next_counter, sizeof(next_counter)))
			ereport(ERROR,
					(errcode(ERRCODE_INTERNAL_ERROR),
					 errmsg("could not generate random values for a bizNo")));
		next_counter &= COUNTER_START_LIMIT - 1;
		last_issued_ms = now_ms;
	}

	unique = (slot << (COUNTER_BITS + DIGIT_BITS)) | (next_counter << DIGIT_BITS);
	len = bizno_format(buf, prefix, prefix_len, biz_id, biz_id_len,
					   last_issued_ms, pay_node_id, &unique);
	next_counter = ((unique >> DIGIT_BITS) & (COUNTER_LIMIT - 1)) + 1;
	return len;
}

/*
 * Raise 22023 unless prefix and biz_id may make a bizNo.
 */
void
BiznoCheckParts(text *prefix, text *biz_id)
{
	if (!bizno_prefix_is_valid(VARDATA_ANY(prefix), VARSIZE_ANY_EXHDR(prefix)))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid bizNo prefix \"%s\"", PayQuoteText(prefix)),
				 errdetail("A prefix is 1 to %d characters of A-Z and 0-9.",
						   BIZNO_PREFIX_MAX_LEN),
				 errhint("Fix the caller: the prefix names the kind of business action, e.g. PAY.")));
	if (!bizno_biz_id_is_valid(VARDATA_ANY(biz_id), VARSIZE_ANY_EXHDR(biz_id)))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid bizNo biz_id \"%s\"", PayQuoteText(biz_id)),
				 errdetail("A biz_id is 1 to %d characters of A-Z, a-z, 0-9, '.', '_', ':' and '-'.",
						   BIZNO_BIZ_ID_MAX_LEN),
				 errhint("Fix the caller: the biz_id is the business action's own id, e.g. the order number.")));
}

/*
 * Raise 22023 when biz_id is a bizNo, or one mistyped (since 1.4): a
 * business action is named by its own id, and a bizNo passed in its place
 * would open a second payment of the action the bizNo names.  pay_open asks
 * before it records a new business action.
 */
void
BiznoCheckBizIdIsNoBizno(text *biz_id)
{
	if (bizno_resembles_generated(VARDATA_ANY(biz_id), VARSIZE_ANY_EXHDR(biz_id)))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid bizNo biz_id \"%s\": it is a bizNo", text_to_cstring(biz_id)),
				 errdetail("A biz_id is the business action's own id; a bizNo names a payment already."),
				 errhint("To claim the payment of that bizNo, call pay_claim with it; to open one, pass the order's own id as biz_id.")));
}

/*
 * pay_bizno(prefix text, biz_id text) returns text
 */
Datum
pay_bizno(PG_FUNCTION_ARGS)
{
	text	   *prefix;
	text	   *biz_id;
	char		buf[BIZNO_MAX_LEN + 1];
	size_t		len;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("prefix and biz_id of a bizNo must not be null"),
				 errhint("Pass both: they name the business action the bizNo is for.")));

	prefix = PG_GETARG_TEXT_PP(0);
	biz_id = PG_GETARG_TEXT_PP(1);
	BiznoCheckParts(prefix, biz_id);

	len = BiznoGenerate(buf, VARDATA_ANY(prefix), VARSIZE_ANY_EXHDR(prefix),
						VARDATA_ANY(biz_id), VARSIZE_ANY_EXHDR(biz_id));
	PG_RETURN_TEXT_P(cstring_to_text_with_len(buf, (int) len));
}

/*
 * pay_bizno_valid(text) returns boolean; never raises.
 */
Datum
pay_bizno_valid(PG_FUNCTION_ARGS)
{
	text	   *bizno = PG_GETARG_TEXT_PP(0);
	BiznoParts	parts;
	char		expected_check;

	PG_RETURN_BOOL(bizno_parse(VARDATA_ANY(bizno), VARSIZE_ANY_EXHDR(bizno),
							   &parts, &expected_check) == BIZNO_VALID);
}

/*
 * Raise 22P02 unless bizno parses and passes its check character.  The
 * detail names a check character only when the generator could have written
 * it, and says it should be that one only when the check character as
 * written is none the generator writes: otherwise any character, or a swap
 * of two, may be the error, and a check character changed to fit the rest
 * would make a bizNo that passes but was never issued.
 */
static void
ParseBiznoOrError(text *bizno, BiznoParts *parts)
{
	const char *s = VARDATA_ANY(bizno);
	size_t		len = VARSIZE_ANY_EXHDR(bizno);
	char		expected_check = '\0';

	switch (bizno_parse(s, len, parts, &expected_check))
	{
		case BIZNO_VALID:
			return;
		case BIZNO_MALFORMED:
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
					 errmsg("invalid bizNo: \"%s\"", PayQuoteText(bizno)),
					 errdetail("A bizNo reads PREFIX-BIZID-YYYYMMDDHHMMSSmmm-NNNN-UUUUUUUUUUUUUC."),
					 errhint("Pass the bizNo exactly as pay_bizno or pay_open returned it.")));
			break;
		case BIZNO_UNISSUED_CHECK:
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
					 errmsg("invalid check character for bizNo \"%s\"",
							PayQuoteText(bizno)),
					 errdetail("The check character should be '%c': bizNos are issued with a check character of 0-9 or A-Z, never '%c'.",
							   expected_check, s[len - 1]),
					 errhint("The bizNo was mistyped or corrupted on its way: pass it exactly as it was issued.")));
			break;
		case BIZNO_BAD_CHECK:
			if (expected_check != '\0')
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
						 errmsg("invalid check character for bizNo \"%s\"",
								PayQuoteText(bizno)),
						 errdetail("The bizNo does not check out: a character was mistyped or two neighbouring characters were swapped. For its other characters as written, the check character would be '%c', not '%c'.",
								   expected_check, s[len - 1]),
						 errhint("Pass the bizNo exactly as it was issued: a check character changed to fit could hide a typo elsewhere.")));
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
					 errmsg("invalid check character for bizNo \"%s\"",
							PayQuoteText(bizno)),
					 errdetail("The bizNo does not check out, and no check character of 0-9 or A-Z fits its other characters as written: one of them was mistyped or two neighbouring characters were swapped."),
					 errhint("The bizNo was mistyped or corrupted on its way: pass it exactly as it was issued.")));
			break;
	}
}

/*
 * Check a payment key: 1 to 128 characters of [A-Za-z0-9_.:-]; a key that
 * looks generated by pay_bizno must also pass its check character.  Returns
 * whether the key is a generated bizNo, whose parts then fill *parts.
 */
bool
BiznoCheckKey(text *key, BiznoParts *parts)
{
	if (!bizno_key_is_valid(VARDATA_ANY(key), VARSIZE_ANY_EXHDR(key)))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
				 errmsg("invalid payment key: \"%s\"", PayQuoteText(key)),
				 errdetail("A key is 1 to %d characters of A-Z, a-z, 0-9, '.', '_', ':' and '-'.",
						   BIZNO_KEY_MAX_LEN),
				 errhint("Fix the caller: pass the bizNo of the payment, or a key of that shape.")));
	if (!bizno_looks_generated(VARDATA_ANY(key), VARSIZE_ANY_EXHDR(key)))
		return false;
	ParseBiznoOrError(key, parts);
	return true;
}

/*
 * pay_bizno_parse(text, OUT prefix text, OUT biz_id text,
 *				   OUT issued_at timestamptz, OUT node_id int)
 */
Datum
pay_bizno_parse(PG_FUNCTION_ARGS)
{
	text	   *bizno = PG_GETARG_TEXT_PP(0);
	BiznoParts	parts;
	TupleDesc	tupdesc;
	Datum		values[4];
	bool		nulls[4] = {false, false, false, false};

	ParseBiznoOrError(bizno, &parts);

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");

	values[0] = PointerGetDatum(cstring_to_text_with_len(parts.prefix,
														 (int) parts.prefix_len));
	values[1] = PointerGetDatum(cstring_to_text_with_len(parts.biz_id,
														 (int) parts.biz_id_len));
	values[2] = TimestampTzGetDatum((parts.issued_ms - POSTGRES_EPOCH_MS) * 1000);
	values[3] = Int32GetDatum(parts.node_id);

	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}
