/*-------------------------------------------------------------------------
 *
 * bizno_format.h
 *	  The bizNo grammar, its check character and its parser.
 *
 * Pure C with no server headers, so the parser and validator can be
 * compiled on their own (fuzzing).  doc/guide.md documents the grammar:
 *
 *	  PREFIX-BIZID-YYYYMMDDHHMMSSmmm-NNNN-UUUUUUUUUUUUUC
 *
 * PREFIX is 1-16 of [A-Z0-9]; BIZID is 1-64 of [A-Za-z0-9._:-]; the time
 * is UTC to the millisecond; NNNN the node id (0000-1023); U... thirteen
 * Crockford base-32 digits of the uniqueness part, the first of G-Z in the
 * bizNos of 1.4 (marked) and of 0-F in those of 1.3; C the check character,
 * one of [0-9A-Z].
 *
 *-------------------------------------------------------------------------
 */
#ifndef BIZNO_FORMAT_H
#define BIZNO_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BIZNO_KEY_MAX_LEN		128
#define BIZNO_PREFIX_MAX_LEN	16
#define BIZNO_BIZ_ID_MAX_LEN	64
#define BIZNO_NODE_ID_MAX		1023
#define BIZNO_TIME_LEN			17
#define BIZNO_NODE_LEN			4
#define BIZNO_UNIQUE_LEN		13
/* "-" time "-" node "-" unique check */
#define BIZNO_TAIL_LEN \
	(1 + BIZNO_TIME_LEN + 1 + BIZNO_NODE_LEN + 1 + BIZNO_UNIQUE_LEN + 1)
/* the longest bizNo we ever generate, without the terminating NUL */
#define BIZNO_MAX_LEN \
	(BIZNO_PREFIX_MAX_LEN + 1 + BIZNO_BIZ_ID_MAX_LEN + BIZNO_TAIL_LEN)
/*
 * The generator tries the 1024 values of the two digits before the last
 * one of the uniqueness part in the order of t * BIZNO_SEARCH_STRIDE mod
 * 1024, t = 0, 1, ... (bizno_format).
 */
#define BIZNO_SEARCH_STRIDE		719

/* Milliseconds since 1970-01-01 00:00:00 UTC of 10000-01-01, exclusive. */
/* the prefix of refunds of payments keyed by another system */
#define BIZNO_REFUND_PREFIX		"REFUND"

#define BIZNO_MS_LIMIT			INT64_C(253402300800000)

typedef struct BiznoParts
{
	const char *prefix;
	size_t		prefix_len;
	const char *biz_id;
	size_t		biz_id_len;
	int64_t		issued_ms;		/* ms since the Unix epoch, UTC */
	int			node_id;
} BiznoParts;

typedef enum BiznoParseResult
{
	BIZNO_VALID,				/* in the generated format, check passes */
	BIZNO_MALFORMED,			/* not in the generated format */
	BIZNO_BAD_CHECK,			/* in the format, but the check fails */
	BIZNO_UNISSUED_CHECK		/* in the format, the check fails, and the
								 * check character is not of 0-9A-Z */
} BiznoParseResult;

extern bool bizno_prefix_is_valid(const char *s, size_t len);
extern bool bizno_biz_id_is_valid(const char *s, size_t len);
extern bool bizno_key_is_valid(const char *s, size_t len);
extern bool bizno_looks_generated(const char *s, size_t len);
extern bool bizno_resembles_generated(const char *s, size_t len);
extern size_t bizno_key_prefix_len(const char *s, size_t len);

extern void bizno_action_of_foreign_key(const char *key, size_t len, BiznoParts *action);
extern bool bizno_prefix_is_refund(const char *prefix, size_t len);

extern size_t bizno_format(char *buf, const char *prefix, size_t prefix_len,
						   const char *biz_id, size_t biz_id_len,
						   int64_t issued_ms, int node_id, uint64_t *unique);

extern BiznoParseResult bizno_parse(const char *s, size_t len,
									BiznoParts *parts, char *expected_check);

#endif							/* BIZNO_FORMAT_H */
