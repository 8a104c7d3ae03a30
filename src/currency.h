/*-------------------------------------------------------------------------
 *
 * currency.h
 *	  The active ISO 4217 currency codes and their minor units.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PAY_CURRENCY_H
#define PAY_CURRENCY_H

#include "utils/numeric.h"

/*
 * The minor units of an active ISO 4217 code (code need not be
 * NUL-terminated), or -1 when code is not one.
 */
extern int	PayCurrencyMinorUnits(const char *code, size_t len);

/*
 * Whether amount, a finite numeric, has no more decimals than minor_units
 * allow: its value times 10^minor_units is an integer (so 10.50 EUR and
 * 10.00 JPY pass, 10.005 EUR and 10.5 JPY do not).
 */
extern bool PayAmountFitsMinorUnits(Numeric amount, int minor_units);

#endif							/* PAY_CURRENCY_H */
