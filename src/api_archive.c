/*-------------------------------------------------------------------------
 *
 * api_archive.c
 *	  The SQL functions pay_archive writes pay_archive_keys with: the hash
 *	  it keeps of an archived payment, and the packed form of a row of
 *	  hashes -- the code the claim's lookup reads them with
 *	  (write_archive.c, archive_keys.c), so that pay_archive in SQL and the
 *	  claim in C never disagree.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "fmgr.h"
#include "utils/array.h"
#include "utils/memutils.h"

#include "api.h"
#include "archive_keys.h"
#include "write.h"

PG_FUNCTION_INFO_V1(pay_archive_key_hash);
PG_FUNCTION_INFO_V1(pay_archive_key_pack);
PG_FUNCTION_INFO_V1(pay_archive_key_unpack);

/*
 * pay_archive_key_hash(bizno text) returns bigint
 */
Datum
pay_archive_key_hash(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT64((int64) PayArchiveIdentityHash(PG_GETARG_DATUM(0)));
}

/*
 * pay_archive_key_pack(hashes bigint[]) returns bytea
 *
 * The hashes after the first, packed: the row of pay_archive_keys whose lo
 * is hashes[1].
 */
Datum
pay_archive_key_pack(PG_FUNCTION_ARGS)
{
	ArrayType  *array = PG_GETARG_ARRAYTYPE_P(0);
	Datum	   *items;
	bool	   *nulls;
	int			count;
	int64	   *hashes;
	bytea	   *packed;

	deconstruct_array(array, INT8OID, sizeof(int64), FLOAT8PASSBYVAL, TYPALIGN_DOUBLE,
					  &items, &nulls, &count);
	if (ARR_NDIM(array) > 1 || count == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("hashes must be a list of one or more hashes")));
	if ((Size) (count - 1) > (MaxAllocSize - VARHDRSZ - 1) / ARCHIVE_KEYS_MAX_WIDTH)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("too many hashes to pack into one row: %d", count)));
	hashes = palloc(count * sizeof(int64));
	for (int i = 0; i < count; i++)
	{
		if (nulls[i] || (i > 0 && DatumGetInt64(items[i]) <= hashes[i - 1]))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("hashes must ascend strictly, without NULLs")));
		hashes[i] = DatumGetInt64(items[i]);
	}
	packed = palloc(VARHDRSZ + ARCHIVE_KEYS_MAX_LENGTH(count));
	SET_VARSIZE(packed, VARHDRSZ + archive_keys_pack(hashes, count, (uint8 *) VARDATA(packed)));
	PG_RETURN_BYTEA_P(packed);
}

/*
 * pay_archive_key_unpack(lo bigint, hashes bytea) returns bigint[]
 *
 * The hashes of a row of pay_archive_keys, lo first; NULL when hashes is
 * not such a row's.
 */
Datum
pay_archive_key_unpack(PG_FUNCTION_ARGS)
{
	int64		lo = PG_GETARG_INT64(0);
	bytea	   *packed = PG_GETARG_BYTEA_PP(1);
	size_t		length = VARSIZE_ANY_EXHDR(packed);
	int64	   *hashes;
	size_t		count;
	Datum	   *items;

	if (length + 1 > MaxAllocSize / sizeof(Datum))
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("too many bytes to unpack as one row of hashes: %zu", length)));
	hashes = palloc((length + 1) * sizeof(int64));
	count = archive_keys_unpack(lo, (const uint8 *) VARDATA_ANY(packed), length, hashes);
	if (count == 0)
		PG_RETURN_NULL();
	items = palloc(count * sizeof(Datum));
	for (size_t i = 0; i < count; i++)
		items[i] = Int64GetDatum(hashes[i]);
	PG_RETURN_ARRAYTYPE_P(construct_array(items, count, INT8OID, sizeof(int64),
										  FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
}
