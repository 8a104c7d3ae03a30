/*-------------------------------------------------------------------------
 *
 * prefixes.h
 *	  The prefixes this database issues bizNos under, known per backend
 *	  (prefixes.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef PAY_PREFIXES_H
#define PAY_PREFIXES_H

#include "postgres.h"

#include "catalog.h"

extern bool PayPrefixIsIssued(const PayCatalog *catalog, const char *prefix, size_t len);
extern void PayPrefixNoteIssued(const PayCatalog *catalog, const char *prefix, size_t len);

#endif							/* PAY_PREFIXES_H */
