/* idempotent_pay 1.0: business serial numbers and the payment state machine */

\echo Use "CREATE EXTENSION idempotent_pay" to load this file. \quit

-- bizNo: generation, validation, parsing (src/bizno.c, src/bizno_format.c)

CREATE FUNCTION @extschema@.pay_bizno(prefix text, biz_id text)
RETURNS text
AS 'MODULE_PATHNAME', 'pay_bizno'
LANGUAGE C VOLATILE PARALLEL SAFE;

COMMENT ON FUNCTION @extschema@.pay_bizno(text, text) IS
'A new, cluster-unique business serial number: PREFIX-BIZID-YYYYMMDDHHMMSSmmm-NODE-UNIQUE+check';

CREATE FUNCTION @extschema@.pay_bizno_valid(bizno text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'pay_bizno_valid'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION @extschema@.pay_bizno_valid(text) IS
'Whether a text is a well-formed bizNo whose check character is right; never raises';

CREATE FUNCTION @extschema@.pay_bizno_parse(bizno text,
	OUT prefix text, OUT biz_id text, OUT issued_at timestamptz, OUT node_id integer)
RETURNS record
AS 'MODULE_PATHNAME', 'pay_bizno_parse'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION @extschema@.pay_bizno_parse(text) IS
'Splits a bizNo into prefix, biz_id, issue time and node id; 22P02 when malformed';
