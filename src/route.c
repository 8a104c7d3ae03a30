/*-------------------------------------------------------------------------
 *
 * route.c
 *	  pay_route, pay_partition and the errors of idempotent_pay_proxy: which
 *	  PL/Proxy partition holds a payment, and what a caller is told when a
 *	  partition cannot be reached.
 *
 * The route of a payment is a 32-bit hash of its routing string:
 *
 *	  - a generated bizNo, PREFIX-BIZID-<tail>: its head "PREFIX-BIZID", so
 *		pay_open(prefix, biz_id), whose routing string is prefix || '-' ||
 *		biz_id, and every call on the bizNo it returns reach one partition;
 *		a refund of such a payment is issued for the same (prefix, biz_id)
 *		and goes with it;
 *	  - a generated bizNo of prefix REFUND: its biz_id.  The ledger issues
 *		the refund of a payment keyed by another system under prefix REFUND
 *		with the payment's key as biz_id (at most its first 64 characters;
 *		bizno_action_of_foreign_key), so that refund goes with its payment too;
 *		pay_open('REFUND', biz_id) routes by biz_id alike;
 *	  - any other key (a key of another system): its first 64 characters,
 *		which is all of it but for the longest keys, and exactly what a
 *		refund of it keeps.
 *
 * The hash is FNV-1a (32 bits) over the bytes of the routing string,
 * finished with MurmurHash3's fmix32 so that the low bits PL/Proxy masks
 * depend on every byte, read as a signed int4.  It is written down in
 * doc/scale-out.md and pinned by test/tap/007_proxy.pl: unlike hashtext, whose
 * values PostgreSQL does not promise to keep across major versions, it can
 * never change under payments already placed.  PL/Proxy maps it to
 * partition route & (partitions - 1).
 *
 * These functions are declared by idempotent_pay_proxy only; they live in
 * the shard's library so that the proxy parses keys with the very code the
 * shards check them with (bizno_format.c) and refuses a malformed key with
 * the shard's own error before any partition is asked.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <ctype.h>
#include <stdlib.h>

#include "catalog/pg_type.h"
#include "fmgr.h"
#include "foreign/foreign.h"
#include "nodes/parsenodes.h"
#include "nodes/value.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/elog.h"

#include "bizno.h"
#include "bizno_format.h"
#include "compat.h"
#include "proxied.h"
#include "route.h"

#define FNV_OFFSET_BASIS	UINT32_C(2166136261)
#define FNV_PRIME			UINT32_C(16777619)


PG_FUNCTION_INFO_V1(pay_route_key);
PG_FUNCTION_INFO_V1(pay_route_parts);
PG_FUNCTION_INFO_V1(pay_partition_count);
PG_FUNCTION_INFO_V1(pay_partition_key);
PG_FUNCTION_INFO_V1(pay_partition_parts);
PG_FUNCTION_INFO_V1(pay_partitions_keys);
PG_FUNCTION_INFO_V1(pay_partitions_parts);
PG_FUNCTION_INFO_V1(pay_statement_partition);
PG_FUNCTION_INFO_V1(pay_statement_partition_1_3);
PG_FUNCTION_INFO_V1(pay_proxy_raise);
PG_FUNCTION_INFO_V1(pay_proxy_raise_1_3);

/* The partitions of the cluster, as PL/Proxy reads them. */
typedef struct PartitionMap
{
	int			count;
	bool		modular;		/* PL/Proxy's modular_mapping option */
} PartitionMap;

static uint32
FnvAppend(uint32 hash, const char *bytes, size_t len)
{
	for (size_t i = 0; i < len; i++)
	{
		hash ^= (unsigned char) bytes[i];
		hash *= FNV_PRIME;
	}
	return hash;
}

/* MurmurHash3's fmix32: every input bit reaches every output bit. */
static uint32
FinishHash(uint32 hash)
{
	hash ^= hash >> 16;
	hash *= UINT32_C(0x85ebca6b);
	hash ^= hash >> 13;
	hash *= UINT32_C(0xc2b2ae35);
	hash ^= hash >> 16;
	return hash;
}

/*
 * The route of a routing string.
 */
uint32
PayRouteHash(const char *bytes, size_t len)
{
	return FinishHash(FnvAppend(FNV_OFFSET_BASIS, bytes, len));
}

/*
 * The route of business action (prefix, biz_id): of "PREFIX-BIZID", or of
 * biz_id alone for prefix REFUND.
 */
static uint32
RouteOfParts(const char *prefix, size_t prefix_len, const char *biz_id, size_t biz_id_len)
{
	uint32		hash = FNV_OFFSET_BASIS;

	if (!bizno_prefix_is_refund(prefix, prefix_len))
	{
		hash = FnvAppend(hash, prefix, prefix_len);
		hash = FnvAppend(hash, "-", 1);
	}
	return FinishHash(FnvAppend(hash, biz_id, biz_id_len));
}

/*
 * The route of a payment key, or false when no payment can have the key
 * (not a key, or a generated bizNo whose check character is wrong): then
 * the shard would refuse it too, and BiznoCheckKey says why.
 */
bool
PayRouteOfKey(const char *key, size_t len, uint32 *route)
{
	BiznoParts	parts;
	char		expected_check;

	if (!bizno_key_is_valid(key, len))
		return false;
	if (!bizno_looks_generated(key, len))
		bizno_action_of_foreign_key(key, len, &parts);
	else if (bizno_parse(key, len, &parts, &expected_check) != BIZNO_VALID)
		return false;
	*route = RouteOfParts(parts.prefix, parts.prefix_len, parts.biz_id, parts.biz_id_len);
	return true;
}

/* The route of a key given to the API: refused as the shard refuses it. */
static uint32
RouteOfKeyArgument(FunctionCallInfo fcinfo, int argno)
{
	text	   *key;
	uint32		route;
	BiznoParts	parts;

	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("bizno must not be null"),
				 errhint("Pass the bizNo the payment was opened with.")));
	key = PG_GETARG_TEXT_PP(argno);
	if (PayRouteOfKey(VARDATA_ANY(key), VARSIZE_ANY_EXHDR(key), &route))
		return route;
	/* raises the shard's own error for this key */
	BiznoCheckKey(key, &parts);
	elog(ERROR, "payment key \"%s\" passed its check but has no route",
		 text_to_cstring(key));
	return 0;					/* keep the compiler quiet */
}

/* The route of pay_open(prefix, biz_id): that of the bizNos it issues. */
static uint32
RouteOfPartsArguments(FunctionCallInfo fcinfo)
{
	text	   *prefix;
	text	   *biz_id;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
	{
		const char *name = PG_ARGISNULL(0) ? "prefix" : "biz_id";

		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be null", name),
				 errhint("Pass a value for %s.", name)));
	}
	prefix = PG_GETARG_TEXT_PP(0);
	biz_id = PG_GETARG_TEXT_PP(1);
	BiznoCheckParts(prefix, biz_id);
	return RouteOfParts(VARDATA_ANY(prefix), VARSIZE_ANY_EXHDR(prefix),
						VARDATA_ANY(biz_id), VARSIZE_ANY_EXHDR(biz_id));
}

/*
 * Whether an option names a partition, as PL/Proxy reads a server's
 * options: p<N> or partition_<N>.
 */
static bool
IsPartitionOption(const char *name)
{
	static const char *const tags[] = {"p", "partition_"};

	for (size_t i = 0; i < lengthof(tags); i++)
	{
		size_t		tag_len = strlen(tags[i]);
		char	   *end;

		if (strncmp(name, tags[i], tag_len) != 0)
			continue;
		(void) strtoul(name + tag_len, &end, 10);
		if (*end == '\0')
			return true;
	}
	return false;
}

/*
 * PL/Proxy's modular_mapping option (hash % partitions instead of a mask),
 * which a server or its wrapper may set: pay_partition must map as it does.
 */
static void
ReadMappingOption(List *options, PartitionMap *map)
{
	ListCell   *cell;

	foreach(cell, options)
	{
		DefElem    *option = lfirst(cell);

		if (pg_strcasecmp(option->defname, "modular_mapping") == 0)
			map->modular = atoi(strVal(option->arg)) != 0;
	}
}

/*
 * The partitions of the cluster idempotent_pay, from its SQL/MED server,
 * which is where PL/Proxy reads them.
 */
static PartitionMap
ReadPartitionMap(void)
{
	ForeignServer *server = GetForeignServerByName(PAY_PROXY_CLUSTER, true);
	PartitionMap map = {0, false};
	ListCell   *cell;

	if (server == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("the PL/Proxy cluster \"%s\" is not defined", PAY_PROXY_CLUSTER),
				 errhint("Define it: CREATE SERVER %s FOREIGN DATA WRAPPER plproxy "
						 "OPTIONS (p0 'dbname=... host=...', p1 '...'), then "
						 "CREATE USER MAPPING FOR PUBLIC SERVER %s.",
						 PAY_PROXY_CLUSTER, PAY_PROXY_CLUSTER)));

	ReadMappingOption(GetForeignDataWrapper(server->fdwid)->options, &map);
	ReadMappingOption(server->options, &map);
	foreach(cell, server->options)
	{
		DefElem    *option = lfirst(cell);

		if (IsPartitionOption(option->defname))
			map.count++;
	}
	if (map.count == 0 || (!map.modular && (map.count & (map.count - 1)) != 0))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("the PL/Proxy cluster \"%s\" has %d partitions", PAY_PROXY_CLUSTER,
						map.count),
				 errhint("Give it a power of two of partitions, p0 to p<N-1>.")));
	return map;
}

/* The partition PL/Proxy runs a call of this route on (its tag_part). */
static int32
PartitionOfRoute(const PartitionMap *map, uint32 route)
{
	int64		hash = (int32) route;

	if (map->modular)
		return (int32) (hash < 0 ? -(hash % map->count) : hash % map->count);
	return (int32) (hash & (map->count - 1));
}

/*
 * pay_route(bizno text) returns int4
 */
Datum
pay_route_key(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT32((int32) RouteOfKeyArgument(fcinfo, 0));
}

/*
 * pay_route(prefix text, biz_id text) returns int4
 */
Datum
pay_route_parts(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT32((int32) RouteOfPartsArguments(fcinfo));
}

/*
 * pay_partition_count() returns int4
 */
Datum
pay_partition_count(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT32(ReadPartitionMap().count);
}

/*
 * pay_partition(bizno text) returns int4
 */
Datum
pay_partition_key(PG_FUNCTION_ARGS)
{
	uint32		route = RouteOfKeyArgument(fcinfo, 0);
	PartitionMap map = ReadPartitionMap();

	PG_RETURN_INT32(PartitionOfRoute(&map, route));
}

/*
 * pay_partition(prefix text, biz_id text) returns int4
 */
Datum
pay_partition_parts(PG_FUNCTION_ARGS)
{
	uint32		route = RouteOfPartsArguments(fcinfo);
	PartitionMap map = ReadPartitionMap();

	PG_RETURN_INT32(PartitionOfRoute(&map, route));
}

/*
 * The partitions of the elements of a text array, as an int4 array of the
 * same shape: partition_of(element) for each element, NULL where it gives
 * none (no route).  The batch functions of the proxy split their input by
 * it; one reading of the cluster's map serves the whole array.
 */
static ArrayType *
PartitionsOfArray(ArrayType *input, bool (*route_of) (const char *, size_t, void *, uint32 *),
				  void *arg)
{
	PartitionMap map = ReadPartitionMap();
	Datum	   *elements;
	bool	   *nulls;
	int			count;
	Datum	   *partitions;
	bool	   *no_partition;

	deconstruct_array(input, TEXTOID, -1, false, TYPALIGN_INT, &elements, &nulls, &count);
	partitions = palloc(sizeof(Datum) * Max(count, 1));
	no_partition = palloc(sizeof(bool) * Max(count, 1));
	for (int i = 0; i < count; i++)
	{
		uint32		route;

		no_partition[i] = nulls[i] ||
			!route_of(VARDATA_ANY(DatumGetPointer(elements[i])),
					  VARSIZE_ANY_EXHDR(DatumGetPointer(elements[i])), arg, &route);
		partitions[i] = no_partition[i] ? (Datum) 0 : Int32GetDatum(PartitionOfRoute(&map, route));
	}
	return construct_md_array(partitions, no_partition, ARR_NDIM(input), ARR_DIMS(input),
							  ARR_LBOUND(input), INT4OID, sizeof(int32), true, TYPALIGN_INT);
}

/* The route of a payment key, for PartitionsOfArray. */
static bool
RouteOfKeyElement(const char *key, size_t len, void *arg, uint32 *route)
{
	return PayRouteOfKey(key, len, route);
}

/*
 * The route of business action (prefix, biz_id), for PartitionsOfArray:
 * arg is the prefix; false when the shards would refuse prefix or biz_id
 * (BiznoCheckParts).
 */
static bool
RouteOfBizIdElement(const char *biz_id, size_t len, void *arg, uint32 *route)
{
	text	   *prefix = arg;

	if (!bizno_prefix_is_valid(VARDATA_ANY(prefix), VARSIZE_ANY_EXHDR(prefix)) ||
		!bizno_biz_id_is_valid(biz_id, len))
		return false;
	*route = RouteOfParts(VARDATA_ANY(prefix), VARSIZE_ANY_EXHDR(prefix), biz_id, len);
	return true;
}

/*
 * pay_partitions(biznos text[]) returns int4[]: the partition of each key,
 * NULL for one no payment can have (NULL, not a key, a wrong check
 * character: the shards refuse it, and pay_route says why).
 */
Datum
pay_partitions_keys(PG_FUNCTION_ARGS)
{
	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	PG_RETURN_ARRAYTYPE_P(PartitionsOfArray(PG_GETARG_ARRAYTYPE_P(0), RouteOfKeyElement, NULL));
}

/*
 * pay_partitions(prefix text, biz_ids text[]) returns int4[]: the partition
 * of each business action (prefix, biz_id), NULL for one the shards refuse
 * (a NULL or malformed prefix or biz_id: pay_route says why).
 */
Datum
pay_partitions_parts(PG_FUNCTION_ARGS)
{
	ArrayType  *biz_ids;
	text	   *prefix;

	if (PG_ARGISNULL(1))
		PG_RETURN_NULL();
	biz_ids = PG_GETARG_ARRAYTYPE_P(1);
	/* an empty prefix is invalid: every element gets NULL */
	prefix = PG_ARGISNULL(0) ? cstring_to_text("") : PG_GETARG_TEXT_PP(0);
	PG_RETURN_ARRAYTYPE_P(PartitionsOfArray(biz_ids, RouteOfBizIdElement, prefix));
}

/*
 * The partition a bank statement row is reconciled on: that of its bizNo
 * (of the bizNo before a "/" when by_reference, the row naming the
 * reference callers send the bank, bizNo/attempt); a row whose bizNo no
 * payment can have (NULL, malformed) goes to partition 0, which reports it
 * once, as a single node would.
 */
static int32
StatementPartition(FunctionCallInfo fcinfo, bool by_reference)
{
	PartitionMap map = ReadPartitionMap();
	uint32		route;
	text	   *key;
	const char *bytes;
	size_t		len;
	const char *slash;

	if (PG_ARGISNULL(0))
		return 0;
	key = PG_GETARG_TEXT_PP(0);
	bytes = VARDATA_ANY(key);
	len = VARSIZE_ANY_EXHDR(key);
	slash = by_reference ? memchr(bytes, '/', len) : NULL;
	if (slash != NULL)
		len = slash - bytes;
	if (!PayRouteOfKey(bytes, len, &route))
		return 0;
	return PartitionOfRoute(&map, route);
}

/*
 * pay_statement_partition(bizno text) returns int4, of 1.2: by the bizNo.
 */
Datum
pay_statement_partition(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT32(StatementPartition(fcinfo, false));
}

/*
 * pay_statement_partition(bizno text) returns int4, since 1.3: by the
 * bizNo or the bizNo/attempt a 1.3 shard's pay_reconcile takes.
 */
Datum
pay_statement_partition_1_3(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT32(StatementPartition(fcinfo, true));
}

/*
 * The text after "<prefix>" in s, or NULL when s does not start with it.
 */
static const char *
SkipPrefix(const char *s, const char *prefix)
{
	size_t		len = strlen(prefix);

	return strncmp(s, prefix, len) == 0 ? s + len : NULL;
}

/*
 * Split what PL/Proxy says of a call it made, "<function>(<n>): [<database>]
 * <what>: <text>" (its own errors begin with "PL/Proxy function "): set
 * *database and *what (palloc'd) and return the text, or NULL when message
 * is not of that shape.
 */
static const char *
SplitProxyMessage(const char *message, char **database, char **what)
{
	const char *open = strstr(message, "): [");
	const char *close;
	const char *colon;

	if (open == NULL)
		return NULL;
	open += strlen("): [");
	close = strstr(open, "] ");
	if (close == NULL)
		return NULL;
	colon = strstr(close + 2, ": ");
	if (colon == NULL)
		return NULL;
	*database = pnstrdup(open, close - open);
	*what = pnstrdup(close + 2, colon - (close + 2));
	return colon + 2;
}

/*
 * The constraint name a shard's error carried, from the line proxied.c
 * appends to its context when idempotent_pay.report_constraint is on; NULL
 * when there is none.  PL/Proxy passes the shard's context on as
 * "Remote context: <its lines>", followed by the proxy's own lines; the
 * line of the name is the shard's last.
 */
static char *
ConstraintOfContext(const char *context)
{
	const char *line = context;
	char	   *name = NULL;

	while (line != NULL && *line != '\0')
	{
		const char *end = strchr(line, '\n');
		size_t		line_len = end ? (size_t) (end - line) : strlen(line);
		const char *rest = SkipPrefix(line, "Remote context: ");
		const char *value = SkipPrefix(rest ? rest : line, PAY_CONSTRAINT_CONTEXT_LINE);

		if (value != NULL)
		{
			size_t		value_len = line_len - (value - line);
			size_t		i;

			for (i = 0; i < value_len; i++)
				if (!isalnum((unsigned char) value[i]) && value[i] != '_')
					break;
			if (i == value_len && value_len > 0 && value_len < NAMEDATALEN)
				name = pnstrdup(value, value_len);
		}
		line = end ? end + 1 : NULL;
	}
	return name;
}

/*
 * The partition a failed call was routed to, as text for a message: from
 * the key the wrapper was called with, argument key_arg (and biz_id, the
 * next one, for pay_open and friends); NULL for a call on every partition.
 */
static char *
PartitionOfCall(FunctionCallInfo fcinfo, int key_arg)
{
	PartitionMap map = ReadPartitionMap();
	uint32		route;

	if (PG_ARGISNULL(key_arg))
		return NULL;
	if (!PG_ARGISNULL(key_arg + 1))
	{
		text	   *prefix = PG_GETARG_TEXT_PP(key_arg);
		text	   *biz_id = PG_GETARG_TEXT_PP(key_arg + 1);

		route = RouteOfParts(VARDATA_ANY(prefix), VARSIZE_ANY_EXHDR(prefix),
							 VARDATA_ANY(biz_id), VARSIZE_ANY_EXHDR(biz_id));
	}
	else
	{
		text	   *key = PG_GETARG_TEXT_PP(key_arg);

		if (!PayRouteOfKey(VARDATA_ANY(key), VARSIZE_ANY_EXHDR(key), &route))
			return NULL;
	}
	return psprintf("%d", PartitionOfRoute(&map, route));
}

/*
 * Raise an error as the caller of the proxy should see it, with the
 * shard's constraint name when it is known, without a CONTEXT: the
 * shard's errors carry none, and the wrapper's own would only show the
 * proxy's plumbing.  Every handler up the stack (PG_TRY, a PL/pgSQL
 * EXCEPTION block, the main loop) restores error_context_stack.
 */
static void
RaiseForCaller(int sqlstate, const char *message, const char *detail, const char *hint,
			   const char *constraint)
{
	error_context_stack = NULL;
	ereport(ERROR,
			(errcode(sqlstate),
			 errmsg_internal("%s", message),
			 detail ? errdetail_internal("%s", detail) : 0,
			 hint ? errhint("%s", hint) : 0,
			 constraint ? err_generic_string(PG_DIAG_CONSTRAINT_NAME, constraint) : 0));
}

/* How a call reached a partition it failed on. */
typedef enum PartitionFailure
{
	PARTITION_ANSWERED,			/* the partition answered (or nothing was sent) */
	PARTITION_NOT_REACHED,		/* no connection: the call was not sent */
	PARTITION_CONNECTION_LOST	/* the connection broke: it may have run there */
} PartitionFailure;

/*
 * What PL/Proxy's own error (XX000, "PL/Proxy function f(n): [db] what:
 * text") says of the connection.
 */
static PartitionFailure
ProxyErrorFailure(const char *message, const char *what)
{
	static const char *const not_reached[] = {"PQconnectStart", "PQconnectPoll"};
	static const char *const lost[] = {"PQsendQuery", "PQsendQueryParams", "PQflush", "PQconsumeInput"};

	if (what != NULL)
	{
		for (size_t i = 0; i < lengthof(not_reached); i++)
			if (strcmp(what, not_reached[i]) == 0)
				return PARTITION_NOT_REACHED;
		for (size_t i = 0; i < lengthof(lost); i++)
			if (strcmp(what, lost[i]) == 0)
				return PARTITION_CONNECTION_LOST;
	}
	if (strstr(message, ": connect timeout to: ") != NULL)
		return PARTITION_NOT_REACHED;
	if (strstr(message, ": query timeout") != NULL)
		return PARTITION_CONNECTION_LOST;
	return PARTITION_ANSWERED;
}

/*
 * What a shard's error passed on by PL/Proxy says of the connection: a
 * shard that is shutting down ends its sessions (57P01, 57P02), also the
 * idle one PL/Proxy keeps and reuses after a restart; one that is starting
 * refuses them (57P03).
 */
static PartitionFailure
RemoteErrorFailure(int code)
{
	if (code == ERRCODE_ADMIN_SHUTDOWN || code == ERRCODE_CRASH_SHUTDOWN)
		return PARTITION_CONNECTION_LOST;
	if (code == ERRCODE_CANNOT_CONNECT_NOW)
		return PARTITION_NOT_REACHED;
	return PARTITION_ANSWERED;
}

/* A text argument, NULL when it is NULL or empty. */
static char *
OptionalText(FunctionCallInfo fcinfo, int argno)
{
	char	   *value;

	if (PG_ARGISNULL(argno))
		return NULL;
	value = text_to_cstring(PG_GETARG_TEXT_PP(argno));
	return value[0] == '\0' ? NULL : value;
}

/*
 * Raise an error a routed call raised as its caller should see it (see
 * pay_proxy_raise below).  The arguments are sqlstate, message, detail,
 * hint, the error's context when context_arg is not negative, and from
 * key_arg on the key the call was routed by (NULL for a call on every
 * partition; prefix and biz_id for pay_open and friends).
 */
static void
RaiseProxied(FunctionCallInfo fcinfo, int context_arg, int key_arg)
{
	char	   *sqlstate = OptionalText(fcinfo, 0);
	char	   *message = OptionalText(fcinfo, 1);
	char	   *detail = OptionalText(fcinfo, 2);
	char	   *hint = OptionalText(fcinfo, 3);
	char	   *context = context_arg >= 0 ? OptionalText(fcinfo, context_arg) : NULL;
	int			code = ERRCODE_INTERNAL_ERROR;
	char	   *database = NULL;
	char	   *what = NULL;
	const char *text;
	PartitionFailure failure = PARTITION_ANSWERED;
	char	   *partition;
	char	   *where;
	size_t		len;

	if (message == NULL)
		message = "";
	if (sqlstate != NULL && strlen(sqlstate) == 5)
		code = MAKE_SQLSTATE(sqlstate[0], sqlstate[1], sqlstate[2], sqlstate[3], sqlstate[4]);

	text = SplitProxyMessage(message, &database, &what);
	if (text != NULL && strncmp(what, "REMOTE ", strlen("REMOTE ")) == 0)
	{
		const char *shard_detail = detail ? SkipPrefix(detail, "Remote detail: ") : NULL;
		const char *shard_hint = hint ? SkipPrefix(hint, "Remote hint: ") : NULL;

		failure = RemoteErrorFailure(code);
		if (failure == PARTITION_ANSWERED)
			RaiseForCaller(code, text,
						   shard_detail ? shard_detail : detail,
						   shard_hint ? shard_hint : hint,
						   context ? ConstraintOfContext(context) : NULL);
	}
	else if (code == ERRCODE_INTERNAL_ERROR && SkipPrefix(message, "PL/Proxy function ") != NULL)
		failure = ProxyErrorFailure(message, text ? what : NULL);

	if (failure == PARTITION_ANSWERED)
		RaiseForCaller(code, message, detail, hint, NULL);

	/* libpq's messages end with a newline */
	len = strlen(message);
	while (len > 0 && (message[len - 1] == '\n' || message[len - 1] == ' '))
		message[--len] = '\0';

	partition = PartitionOfCall(fcinfo, key_arg);
	if (partition != NULL)
		where = psprintf("partition %s of PL/Proxy cluster \"%s\"%s", partition, PAY_PROXY_CLUSTER,
						 database ? psprintf(" (database \"%s\")", database) : "");
	else if (database != NULL)
		where = psprintf("partition database \"%s\" of PL/Proxy cluster \"%s\"", database,
						 PAY_PROXY_CLUSTER);
	else
		where = psprintf("a partition of PL/Proxy cluster \"%s\"", PAY_PROXY_CLUSTER);

	if (failure == PARTITION_NOT_REACHED)
		RaiseForCaller(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION,
					   psprintf("%s is unreachable", where),
					   message,
					   "Nothing was sent to it. Retry the call once it is back; "
					   "calls routed to other partitions go on.",
					   NULL);
	RaiseForCaller(ERRCODE_CONNECTION_FAILURE,
				   psprintf("the connection to %s broke during the call", where),
				   message,
				   "The call may or may not have been applied there. Retry it with the same key: "
				   "idempotent_pay answers a repeated call from its ledger, never charging twice.",
				   NULL);
}

/*
 * pay_proxy_raise(sqlstate text, message text, detail text, hint text,
 *				   context text, key text, biz_id text) returns void, since
 *				   1.3; always raises.
 *
 * Called by the proxy's functions with an error their PL/Proxy call raised
 * (GET STACKED DIAGNOSTICS), and the key the call was routed by (NULL for a
 * call on every partition; prefix and biz_id for pay_open and friends).
 * PL/Proxy 2.10 reports a partition it cannot reach as XX000 with libpq's
 * text, and a shard's errors with its own decoration; a caller needs the
 * shard's error as the shard gave it, or else which partition failed and
 * whether the call may have run there.  So:
 *
 *	  - no connection could be made (PQconnectStart, PQconnectPoll, a connect
 *		timeout, a shard still starting): 08001, nothing was sent;
 *	  - the connection broke (sending the call, reading its answer, a query
 *		timeout, the shard shutting down): 08006, the call may have
 *		committed there, and a retry with the same key is answered from its
 *		ledger;
 *	  - any other error of a shard ("f(n): [db] REMOTE ERROR: text"): the
 *		shard's SQLSTATE, message, detail and hint, without PL/Proxy's
 *		decoration, and its constraint name, which PL/Proxy 2.10 does not
 *		pass on but the shard wrote into the context (proxied.c);
 *	  - anything else (the proxy's own errors, a malformed key): as it came.
 *
 * Matching PL/Proxy's message text is the only way there is: it gives these
 * cases no SQLSTATE of their own.  test/tap/007_proxy.pl pins each case.
 */
Datum
pay_proxy_raise_1_3(PG_FUNCTION_ARGS)
{
	RaiseProxied(fcinfo, 4, 5);
	PG_RETURN_VOID();
}

/*
 * pay_proxy_raise(sqlstate text, message text, detail text, hint text,
 *				   key text, biz_id text) returns void, of 1.2: as since 1.3,
 *				   without the context, so without the constraint name.
 */
Datum
pay_proxy_raise(PG_FUNCTION_ARGS)
{
	RaiseProxied(fcinfo, -1, 4);
	PG_RETURN_VOID();
}
