/*-------------------------------------------------------------------------
 *
 * journal.h
 *	  The ledger's own triggers: derived columns and the journal.  They are
 *	  reached only through the trigger manager; nothing else is shared.
 *
 *-------------------------------------------------------------------------
 */
#ifndef JOURNAL_H
#define JOURNAL_H

#include "postgres.h"

#include "fmgr.h"

extern Datum pay_ledger_bookkeeping(PG_FUNCTION_ARGS);
extern Datum pay_ledger_bookkeeping_1_3(PG_FUNCTION_ARGS);
extern Datum pay_ledger_journal(PG_FUNCTION_ARGS);

#endif							/* JOURNAL_H */
