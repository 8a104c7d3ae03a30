/*-------------------------------------------------------------------------
 *
 * catalog.h
 *	  The extension's own objects -- schema, types, enum labels, tables --
 *	  looked up once per backend and forgotten when a type changes.
 *
 *-------------------------------------------------------------------------
 */
#ifndef CATALOG_H
#define CATALOG_H

#include "postgres.h"

#include "fmgr.h"

#include "machine.h"

typedef struct PayCatalog
{
	Oid			namespace;		/* the extension's schema */
	const char *schema;			/* its name, quoted for SQL text */
	Oid			status_type;	/* pay_status */
	Oid			status_labels[PAY_STATUS_COUNT];
	Oid			action_type;	/* pay_action */
	Oid			action_labels[PAY_ACTION_COUNT];
	Oid			ledger;			/* pay_ledger */
	/* columns of pay_ledger that the API reads by direct index probe */
	AttrNumber	ledger_status;
	AttrNumber	ledger_amount;
	AttrNumber	ledger_currency;
	AttrNumber	ledger_attempt;
} PayCatalog;

extern const PayCatalog *PayCatalogGet(FunctionCallInfo fcinfo);
extern PayStatus PayStatusFromLabel(const PayCatalog *catalog, Oid label);

#define PayStatusGetDatum(catalog, status) \
	ObjectIdGetDatum((catalog)->status_labels[(status)])
#define PayActionGetDatum(catalog, action) \
	ObjectIdGetDatum((catalog)->action_labels[(action)])

#endif							/* CATALOG_H */
