/*-------------------------------------------------------------------------
 *
 * api_archive.c
 *	  pay_archive_key_hash: the hash pay_archive keeps of an archived
 *	  payment, computed by the code that looks it up (write_archive.c), so
 *	  that pay_archive in SQL and the claim in C never disagree.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"

#include "api.h"
#include "write.h"

PG_FUNCTION_INFO_V1(pay_archive_key_hash);

/*
 * pay_archive_key_hash(bizno text) returns bigint
 */
Datum
pay_archive_key_hash(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT64((int64) PayArchiveIdentityHash(PG_GETARG_DATUM(0)));
}
