/*-------------------------------------------------------------------------
 *
 * journal.h
 *	  The ledger's own triggers: derived columns and the journal.
 *
 *-------------------------------------------------------------------------
 */
#ifndef JOURNAL_H
#define JOURNAL_H

#include "postgres.h"

extern void PayJournalSetNote(const char *note);

#endif							/* JOURNAL_H */
