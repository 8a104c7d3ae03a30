/*-------------------------------------------------------------------------
 *
 * ddl.h
 *	  DDL on the extension's own objects refused, outside maintenance
 *	  (ddl.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef PAY_DDL_H
#define PAY_DDL_H

#include "postgres.h"

#include "fmgr.h"

extern Datum pay_refuse_ddl(PG_FUNCTION_ARGS);

#endif							/* PAY_DDL_H */
