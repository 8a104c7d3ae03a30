/*-------------------------------------------------------------------------
 *
 * api_args.c
 *	  The API's arguments, read and held to their rules before anything is
 *	  read or written, and the comparisons of what a caller passed with
 *	  what the ledger holds.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/builtins.h"
#include "utils/numeric.h"

#include "amount.h"
#include "api_args.h"
#include "bizno.h"
#include "compat.h"
#include "prefixes.h"
#include "reason.h"
#include "settings.h"
#include "write.h"

const char *
PayKeyDescription(Datum bizno)
{
	return psprintf("bizNo %s", TextDatumGetCString(bizno));
}

/*
 * Refuse a call for a payment the ledger does not have: P0002, or 55000
 * when it was archived (its settlement is over; nothing more happens to it).
 * Call it inside SPI.
 */
void
PayRaiseUnknownPayment(const PayCatalog *catalog, Datum bizno)
{
	if (PayArchiveHolds(catalog, bizno))
		ereport(ERROR,
				(errmsg("payment %s was archived", TextDatumGetCString(bizno)),
				 errdetail("An archived payment is settled for good: it is not charged, settled or refunded again."),
				 PayReason(PAY_REASON_ARCHIVED)));
	ereport(ERROR,
			(errcode(ERRCODE_NO_DATA_FOUND),
			 errmsg("unknown payment %s", TextDatumGetCString(bizno)),
			 errhint("Start the payment first: pay_open, or pay_begin with its amount.")));
}

/* The bizNo argument: required, and a valid key. */
Datum
PayKeyArgument(FunctionCallInfo fcinfo, int argno)
{
	BiznoParts	parts;

	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("bizno must not be null"),
				 errhint("Pass the bizNo the payment was opened with.")));
	BiznoCheckKey(PG_GETARG_TEXT_PP(argno), &parts);
	return PointerGetDatum(PG_GETARG_TEXT_PP(argno));
}

/*
 * Since 1.4, hold a key the ledger does not have to what it claims to be
 * before it is recorded as a new payment.  A bizNo passes.  A key that is
 * a bizNo with a character dropped or added, or that starts with a prefix
 * under which the ledger holds bizNos, is a mistyped bizNo or an order's
 * own id, refused (22P02) whatever the caller accepts.  Any other key is
 * one of another system, recorded only under idempotent_pay.foreign_keys =
 * accept.  Keys the ledger has are never asked: they keep working.  The
 * prefixes issued are known per backend (prefixes.c); a bizNo recorded is
 * one of its prefix.  Call it inside SPI.
 */
void
PayCheckNewKey(const PayCatalog *catalog, Datum key)
{
	text	   *t = DatumGetTextPP(key);
	const char *s = VARDATA_ANY(t);
	size_t		len = VARSIZE_ANY_EXHDR(t);
	size_t		prefix_len;
	BiznoParts	parts;
	char		expected_check;

	if (bizno_parse(s, len, &parts, &expected_check) == BIZNO_VALID)
	{
		PayPrefixNoteIssued(catalog, parts.prefix, parts.prefix_len);
		return;
	}
	if (bizno_resembles_generated(s, len))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
				 errmsg("invalid bizNo: \"%s\"", text_to_cstring(t)),
				 errdetail("It is a bizNo with a character dropped or added, and is not recorded as a new payment."),
				 errhint("Pass the bizNo exactly as pay_open returned it.")));
	prefix_len = bizno_key_prefix_len(s, len);
	if (prefix_len > 0 && PayPrefixIsIssued(catalog, s, prefix_len))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
				 errmsg("invalid bizNo: \"%s\"", text_to_cstring(t)),
				 errdetail("It starts with %.*s, a prefix this database issues bizNos under, but is no bizNo; it is not recorded as a new payment.",
						   (int) prefix_len, s),
				 errhint("Pass the bizNo pay_open returned for the order: prefix and biz_id are pay_open's arguments, not a key.")));
	if (pay_foreign_keys != PAY_FOREIGN_KEYS_ACCEPT)
		ereport(ERROR,
				(errmsg("payment key \"%s\" is not a bizNo", text_to_cstring(t)),
				 errdetail("A key of another system starts a payment only under idempotent_pay.foreign_keys = accept."),
				 PayReason(PAY_REASON_FOREIGN_KEY)));
}

void
PayRequireArgument(FunctionCallInfo fcinfo, int argno, const char *name)
{
	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be null", name),
				 errhint("Pass a value for %s.", name)));
}

/*
 * A text argument that is not required: NULL, or its C string once it is
 * held to the bound of what it is (since 1.3).
 */
const char *
PayBoundedTextArgument(FunctionCallInfo fcinfo, int argno, const char *what,
					int max_chars, PayApi api)
{
	if (PG_ARGISNULL(argno))
		return NULL;
	if (api >= PAY_API_1_3)
		PayCheckTextLength(PG_GETARG_TEXT_PP(argno), what, max_chars);
	return TextDatumGetCString(PG_GETARG_DATUM(argno));
}

/*
 * Amount and currency arguments, each optional, held to amount.c's rule;
 * since 1.3 a currency is an active ISO 4217 code, in whose minor units the
 * amount is given; since 1.4 an amount is at most
 * idempotent_pay.max_amount.
 */
PaymentAmount
PayAmountArguments(FunctionCallInfo fcinfo, int amount_arg, int currency_arg, PayApi api)
{
	PaymentAmount result = {0};

	if (!PG_ARGISNULL(amount_arg))
	{
		PayCheckAmount(PG_GETARG_NUMERIC(amount_arg));
		if (api >= PAY_API_1_4)
			PayCheckAmountBound(PG_GETARG_NUMERIC(amount_arg));
		result.has_amount = true;
		result.amount = PG_GETARG_DATUM(amount_arg);
	}
	if (!PG_ARGISNULL(currency_arg))
	{
		PayCheckCurrency(PG_GETARG_TEXT_PP(currency_arg));
		if (api >= PAY_API_1_3)
			PayCheckCurrencyKnown(PG_GETARG_TEXT_PP(currency_arg));
		result.has_currency = true;
		result.currency = PointerGetDatum(PG_GETARG_TEXT_PP(currency_arg));
	}
	if (api >= PAY_API_1_3 && result.has_amount && result.has_currency)
		PayCheckAmountFits(DatumGetNumeric(result.amount), DatumGetTextPP(result.currency));
	return result;
}

/* Byte equality of two texts: currency codes are ASCII. */
bool
PayTextEqual(Datum a, Datum b)
{
	text	   *x = DatumGetTextPP(a);
	text	   *y = DatumGetTextPP(b);

	return VARSIZE_ANY_EXHDR(x) == VARSIZE_ANY_EXHDR(y) &&
		memcmp(VARDATA_ANY(x), VARDATA_ANY(y), VARSIZE_ANY_EXHDR(x)) == 0;
}

bool
PayAmountFieldDiffers(const LedgerRow *row, const PaymentAmount *amount)
{
	return amount->has_amount &&
		(row->amount_null ||
		 !DatumGetBool(DirectFunctionCall2(numeric_eq, row->amount, amount->amount)));
}

bool
PayCurrencyFieldDiffers(const LedgerRow *row, const PaymentAmount *amount)
{
	return amount->has_currency &&
		(row->currency_null || !PayTextEqual(row->currency, amount->currency));
}

bool
PayAmountDiffers(const LedgerRow *row, const PaymentAmount *amount)
{
	return PayAmountFieldDiffers(row, amount) || PayCurrencyFieldDiffers(row, amount);
}

const char *
PayAmountText(bool amount_null, Datum amount, bool currency_null, Datum currency)
{
	return psprintf("%s %s",
					amount_null ? "(none)" : PayQuoteNumeric(amount),
					currency_null ? "" : PayQuoteTextDatum(currency));
}

