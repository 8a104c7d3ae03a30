/*-------------------------------------------------------------------------
 *
 * api_args.h
 *	  Reading the API's arguments (api_args.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef PAY_API_ARGS_H
#define PAY_API_ARGS_H

#include "postgres.h"

#include "fmgr.h"

#include "api.h"
#include "catalog.h"
#include "write_rows.h"

extern Datum PayKeyArgument(FunctionCallInfo fcinfo, int argno);
extern void PayCheckNewKey(const PayCatalog *catalog, Datum key);
extern void PayRequireArgument(FunctionCallInfo fcinfo, int argno, const char *name);
extern const char *PayBoundedTextArgument(FunctionCallInfo fcinfo, int argno, const char *what,
										  int max_chars, PayApi api);
extern PaymentAmount PayAmountArguments(FunctionCallInfo fcinfo, int amount_arg,
										int currency_arg, PayApi api);

extern const char *PayKeyDescription(Datum bizno);
extern void PayRaiseUnknownPayment(const PayCatalog *catalog, Datum bizno);
extern bool PayTextEqual(Datum a, Datum b);
extern bool PayAmountFieldDiffers(const LedgerRow *row, const PaymentAmount *amount);
extern bool PayCurrencyFieldDiffers(const LedgerRow *row, const PaymentAmount *amount);
extern bool PayAmountDiffers(const LedgerRow *row, const PaymentAmount *amount);
extern const char *PayAmountText(bool amount_null, Datum amount, bool currency_null,
								 Datum currency);

#endif							/* PAY_API_ARGS_H */
