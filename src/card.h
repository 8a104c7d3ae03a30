/*-------------------------------------------------------------------------
 *
 * card.h
 *	  The rules of the card flow, held by the ledger's bookkeeping trigger
 *	  (card.c), and the kinds of its steps.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PAY_CARD_H
#define PAY_CARD_H

#include "postgres.h"

#include "access/htup.h"
#include "utils/relcache.h"

#include "catalog.h"

/* The kinds of ledger row of the card flow, as the column kind spells them. */
typedef enum PayCardKind
{
	PAY_CARD_NONE,				/* a payment or a refund: kind NULL */
	PAY_CARD_AUTHORIZATION,
	PAY_CARD_CAPTURE,
	PAY_CARD_FINAL_CAPTURE,
	PAY_CARD_VOID,
	PAY_CARD_INCREMENT,
	PAY_CARD_UNKNOWN			/* a value no kind spells */
} PayCardKind;

extern PayCardKind PayCardKindOf(Datum kind, bool isnull);
extern const char *PayCardKindLabel(PayCardKind kind);
extern const char *PayCardStepName(PayCardKind kind);
extern Oid	PayCardParentIndex(const PayCatalog *catalog, Relation ledger);
extern void PayCheckCardRow(const PayCatalog *catalog, Relation rel, HeapTuple tuple,
							bool inserting, bool entering_processing);

#endif							/* PAY_CARD_H */
