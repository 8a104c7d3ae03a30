/*-------------------------------------------------------------------------
 *
 * amount.c
 *	  The rules for the values a payment is made of: amount, currency, texts.
 *
 * An amount is a finite number greater than 0 (NaN, which PostgreSQL sorts
 * above every number, and Infinity are not amounts); a currency is an ISO
 * 4217 code, three upper-case letters.  The API checks its arguments here
 * and answers 22023; the ledger's columns are of the domains pay_amount and
 * pay_currency, whose CHECKs call pay_amount_valid and pay_currency_valid,
 * so a raw write is held to the same rule (23514).  A domain's constraints
 * are cached by the type cache, not rebuilt for every statement as a
 * table's CHECK is.
 *
 * Since 1.3 a currency is also one of ISO 4217's active codes (currency.c,
 * the view pay_currencies), and an amount has no more decimals than its
 * currency's minor units: 22023 from the API, and from the ledger's
 * bookkeeping trigger for a raw write, which alone sees amount and
 * currency together.  The texts of a payment are bounded (22001), and so
 * is the response stored for replay (54000), so that no caller can make
 * every later read of the payment carry megabytes.
 *
 * Since 1.4 an amount is at most idempotent_pay.max_amount (22003), through
 * the API and the bookkeeping trigger: numeric holds 131072 digits before
 * the point, and no payment needs more than a bigint of minor units.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/detoast.h"
#include "fmgr.h"
#include "mb/pg_wchar.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

#include "amount.h"
#include "compat.h"
#include "currency.h"
#include "reason.h"
#include "settings.h"

PG_FUNCTION_INFO_V1(pay_amount_valid);
PG_FUNCTION_INFO_V1(pay_currency_valid);

bool
PayAmountIsValid(Numeric amount)
{
	static Numeric zero = NULL;

	if (numeric_is_nan(amount) || numeric_is_inf(amount))
		return false;
	if (zero == NULL)
	{
		MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

		zero = int64_to_numeric(0);
		MemoryContextSwitchTo(old);
	}
	return DatumGetInt32(DirectFunctionCall2(numeric_cmp, NumericGetDatum(amount),
											 NumericGetDatum(zero))) > 0;
}

bool
PayCurrencyIsValid(text *currency)
{
	const char *code = VARDATA_ANY(currency);

	if (VARSIZE_ANY_EXHDR(currency) != 3)
		return false;
	for (int i = 0; i < 3; i++)
		if (code[i] < 'A' || code[i] > 'Z')
			return false;
	return true;
}

/* Raise 22023 unless amount is an amount. */
void
PayCheckAmount(Numeric amount)
{
	if (!PayAmountIsValid(amount))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid payment amount %s", PayQuoteNumeric(NumericGetDatum(amount))),
				 errdetail("An amount is a finite number greater than 0."),
				 errhint("Fix the caller: pass the amount to charge, as numeric (never a float).")));
}

/*
 * Raise 22003 when amount is more than idempotent_pay.max_amount.  The
 * bound is kept as a numeric, made again only when the setting changes.
 */
void
PayCheckAmountBound(Numeric amount)
{
	static Numeric bound = NULL;
	static int64 bound_value = 0;

	if (bound == NULL || bound_value != pay_max_amount)
	{
		MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

		if (bound != NULL)
			pfree(bound);
		bound = int64_to_numeric(pay_max_amount);
		bound_value = pay_max_amount;
		MemoryContextSwitchTo(old);
	}
	if (DatumGetInt32(DirectFunctionCall2(numeric_cmp, NumericGetDatum(amount),
										  NumericGetDatum(bound))) <= 0)
		return;
	ereport(ERROR,
			(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
			 errmsg("amount %s is more than idempotent_pay.max_amount (" INT64_FORMAT ")",
					PayQuoteNumeric(NumericGetDatum(amount)), pay_max_amount),
			 errdetail("An amount is at most idempotent_pay.max_amount units of its currency."),
			 errhint("Fix the caller: pass the amount in the currency's units (10.50 for 10.50 EUR). "
					 "An operator may raise idempotent_pay.max_amount, up to " INT64_FORMAT ".",
					 PAY_MAX_AMOUNT_LIMIT)));
}

/* Raise 22023 unless currency is an ISO 4217 code. */
void
PayCheckCurrency(text *currency)
{
	if (!PayCurrencyIsValid(currency))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid currency \"%s\"", PayQuoteText(currency)),
				 errdetail("A currency is an ISO 4217 code: three upper-case letters."),
				 errhint("Fix the caller: pass a code such as EUR, USD or CNY.")));
}

/* Raise 22023 unless currency, of the right form, is an active ISO 4217 code. */
void
PayCheckCurrencyKnown(text *currency)
{
	if (PayCurrencyMinorUnits(VARDATA_ANY(currency), VARSIZE_ANY_EXHDR(currency)) < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unknown currency \"%s\"", PayQuoteText(currency)),
				 errdetail("A payment is in one of ISO 4217's active currencies, as pay_currencies lists them."),
				 errhint("Fix the caller: pass the ISO 4217 code of the currency to charge, such as EUR, USD or JPY.")));
}

/*
 * Raise 22023 unless amount, in currency (an active ISO 4217 code), has no
 * more decimals than the currency's minor units: 10.50 EUR and 10.00 JPY
 * are amounts, 10.005 EUR and 10.5 JPY are not.
 */
void
PayCheckAmountFits(Numeric amount, text *currency)
{
	int			minor_units = PayCurrencyMinorUnits(VARDATA_ANY(currency),
													VARSIZE_ANY_EXHDR(currency));

	if (minor_units < 0 || PayAmountFitsMinorUnits(amount, minor_units))
		return;
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("amount %s has more decimals than %s has",
					PayQuoteNumeric(NumericGetDatum(amount)), PayQuoteText(currency)),
			 errdetail("%s has %d minor unit%s.", PayQuoteText(currency), minor_units,
					   minor_units == 1 ? "" : "s"),
			 errhint("Fix the caller: pass the amount in whole minor units of the currency.")));
}

/*
 * Raise 22001 when value, the text called what, is longer than max_chars
 * characters.
 */
void
PayCheckTextLength(text *value, const char *what, int max_chars)
{
	int			bytes = VARSIZE_ANY_EXHDR(value);

	/* a character is at least one byte: count them only when it matters */
	if (bytes <= max_chars ||
		pg_mbstrlen_with_len(VARDATA_ANY(value), bytes) <= max_chars)
		return;
	ereport(ERROR,
			(errcode(ERRCODE_STRING_DATA_RIGHT_TRUNCATION),
			 errmsg("%s is too long", what),
			 errdetail("A %s holds at most %d characters.", what, max_chars),
			 errhint("Shorten the %s; keep long documents outside the ledger and refer to them.", what)));
}

/*
 * Hold a bank's reference to what a reference can be: 1 to 128 characters,
 * not blank, no control characters (22023, or 22001 when too long).  A
 * success and every second charge are told apart by it, and reconciliation
 * matches it against the bank's statement: an empty reference, or one a
 * statement could never print, would be a charge nobody can find.
 */
void
PayCheckChannelRef(text *channel_ref)
{
	const unsigned char *c = (const unsigned char *) VARDATA_ANY(channel_ref);
	int			bytes = VARSIZE_ANY_EXHDR(channel_ref);
	bool		blank = true;

	PayCheckTextLength(channel_ref, "channel_ref", PAY_CHANNEL_REF_MAX_CHARS);
	/* a byte of a multibyte character is never below 0x80 */
	for (int i = 0; i < bytes; i++)
	{
		if (c[i] < 0x20 || c[i] == 0x7f)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("channel_ref must not contain control characters"),
					 errdetail("Byte %d of the reference is 0x%02x.", i + 1, c[i]),
					 errhint("Pass the bank's reference as the bank prints it.")));
		if (c[i] != ' ')
			blank = false;
	}
	if (blank)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("channel_ref must not be empty or blank"),
				 errhint("Pass the bank's reference of the charge: a success is known by it, and a second charge is told from it.")));
}

/*
 * Raise 54000 when a response to store for replay is larger than
 * idempotent_pay.max_response_bytes.
 */
void
PayCheckResponseSize(Datum response)
{
	Size		size = toast_raw_datum_size(response) - VARHDRSZ;

	if (size <= (Size) pay_max_response_bytes)
		return;
	ereport(ERROR,
			(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
			 errmsg("the response is %zu bytes, more than idempotent_pay.max_response_bytes (%d)",
					size, pay_max_response_bytes),
			 errdetail("Every later claim of the payment replays the stored response."),
			 errhint("Store the answer your caller needs to see again, not the bank's whole message.")));
}

/*
 * pay_amount_valid(numeric) returns boolean
 */
Datum
pay_amount_valid(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(PayAmountIsValid(PG_GETARG_NUMERIC(0)));
}

/*
 * pay_currency_valid(text) returns boolean
 */
Datum
pay_currency_valid(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(PayCurrencyIsValid(PG_GETARG_TEXT_PP(0)));
}
