/*-------------------------------------------------------------------------
 *
 * idempotent_pay.c
 *	  Module magic and _PG_init: what loading the library sets up.
 *
 * The map of the source is in doc/internals.md.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "utils/guc.h"

#include "proxied.h"
#include "settings.h"
#include "stats.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

void
_PG_init(void)
{
	PayDefineSettings();
	PayProxiedInit();
	/* every setting of ours is defined: refuse a misspelt one */
	MarkGUCPrefixReserved("idempotent_pay");
	PayStatsRequestShmem();
}
