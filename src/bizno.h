/*-------------------------------------------------------------------------
 *
 * bizno.h
 *	  Issuing and checking bizNos inside the server.
 *
 *-------------------------------------------------------------------------
 */
#ifndef BIZNO_H
#define BIZNO_H

#include "postgres.h"

#include "bizno_format.h"

extern bool BiznoCheckKey(text *key, BiznoParts *parts);
extern void BiznoCheckParts(text *prefix, text *biz_id);
extern void BiznoCheckBizIdIsNoBizno(text *biz_id);
extern size_t BiznoGenerate(char *buf, const char *prefix, size_t prefix_len,
							const char *biz_id, size_t biz_id_len);

#endif							/* BIZNO_H */
