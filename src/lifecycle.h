/*-------------------------------------------------------------------------
 *
 * lifecycle.h
 *	  The extension's life in a database: DROP refused while it holds
 *	  payments.
 *
 *-------------------------------------------------------------------------
 */
#ifndef LIFECYCLE_H
#define LIFECYCLE_H

#include "postgres.h"

#include "fmgr.h"

extern Datum pay_refuse_drop(PG_FUNCTION_ARGS);

#endif							/* LIFECYCLE_H */
