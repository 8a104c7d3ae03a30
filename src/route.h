/*-------------------------------------------------------------------------
 *
 * route.h
 *	  Routing payments to PL/Proxy partitions (idempotent_pay_proxy).
 *
 *-------------------------------------------------------------------------
 */
#ifndef ROUTE_H
#define ROUTE_H

#include "postgres.h"

/* The SQL/MED server, i.e. the PL/Proxy cluster, the proxy's functions use. */
#define PAY_PROXY_CLUSTER	"idempotent_pay"

extern uint32 PayRouteHash(const char *bytes, size_t len);
extern bool PayRouteOfKey(const char *key, size_t len, uint32 *route);

#endif							/* ROUTE_H */
