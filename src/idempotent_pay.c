/*-------------------------------------------------------------------------
 *
 * idempotent_pay.c
 *	  Module magic, _PG_init and the settings of idempotent_pay.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "utils/guc.h"

#include "bizno_format.h"
#include "idempotent_pay.h"

PG_MODULE_MAGIC;

int			pay_node_id = 0;

void		_PG_init(void);

void
_PG_init(void)
{
	/*
	 * Superuser-only: a role that could change the node id could make two
	 * nodes issue bizNos from the same space.
	 */
	DefineCustomIntVariable("idempotent_pay.node_id",
							"Node id written into every bizNo this server issues.",
							"Give every node of a cluster a distinct id, 0 to 1023.",
							&pay_node_id,
							0, 0, BIZNO_NODE_ID_MAX,
							PGC_SUSET,
							0,
							NULL, NULL, NULL);

	MarkGUCPrefixReserved("idempotent_pay");
}
