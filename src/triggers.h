/*-------------------------------------------------------------------------
 *
 * triggers.h
 *	  The extension's trigger functions, reached only through the trigger
 *	  manager: pay_guard (trigger_guard.c) on the ledger, the journal and
 *	  user tables; the ledger's pay_ledger_bookkeeping
 *	  (trigger_bookkeeping.c) and pay_ledger_journal (trigger_journal.c);
 *	  the archive's pay_archive_moved (trigger_archive.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef PAY_TRIGGERS_H
#define PAY_TRIGGERS_H

#include "postgres.h"

#include "fmgr.h"

extern Datum pay_guard(PG_FUNCTION_ARGS);
extern Datum pay_guard_1_3(PG_FUNCTION_ARGS);
extern Datum pay_allowed(PG_FUNCTION_ARGS);
extern Datum pay_ledger_bookkeeping(PG_FUNCTION_ARGS);
extern Datum pay_ledger_bookkeeping_1_3(PG_FUNCTION_ARGS);
extern Datum pay_ledger_bookkeeping_1_4(PG_FUNCTION_ARGS);
extern Datum pay_ledger_journal(PG_FUNCTION_ARGS);
extern Datum pay_archive_moved(PG_FUNCTION_ARGS);

#endif							/* PAY_TRIGGERS_H */
