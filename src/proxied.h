/*-------------------------------------------------------------------------
 *
 * proxied.h
 *	  What a shard adds to its errors for idempotent_pay_proxy: the line of
 *	  context that carries a constraint name (proxied.c writes it, route.c
 *	  reads it).
 *
 *-------------------------------------------------------------------------
 */
#ifndef PROXIED_H
#define PROXIED_H

#include "postgres.h"

/*
 * The line a shard appends to an error's context when
 * idempotent_pay.report_constraint is on, followed by the constraint name.
 */
#define PAY_CONSTRAINT_CONTEXT_LINE	"idempotent_pay constraint: "

extern void PayProxiedInit(void);

#endif							/* PROXIED_H */
