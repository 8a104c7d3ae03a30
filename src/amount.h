/*-------------------------------------------------------------------------
 *
 * amount.h
 *	  The rules for a payment's values: amount, currency, bounded texts.
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
extern void PayCheckAmountBound(Numeric amount);
extern void PayCheckCurrency(text *currency);
extern void PayCheckCurrencyKnown(text *currency);
extern void PayCheckAmountFits(Numeric amount, text *currency);
extern void PayCheckTextLength(text *value, const char *what, int max_chars);
extern void PayCheckChannelRef(text *channel_ref);
extern void PayCheckResponseSize(Datum response);

/* The bounds of a payment's texts, in characters. */
#define PAY_NOTE_MAX_CHARS 1000
#define PAY_CHANNEL_REF_MAX_CHARS 128

#endif							/* AMOUNT_H */
