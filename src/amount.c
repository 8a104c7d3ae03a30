/*-------------------------------------------------------------------------
 *
 * amount.c
 *	  The one rule for amounts and currencies, for the API and the tables.
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
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

#include "amount.h"

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
				 errmsg("invalid payment amount %s",
						DatumGetCString(DirectFunctionCall1(numeric_out,
															NumericGetDatum(amount)))),
				 errdetail("An amount is a finite number greater than 0."),
				 errhint("Fix the caller: pass the amount to charge, as numeric (never a float).")));
}

/* Raise 22023 unless currency is an ISO 4217 code. */
void
PayCheckCurrency(text *currency)
{
	if (!PayCurrencyIsValid(currency))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid currency \"%s\"", text_to_cstring(currency)),
				 errdetail("A currency is an ISO 4217 code: three upper-case letters."),
				 errhint("Fix the caller: pass a code such as EUR, USD or CNY.")));
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
