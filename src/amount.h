/*-------------------------------------------------------------------------
 *
 * amount.h
 *	  The one rule for amounts and currencies.
 *
 *-------------------------------------------------------------------------
 */
#ifndef AMOUNT_H
#define AMOUNT_H

#include "postgres.h"

#include "utils/numeric.h"

extern bool PayAmountIsValid(Numeric amount);
extern bool PayCurrencyIsValid(text *currency);
extern void PayCheckAmount(Numeric amount);
extern void PayCheckCurrency(text *currency);

#endif							/* AMOUNT_H */
