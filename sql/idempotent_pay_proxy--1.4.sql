/* idempotent_pay_proxy 1.4: the idempotent_pay API on a PL/Proxy proxy database */

\echo Use "CREATE EXTENSION idempotent_pay_proxy" to load this file. \quit

-- Written by test/proxy_sql.pl from one definition per routed call: change
-- that and run it (test/tap/007_proxy.pl checks the two agree).
--
-- The proxy database holds no payment.  Every call is routed to one
-- partition of the PL/Proxy cluster "idempotent_pay" (the SQL/MED server of
-- that name, doc/scale-out.md shows how to define it), a database with
-- idempotent_pay 1.4 installed in a schema of the same name as this
-- extension's; calls about every payment (pay_stats, pay_verify,
-- pay_reconcile) run on every partition and are added up here, and a
-- batch (pay_open_claim_many, pay_settle_many) is split by partition.
--
-- Each routed call is two functions: <name>_on_partition, the PL/Proxy
-- function that sends the call, and <name>, the API, which calls it and
-- hands an error to pay_proxy_raise (src/route.c) so the caller sees the
-- shard's own error -- SQLSTATE, message, detail, hint and constraint
-- name -- or 08001 / 08006 naming the partition it could not reach,
-- instead of PL/Proxy's XX000 (pay_proxy_raise always raises).
--
-- The API functions run as the caller (not SECURITY DEFINER): PL/Proxy
-- connects to the partitions as the current user, whose grants on each
-- shard decide what it may do.  They run with client_min_messages =
-- warning: after a partition raised an error, or restarted, PL/Proxy drops
-- and remakes its connection with a NOTICE that says nothing to a caller
-- (the shards raise no NOTICE of their own; their WARNINGs pass).

-- Types, identical to the shards': PL/Proxy asks a partition for each
-- result column by name, read as the proxy's type of that name.

CREATE TYPE @extschema@.pay_status AS ENUM ('INIT', 'PROCESSING', 'SUCCESS', 'FAILED');

COMMENT ON TYPE @extschema@.pay_status IS
'The state of a payment: INIT -> PROCESSING -> SUCCESS | FAILED, FAILED -> INIT by reset';

CREATE TYPE @extschema@.pay_action AS ENUM ('PROCEED', 'ALREADY_SUCCEEDED', 'IN_PROGRESS', 'NEEDS_RESET');

COMMENT ON TYPE @extschema@.pay_action IS
'What pay_begin tells the caller: charge now, answer the earlier success, wait or ask the bank, or reset first';

CREATE TYPE @extschema@.pay_settlement AS ENUM ('SUCCESS', 'SECOND_CHARGE');

COMMENT ON TYPE @extschema@.pay_settlement IS
'What pay_succeed answers: SUCCESS, or SECOND_CHARGE when the bank reported another charge of a payment that had succeeded (refund it)';

CREATE FUNCTION @extschema@.pay_amount_valid(amount numeric)
RETURNS boolean
AS 'MODULE_PATHNAME', 'pay_amount_valid'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION @extschema@.pay_amount_valid(numeric) IS
'Whether a number is a payment amount: finite and greater than 0 (not NaN, not Infinity)';

CREATE FUNCTION @extschema@.pay_currency_valid(currency text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'pay_currency_valid'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION @extschema@.pay_currency_valid(text) IS
'Whether a text is an ISO 4217 currency code: three upper-case letters';

CREATE DOMAIN @extschema@.pay_amount AS numeric
    CONSTRAINT pay_amount_check CHECK (@extschema@.pay_amount_valid(VALUE));

COMMENT ON DOMAIN @extschema@.pay_amount IS
'A payment amount: finite and greater than 0';

CREATE DOMAIN @extschema@.pay_currency AS text
    CONSTRAINT pay_currency_check CHECK (@extschema@.pay_currency_valid(VALUE));

COMMENT ON DOMAIN @extschema@.pay_currency IS
'An ISO 4217 currency code: three upper-case letters';

-- A shard's pay_ledger row, as pay_get and pay_find return it.
CREATE TYPE @extschema@.pay_ledger AS (
    bizno               text,
    prefix              text,
    biz_id              text,
    status              @extschema@.pay_status,
    amount              @extschema@.pay_amount,
    currency            @extschema@.pay_currency,
    attempt             integer,
    channel_ref         text,
    last_error          text,
    created_at          timestamptz,
    updated_at          timestamptz,
    processing_since    timestamptz,
    note                text,
    parent              text,
    refund_key          text,
    response            jsonb,
    kind                text,
    expires_in          interval,
    expires_at          timestamptz
);

COMMENT ON TYPE @extschema@.pay_ledger IS
'A payment''s ledger row on its partition, as pay_get and pay_find return it';

CREATE TYPE @extschema@.pay_claim AS (
    action         @extschema@.pay_action,
    attempt        integer,
    status         @extschema@.pay_status,
    channel_ref    text,
    response       jsonb
);

COMMENT ON TYPE @extschema@.pay_claim IS
'What pay_claim answers: the decision, the attempt to charge under or in flight, the status, and a success''s reference and response';

-- Routing (src/route.c): the route is a fixed hash, doc/scale-out.md writes it
-- down; PL/Proxy runs a call on partition route & (partitions - 1).

CREATE FUNCTION @extschema@.pay_route(bizno text)
RETURNS integer
AS 'MODULE_PATHNAME', 'pay_route_key'
LANGUAGE C IMMUTABLE PARALLEL SAFE;

COMMENT ON FUNCTION @extschema@.pay_route(text) IS
'The route of a payment key: FNV-1a + fmix32 of a generated bizNo''s PREFIX-BIZID (of BIZID for prefix REFUND), or of another key''s first 64 characters; a key the shards would refuse is refused (22P02)';

CREATE FUNCTION @extschema@.pay_route(prefix text, biz_id text)
RETURNS integer
AS 'MODULE_PATHNAME', 'pay_route_parts'
LANGUAGE C IMMUTABLE PARALLEL SAFE;

COMMENT ON FUNCTION @extschema@.pay_route(text, text) IS
'The route of business action (prefix, biz_id), that of every bizNo issued for it: FNV-1a + fmix32 of PREFIX-BIZID (of BIZID for prefix REFUND); bad prefix or biz_id 22023';

CREATE FUNCTION @extschema@.pay_partition_count()
RETURNS integer
AS 'MODULE_PATHNAME', 'pay_partition_count'
LANGUAGE C STABLE PARALLEL SAFE;

COMMENT ON FUNCTION @extschema@.pay_partition_count() IS
'How many partitions the PL/Proxy cluster idempotent_pay has (its server''s options p0 ... p<N-1>)';

CREATE FUNCTION @extschema@.pay_partition(bizno text)
RETURNS integer
AS 'MODULE_PATHNAME', 'pay_partition_key'
LANGUAGE C STABLE PARALLEL SAFE;

COMMENT ON FUNCTION @extschema@.pay_partition(text) IS
'The partition that holds the payment of a key: pay_route(bizno) mapped as PL/Proxy maps it';

CREATE FUNCTION @extschema@.pay_partition(prefix text, biz_id text)
RETURNS integer
AS 'MODULE_PATHNAME', 'pay_partition_parts'
LANGUAGE C STABLE PARALLEL SAFE;

COMMENT ON FUNCTION @extschema@.pay_partition(text, text) IS
'The partition that holds the payments of business action (prefix, biz_id)';

CREATE FUNCTION @extschema@.pay_partitions(biznos text[])
RETURNS integer[]
AS 'MODULE_PATHNAME', 'pay_partitions_keys'
LANGUAGE C STABLE PARALLEL SAFE;

COMMENT ON FUNCTION @extschema@.pay_partitions(text[]) IS
'The partition of each payment key, as pay_partition(bizno) names it; NULL for a key no payment can have (pay_route says why)';

CREATE FUNCTION @extschema@.pay_partitions(prefix text, biz_ids text[])
RETURNS integer[]
AS 'MODULE_PATHNAME', 'pay_partitions_parts'
LANGUAGE C STABLE PARALLEL SAFE;

COMMENT ON FUNCTION @extschema@.pay_partitions(text, text[]) IS
'The partition of each business action (prefix, biz_id), as pay_partition(prefix, biz_id) names it; NULL for one the shards refuse (pay_route says why)';

CREATE FUNCTION @extschema@.pay_statement_partition(bizno text)
RETURNS integer
AS 'MODULE_PATHNAME', 'pay_statement_partition_1_3'
LANGUAGE C STABLE PARALLEL SAFE;

COMMENT ON FUNCTION @extschema@.pay_statement_partition(text) IS
'The partition a bank statement row is reconciled on: that of its bizNo, or of the bizNo of its reference bizNo/attempt; 0 for one no payment can have';

CREATE FUNCTION @extschema@.pay_proxy_raise(sqlstate text, message text, detail text, hint text,
                                            context text DEFAULT NULL, key text DEFAULT NULL,
                                            biz_id text DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'pay_proxy_raise_1_3'
LANGUAGE C VOLATILE;

COMMENT ON FUNCTION @extschema@.pay_proxy_raise(text, text, text, text, text, text, text) IS
'Raise an error of a routed call as its caller should see it: the shard''s own, with the constraint name its context carries, or 08001/08006 naming the partition that could not be reached';

-- Pure functions of their arguments: answered here, by the shards' own C.

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

CREATE FUNCTION @extschema@.pay_allowed(from_status @extschema@.pay_status, to_status @extschema@.pay_status)
RETURNS boolean
AS 'MODULE_PATHNAME', 'pay_allowed'
LANGUAGE C IMMUTABLE PARALLEL SAFE;

COMMENT ON FUNCTION @extschema@.pay_allowed(@extschema@.pay_status, @extschema@.pay_status) IS
'Whether from -> to is a legal transition (a NULL from is a new row); the same state again is a no-op, not a transition';

CREATE VIEW @extschema@.pay_transitions AS
    SELECT f.from_status, t.to_status
    FROM (SELECT NULL::@extschema@.pay_status AS from_status
          UNION ALL
          SELECT s FROM pg_catalog.unnest(pg_catalog.enum_range(NULL::@extschema@.pay_status)) AS s) AS f
    CROSS JOIN pg_catalog.unnest(pg_catalog.enum_range(NULL::@extschema@.pay_status)) AS t(to_status)
    WHERE @extschema@.pay_allowed(f.from_status, t.to_status)
    ORDER BY f.from_status NULLS FIRST, t.to_status;

COMMENT ON VIEW @extschema@.pay_transitions IS
'The legal edges of the payment state machine; from_status NULL is a new row';

CREATE FUNCTION @extschema@.pay_currency_list(OUT code text, OUT minor_units integer, OUT name text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'pay_currency_list'
LANGUAGE C STABLE STRICT PARALLEL SAFE ROWS 170;

COMMENT ON FUNCTION @extschema@.pay_currency_list() IS
'ISO 4217''s active currency codes with their minor units and names, as the shards'' library knows them; read through pay_currencies';

CREATE VIEW @extschema@.pay_currencies AS
    SELECT c.code, c.minor_units, c.name FROM @extschema@.pay_currency_list() AS c;

COMMENT ON VIEW @extschema@.pay_currencies IS
'The currencies a payment may be in: ISO 4217''s active codes, with the decimals an amount in each may have';

GRANT SELECT ON @extschema@.pay_currencies TO PUBLIC;

-- Calls on one business action are routed by (prefix, biz_id), calls on
-- one payment by its key.  pay_bizno goes to the partition too, so that
-- the bizNo carries the node id of the shard that will hold the payment.
-- Each <name>_on_partition sets idempotent_pay.report_constraint in the
-- partition's session before it calls <name> there (set_config's result
-- is in the first argument, so it runs first): the partition then writes
-- an error's constraint name into its context (src/proxied.c), which
-- PL/Proxy passes on, and pay_proxy_raise raises the error with it.

CREATE FUNCTION @extschema@.pay_bizno_on_partition(prefix text, biz_id text)
RETURNS text
AS $$
    CLUSTER 'idempotent_pay';
    RUN ON @extschema@.pay_route(prefix, biz_id);
    SELECT r.result
    FROM pg_catalog.set_config('idempotent_pay.report_constraint', 'on', false) AS s(v),
         LATERAL @extschema@.pay_bizno(CASE WHEN s.v IS NOT NULL THEN prefix END, biz_id) AS r(result);
$$
LANGUAGE plproxy;

COMMENT ON FUNCTION @extschema@.pay_bizno_on_partition(text, text) IS
'PL/Proxy: runs pay_bizno on the partition of (prefix, biz_id), its constraint names reported; called by pay_bizno';

CREATE FUNCTION @extschema@.pay_bizno(prefix text, biz_id text)
RETURNS text
AS $$
DECLARE
    error_state text;
    error_message text;
    error_detail text;
    error_hint text;
    error_context text;
BEGIN
    RETURN @extschema@.pay_bizno_on_partition(prefix, biz_id);
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS error_state = RETURNED_SQLSTATE, error_message = MESSAGE_TEXT,
                            error_detail = PG_EXCEPTION_DETAIL, error_hint = PG_EXCEPTION_HINT,
                            error_context = PG_EXCEPTION_CONTEXT;
    PERFORM @extschema@.pay_proxy_raise(error_state, error_message, error_detail, error_hint, error_context,
                                        prefix, biz_id);
END
$$
LANGUAGE plpgsql VOLATILE SET search_path = @extschema@, pg_temp
    SET client_min_messages = warning;

COMMENT ON FUNCTION @extschema@.pay_bizno(text, text) IS
'A new bizNo, issued by the partition of (prefix, biz_id) with its shard''s node id';

CREATE FUNCTION @extschema@.pay_open_on_partition(prefix text, biz_id text, amount numeric, currency text)
RETURNS text
AS $$
    CLUSTER 'idempotent_pay';
    RUN ON @extschema@.pay_route(prefix, biz_id);
    SELECT r.result
    FROM pg_catalog.set_config('idempotent_pay.report_constraint', 'on', false) AS s(v),
         LATERAL @extschema@.pay_open(CASE WHEN s.v IS NOT NULL THEN prefix END,
                                      biz_id, amount, currency) AS r(result);
$$
LANGUAGE plproxy;

COMMENT ON FUNCTION @extschema@.pay_open_on_partition(text, text, numeric, text) IS
'PL/Proxy: runs pay_open on the partition of (prefix, biz_id), its constraint names reported; called by pay_open';

CREATE FUNCTION @extschema@.pay_open(prefix text, biz_id text, amount numeric, currency text DEFAULT NULL)
RETURNS text
AS $$
DECLARE
    error_state text;
    error_message text;
    error_detail text;
    error_hint text;
    error_context text;
BEGIN
    RETURN @extschema@.pay_open_on_partition(prefix, biz_id, amount, currency);
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS error_state = RETURNED_SQLSTATE, error_message = MESSAGE_TEXT,
                            error_detail = PG_EXCEPTION_DETAIL, error_hint = PG_EXCEPTION_HINT,
                            error_context = PG_EXCEPTION_CONTEXT;
    PERFORM @extschema@.pay_proxy_raise(error_state, error_message, error_detail, error_hint, error_context,
                                        prefix, biz_id);
END
$$
LANGUAGE plpgsql VOLATILE SET search_path = @extschema@, pg_temp
    SET client_min_messages = warning;

COMMENT ON FUNCTION @extschema@.pay_open(text, text, numeric, text) IS
'The bizNo of business action (prefix, biz_id): the recorded one, or a new one recorded as INIT (amount and currency required), on its partition';

CREATE FUNCTION @extschema@.pay_open_claim_on_partition(prefix text, biz_id text, amount numeric, currency text,
    OUT bizno text, OUT action @extschema@.pay_action, OUT attempt integer,
    OUT status @extschema@.pay_status, OUT channel_ref text, OUT response jsonb)
RETURNS record
AS $$
    CLUSTER 'idempotent_pay';
    RUN ON @extschema@.pay_route(prefix, biz_id);
    SELECT r.bizno, r.action, r.attempt, r.status, r.channel_ref, r.response
    FROM pg_catalog.set_config('idempotent_pay.report_constraint', 'on', false) AS s(v),
         LATERAL @extschema@.pay_open_claim(CASE WHEN s.v IS NOT NULL THEN prefix END,
                                            biz_id, amount, currency) AS r;
$$
LANGUAGE plproxy;

COMMENT ON FUNCTION @extschema@.pay_open_claim_on_partition(text, text, numeric, text) IS
'PL/Proxy: runs pay_open_claim on the partition of (prefix, biz_id), its constraint names reported; called by pay_open_claim';

CREATE FUNCTION @extschema@.pay_open_claim(prefix text, biz_id text, amount numeric, currency text DEFAULT NULL,
    OUT bizno text, OUT action @extschema@.pay_action, OUT attempt integer,
    OUT status @extschema@.pay_status, OUT channel_ref text, OUT response jsonb)
RETURNS record
AS $$
DECLARE
    error_state text;
    error_message text;
    error_detail text;
    error_hint text;
    error_context text;
BEGIN
    SELECT * INTO bizno, action, attempt, status, channel_ref, response
    FROM @extschema@.pay_open_claim_on_partition(prefix, biz_id, amount, currency);
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS error_state = RETURNED_SQLSTATE, error_message = MESSAGE_TEXT,
                            error_detail = PG_EXCEPTION_DETAIL, error_hint = PG_EXCEPTION_HINT,
                            error_context = PG_EXCEPTION_CONTEXT;
    PERFORM @extschema@.pay_proxy_raise(error_state, error_message, error_detail, error_hint, error_context,
                                        prefix, biz_id);
END
$$
LANGUAGE plpgsql VOLATILE SET search_path = @extschema@, pg_temp
    SET client_min_messages = warning;

COMMENT ON FUNCTION @extschema@.pay_open_claim(text, text, numeric, text) IS
'pay_open and pay_claim in one call, on the partition of (prefix, biz_id)';

CREATE FUNCTION @extschema@.pay_begin_on_partition(bizno text, amount numeric, currency text)
RETURNS @extschema@.pay_action
AS $$
    CLUSTER 'idempotent_pay';
    RUN ON @extschema@.pay_route(bizno);
    SELECT r.result
    FROM pg_catalog.set_config('idempotent_pay.report_constraint', 'on', false) AS s(v),
         LATERAL @extschema@.pay_begin(CASE WHEN s.v IS NOT NULL THEN bizno END,
                                       amount, currency) AS r(result);
$$
LANGUAGE plproxy;

COMMENT ON FUNCTION @extschema@.pay_begin_on_partition(text, numeric, text) IS
'PL/Proxy: runs pay_begin on the partition of its key, its constraint names reported; called by pay_begin';

CREATE FUNCTION @extschema@.pay_begin(bizno text, amount numeric DEFAULT NULL, currency text DEFAULT NULL)
RETURNS @extschema@.pay_action
AS $$
DECLARE
    error_state text;
    error_message text;
    error_detail text;
    error_hint text;
    error_context text;
BEGIN
    RETURN @extschema@.pay_begin_on_partition(bizno, amount, currency);
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS error_state = RETURNED_SQLSTATE, error_message = MESSAGE_TEXT,
                            error_detail = PG_EXCEPTION_DETAIL, error_hint = PG_EXCEPTION_HINT,
                            error_context = PG_EXCEPTION_CONTEXT;
    PERFORM @extschema@.pay_proxy_raise(error_state, error_message, error_detail, error_hint, error_context,
                                        bizno);
END
$$
LANGUAGE plpgsql VOLATILE SET search_path = @extschema@, pg_temp
    SET client_min_messages = warning;

COMMENT ON FUNCTION @extschema@.pay_begin(text, numeric, text) IS
'Decide a charge, on the payment''s partition: PROCEED (now PROCESSING), ALREADY_SUCCEEDED, IN_PROGRESS (never charge again) or NEEDS_RESET';

CREATE FUNCTION @extschema@.pay_claim_on_partition(bizno text, amount numeric, currency text)
RETURNS @extschema@.pay_claim
AS $$
    CLUSTER 'idempotent_pay';
    RUN ON @extschema@.pay_route(bizno);
    SELECT r.action, r.attempt, r.status, r.channel_ref, r.response
    FROM pg_catalog.set_config('idempotent_pay.report_constraint', 'on', false) AS s(v),
         LATERAL @extschema@.pay_claim(CASE WHEN s.v IS NOT NULL THEN bizno END, amount, currency) AS r;
$$
LANGUAGE plproxy;

COMMENT ON FUNCTION @extschema@.pay_claim_on_partition(text, numeric, text) IS
'PL/Proxy: runs pay_claim on the partition of its key, its constraint names reported; called by pay_claim';

CREATE FUNCTION @extschema@.pay_claim(bizno text, amount numeric DEFAULT NULL, currency text DEFAULT NULL)
RETURNS @extschema@.pay_claim
AS $$
DECLARE
    error_state text;
    error_message text;
    error_detail text;
    error_hint text;
    error_context text;
BEGIN
    RETURN @extschema@.pay_claim_on_partition(bizno, amount, currency);
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS error_state = RETURNED_SQLSTATE, error_message = MESSAGE_TEXT,
                            error_detail = PG_EXCEPTION_DETAIL, error_hint = PG_EXCEPTION_HINT,
                            error_context = PG_EXCEPTION_CONTEXT;
    PERFORM @extschema@.pay_proxy_raise(error_state, error_message, error_detail, error_hint, error_context,
                                        bizno);
END
$$
LANGUAGE plpgsql VOLATILE SET search_path = @extschema@, pg_temp
    SET client_min_messages = warning;

COMMENT ON FUNCTION @extschema@.pay_claim(text, numeric, text) IS
'pay_begin''s decision and, in the same round trip, the attempt (the fencing token), status, channel_ref and stored response, on the payment''s partition';

CREATE FUNCTION @extschema@.pay_succeed_on_partition(bizno text, channel_ref text, attempt bigint,
                                                     response jsonb)
RETURNS @extschema@.pay_settlement
AS $$
    CLUSTER 'idempotent_pay';
    RUN ON @extschema@.pay_route(bizno);
    SELECT r.result
    FROM pg_catalog.set_config('idempotent_pay.report_constraint', 'on', false) AS s(v),
         LATERAL @extschema@.pay_succeed(CASE WHEN s.v IS NOT NULL THEN bizno END,
                                         channel_ref, attempt, response) AS r(result);
$$
LANGUAGE plproxy;

COMMENT ON FUNCTION @extschema@.pay_succeed_on_partition(text, text, bigint, jsonb) IS
'PL/Proxy: runs pay_succeed on the partition of its key, its constraint names reported; called by pay_succeed';

CREATE FUNCTION @extschema@.pay_succeed(bizno text, channel_ref text DEFAULT NULL, attempt bigint DEFAULT NULL,
                                        response jsonb DEFAULT NULL)
RETURNS @extschema@.pay_settlement
AS $$
DECLARE
    error_state text;
    error_message text;
    error_detail text;
    error_hint text;
    error_context text;
BEGIN
    RETURN @extschema@.pay_succeed_on_partition(bizno, channel_ref, attempt, response);
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS error_state = RETURNED_SQLSTATE, error_message = MESSAGE_TEXT,
                            error_detail = PG_EXCEPTION_DETAIL, error_hint = PG_EXCEPTION_HINT,
                            error_context = PG_EXCEPTION_CONTEXT;
    PERFORM @extschema@.pay_proxy_raise(error_state, error_message, error_detail, error_hint, error_context,
                                        bizno);
END
$$
LANGUAGE plpgsql VOLATILE SET search_path = @extschema@, pg_temp
    SET client_min_messages = warning;

COMMENT ON FUNCTION @extschema@.pay_succeed(text, text, bigint, jsonb) IS
'PROCESSING -> SUCCESS under the attempt pay_claim returned, with the bank''s reference (both required), on the payment''s partition; on SUCCESS a no-op, or SECOND_CHARGE when it brings another reference';

CREATE FUNCTION @extschema@.pay_fail_on_partition(bizno text, reason text, attempt bigint)
RETURNS @extschema@.pay_status
AS $$
    CLUSTER 'idempotent_pay';
    RUN ON @extschema@.pay_route(bizno);
    SELECT r.result
    FROM pg_catalog.set_config('idempotent_pay.report_constraint', 'on', false) AS s(v),
         LATERAL @extschema@.pay_fail(CASE WHEN s.v IS NOT NULL THEN bizno END, reason, attempt) AS r(result);
$$
LANGUAGE plproxy;

COMMENT ON FUNCTION @extschema@.pay_fail_on_partition(text, text, bigint) IS
'PL/Proxy: runs pay_fail on the partition of its key, its constraint names reported; called by pay_fail';

CREATE FUNCTION @extschema@.pay_fail(bizno text, reason text DEFAULT NULL, attempt bigint DEFAULT NULL)
RETURNS @extschema@.pay_status
AS $$
DECLARE
    error_state text;
    error_message text;
    error_detail text;
    error_hint text;
    error_context text;
BEGIN
    RETURN @extschema@.pay_fail_on_partition(bizno, reason, attempt);
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS error_state = RETURNED_SQLSTATE, error_message = MESSAGE_TEXT,
                            error_detail = PG_EXCEPTION_DETAIL, error_hint = PG_EXCEPTION_HINT,
                            error_context = PG_EXCEPTION_CONTEXT;
    PERFORM @extschema@.pay_proxy_raise(error_state, error_message, error_detail, error_hint, error_context,
                                        bizno);
END
$$
LANGUAGE plpgsql VOLATILE SET search_path = @extschema@, pg_temp
    SET client_min_messages = warning;

COMMENT ON FUNCTION @extschema@.pay_fail(text, text, bigint) IS
'PROCESSING -> FAILED under the attempt pay_claim returned (required), on the payment''s partition; a no-op on FAILED';

CREATE FUNCTION @extschema@.pay_reset_on_partition(bizno text, note text)
RETURNS @extschema@.pay_status
AS $$
    CLUSTER 'idempotent_pay';
    RUN ON @extschema@.pay_route(bizno);
    SELECT r.result
    FROM pg_catalog.set_config('idempotent_pay.report_constraint', 'on', false) AS s(v),
         LATERAL @extschema@.pay_reset(CASE WHEN s.v IS NOT NULL THEN bizno END, note) AS r(result);
$$
LANGUAGE plproxy;

COMMENT ON FUNCTION @extschema@.pay_reset_on_partition(text, text) IS
'PL/Proxy: runs pay_reset on the partition of its key, its constraint names reported; called by pay_reset';

CREATE FUNCTION @extschema@.pay_reset(bizno text, note text)
RETURNS @extschema@.pay_status
AS $$
DECLARE
    error_state text;
    error_message text;
    error_detail text;
    error_hint text;
    error_context text;
BEGIN
    RETURN @extschema@.pay_reset_on_partition(bizno, note);
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS error_state = RETURNED_SQLSTATE, error_message = MESSAGE_TEXT,
                            error_detail = PG_EXCEPTION_DETAIL, error_hint = PG_EXCEPTION_HINT,
                            error_context = PG_EXCEPTION_CONTEXT;
    PERFORM @extschema@.pay_proxy_raise(error_state, error_message, error_detail, error_hint, error_context,
                                        bizno);
END
$$
LANGUAGE plpgsql VOLATILE SET search_path = @extschema@, pg_temp
    SET client_min_messages = warning;

COMMENT ON FUNCTION @extschema@.pay_reset(text, text) IS
'FAILED -> INIT on the payment''s partition, with a note saying why; a no-op on INIT';

CREATE FUNCTION @extschema@.pay_transition_on_partition(bizno text, target @extschema@.pay_status, note text)
RETURNS @extschema@.pay_status
AS $$
    CLUSTER 'idempotent_pay';
    RUN ON @extschema@.pay_route(bizno);
    SELECT r.result
    FROM pg_catalog.set_config('idempotent_pay.report_constraint', 'on', false) AS s(v),
         LATERAL @extschema@.pay_transition(CASE WHEN s.v IS NOT NULL THEN bizno END,
                                            target, note) AS r(result);
$$
LANGUAGE plproxy;

COMMENT ON FUNCTION @extschema@.pay_transition_on_partition(text, @extschema@.pay_status, text) IS
'PL/Proxy: runs pay_transition on the partition of its key, its constraint names reported; called by pay_transition';

CREATE FUNCTION @extschema@.pay_transition(bizno text, target @extschema@.pay_status, note text DEFAULT NULL)
RETURNS @extschema@.pay_status
AS $$
DECLARE
    error_state text;
    error_message text;
    error_detail text;
    error_hint text;
    error_context text;
BEGIN
    RETURN @extschema@.pay_transition_on_partition(bizno, target, note);
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS error_state = RETURNED_SQLSTATE, error_message = MESSAGE_TEXT,
                            error_detail = PG_EXCEPTION_DETAIL, error_hint = PG_EXCEPTION_HINT,
                            error_context = PG_EXCEPTION_CONTEXT;
    PERFORM @extschema@.pay_proxy_raise(error_state, error_message, error_detail, error_hint, error_context,
                                        bizno);
END
$$
LANGUAGE plpgsql VOLATILE SET search_path = @extschema@, pg_temp
    SET client_min_messages = warning;

COMMENT ON FUNCTION @extschema@.pay_transition(text, @extschema@.pay_status, text) IS
'The generic guarded transition of a payment to target, on its partition';

CREATE FUNCTION @extschema@.pay_get_on_partition(bizno text)
RETURNS SETOF @extschema@.pay_ledger
AS $$
    CLUSTER 'idempotent_pay';
    RUN ON @extschema@.pay_route(bizno);
    SELECT r.bizno, r.prefix, r.biz_id, r.status, r.amount, r.currency, r.attempt, r.channel_ref,
           r.last_error, r.created_at, r.updated_at, r.processing_since, r.note, r.parent, r.refund_key,
           r.response, r.kind, r.expires_in, r.expires_at
    FROM pg_catalog.set_config('idempotent_pay.report_constraint', 'on', false) AS s(v),
         LATERAL @extschema@.pay_get(CASE WHEN s.v IS NOT NULL THEN bizno END) AS r;
$$
LANGUAGE plproxy;

COMMENT ON FUNCTION @extschema@.pay_get_on_partition(text) IS
'PL/Proxy: runs pay_get on the partition of its key, its constraint names reported; called by pay_get';

CREATE FUNCTION @extschema@.pay_get(bizno text)
RETURNS SETOF @extschema@.pay_ledger
AS $$
DECLARE
    error_state text;
    error_message text;
    error_detail text;
    error_hint text;
    error_context text;
BEGIN
    RETURN QUERY SELECT * FROM @extschema@.pay_get_on_partition(bizno);
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS error_state = RETURNED_SQLSTATE, error_message = MESSAGE_TEXT,
                            error_detail = PG_EXCEPTION_DETAIL, error_hint = PG_EXCEPTION_HINT,
                            error_context = PG_EXCEPTION_CONTEXT;
    PERFORM @extschema@.pay_proxy_raise(error_state, error_message, error_detail, error_hint, error_context,
                                        bizno);
END
$$
LANGUAGE plpgsql STABLE ROWS 1 SET search_path = @extschema@, pg_temp
    SET client_min_messages = warning;

COMMENT ON FUNCTION @extschema@.pay_get(text) IS
'The ledger row of a bizNo, from its partition; no row when unknown';

CREATE FUNCTION @extschema@.pay_find_on_partition(prefix text, biz_id text)
RETURNS SETOF @extschema@.pay_ledger
AS $$
    CLUSTER 'idempotent_pay';
    RUN ON @extschema@.pay_route(prefix, biz_id);
    SELECT r.bizno, r.prefix, r.biz_id, r.status, r.amount, r.currency, r.attempt, r.channel_ref,
           r.last_error, r.created_at, r.updated_at, r.processing_since, r.note, r.parent, r.refund_key,
           r.response, r.kind, r.expires_in, r.expires_at
    FROM pg_catalog.set_config('idempotent_pay.report_constraint', 'on', false) AS s(v),
         LATERAL @extschema@.pay_find(CASE WHEN s.v IS NOT NULL THEN prefix END, biz_id) AS r;
$$
LANGUAGE plproxy;

COMMENT ON FUNCTION @extschema@.pay_find_on_partition(text, text) IS
'PL/Proxy: runs pay_find on the partition of (prefix, biz_id), its constraint names reported; called by pay_find';

CREATE FUNCTION @extschema@.pay_find(prefix text, biz_id text)
RETURNS SETOF @extschema@.pay_ledger
AS $$
DECLARE
    error_state text;
    error_message text;
    error_detail text;
    error_hint text;
    error_context text;
BEGIN
    RETURN QUERY SELECT * FROM @extschema@.pay_find_on_partition(prefix, biz_id);
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS error_state = RETURNED_SQLSTATE, error_message = MESSAGE_TEXT,
                            error_detail = PG_EXCEPTION_DETAIL, error_hint = PG_EXCEPTION_HINT,
                            error_context = PG_EXCEPTION_CONTEXT;
    PERFORM @extschema@.pay_proxy_raise(error_state, error_message, error_detail, error_hint, error_context,
                                        prefix, biz_id);
END
$$
LANGUAGE plpgsql STABLE ROWS 1 SET search_path = @extschema@, pg_temp
    SET client_min_messages = warning;

COMMENT ON FUNCTION @extschema@.pay_find(text, text) IS
'The ledger row of business action (prefix, biz_id), from its partition; no row when it has none. Creates nothing';

CREATE FUNCTION @extschema@.pay_refund_open_on_partition(bizno text, refund_key text, amount numeric,
                                                         reason text)
RETURNS text
AS $$
    CLUSTER 'idempotent_pay';
    RUN ON @extschema@.pay_route(bizno);
    SELECT r.result
    FROM pg_catalog.set_config('idempotent_pay.report_constraint', 'on', false) AS s(v),
         LATERAL @extschema@.pay_refund_open(CASE WHEN s.v IS NOT NULL THEN bizno END,
                                             refund_key, amount, reason) AS r(result);
$$
LANGUAGE plproxy;

COMMENT ON FUNCTION @extschema@.pay_refund_open_on_partition(text, text, numeric, text) IS
'PL/Proxy: runs pay_refund_open on the partition of its key, its constraint names reported; called by pay_refund_open';

CREATE FUNCTION @extschema@.pay_refund_open(bizno text, refund_key text, amount numeric,
                                            reason text DEFAULT NULL)
RETURNS text
AS $$
DECLARE
    error_state text;
    error_message text;
    error_detail text;
    error_hint text;
    error_context text;
BEGIN
    RETURN @extschema@.pay_refund_open_on_partition(bizno, refund_key, amount, reason);
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS error_state = RETURNED_SQLSTATE, error_message = MESSAGE_TEXT,
                            error_detail = PG_EXCEPTION_DETAIL, error_hint = PG_EXCEPTION_HINT,
                            error_context = PG_EXCEPTION_CONTEXT;
    PERFORM @extschema@.pay_proxy_raise(error_state, error_message, error_detail, error_hint, error_context,
                                        bizno);
END
$$
LANGUAGE plpgsql VOLATILE SET search_path = @extschema@, pg_temp
    SET client_min_messages = warning;

COMMENT ON FUNCTION @extschema@.pay_refund_open(text, text, numeric, text) IS
'The bizNo of refund refund_key of SUCCESS payment bizno, opened on the payment''s partition; the refund''s bizNo routes there too';

CREATE FUNCTION @extschema@.pay_refund_balance_on_partition(bizno text,
    OUT captured numeric, OUT refunded numeric, OUT in_flight numeric, OUT refundable numeric)
RETURNS record
AS $$
    CLUSTER 'idempotent_pay';
    RUN ON @extschema@.pay_route(bizno);
    SELECT r.captured, r.refunded, r.in_flight, r.refundable
    FROM pg_catalog.set_config('idempotent_pay.report_constraint', 'on', false) AS s(v),
         LATERAL @extschema@.pay_refund_balance(CASE WHEN s.v IS NOT NULL THEN bizno END) AS r;
$$
LANGUAGE plproxy;

COMMENT ON FUNCTION @extschema@.pay_refund_balance_on_partition(text) IS
'PL/Proxy: runs pay_refund_balance on the partition of its key, its constraint names reported; called by pay_refund_balance';

CREATE FUNCTION @extschema@.pay_refund_balance(bizno text,
    OUT captured numeric, OUT refunded numeric, OUT in_flight numeric, OUT refundable numeric)
RETURNS record
AS $$
DECLARE
    error_state text;
    error_message text;
    error_detail text;
    error_hint text;
    error_context text;
BEGIN
    SELECT * INTO captured, refunded, in_flight, refundable
    FROM @extschema@.pay_refund_balance_on_partition(bizno);
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS error_state = RETURNED_SQLSTATE, error_message = MESSAGE_TEXT,
                            error_detail = PG_EXCEPTION_DETAIL, error_hint = PG_EXCEPTION_HINT,
                            error_context = PG_EXCEPTION_CONTEXT;
    PERFORM @extschema@.pay_proxy_raise(error_state, error_message, error_detail, error_hint, error_context,
                                        bizno);
END
$$
LANGUAGE plpgsql STABLE SET search_path = @extschema@, pg_temp
    SET client_min_messages = warning;

COMMENT ON FUNCTION @extschema@.pay_refund_balance(text) IS
'What the bank captured for a payment (its success and every second charge a statement confirmed) and what its refunds took of it, from its partition';

CREATE FUNCTION @extschema@.pay_confirm_second_charge_on_partition(bizno text, channel_ref text)
RETURNS void
AS $$
    CLUSTER 'idempotent_pay';
    RUN ON @extschema@.pay_route(bizno);
    SELECT r.result
    FROM pg_catalog.set_config('idempotent_pay.report_constraint', 'on', false) AS s(v),
         LATERAL @extschema@.pay_confirm_second_charge(CASE WHEN s.v IS NOT NULL THEN bizno END,
                                                       channel_ref) AS r(result);
$$
LANGUAGE plproxy;

COMMENT ON FUNCTION @extschema@.pay_confirm_second_charge_on_partition(text, text) IS
'PL/Proxy: runs pay_confirm_second_charge on the partition of its key, its constraint names reported; called by pay_confirm_second_charge';

CREATE FUNCTION @extschema@.pay_confirm_second_charge(bizno text, channel_ref text)
RETURNS void
AS $$
DECLARE
    error_state text;
    error_message text;
    error_detail text;
    error_hint text;
    error_context text;
BEGIN
    PERFORM @extschema@.pay_confirm_second_charge_on_partition(bizno, channel_ref);
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS error_state = RETURNED_SQLSTATE, error_message = MESSAGE_TEXT,
                            error_detail = PG_EXCEPTION_DETAIL, error_hint = PG_EXCEPTION_HINT,
                            error_context = PG_EXCEPTION_CONTEXT;
    PERFORM @extschema@.pay_proxy_raise(error_state, error_message, error_detail, error_hint, error_context,
                                        bizno);
END
$$
LANGUAGE plpgsql VOLATILE SET search_path = @extschema@, pg_temp
    SET client_min_messages = warning;

COMMENT ON FUNCTION @extschema@.pay_confirm_second_charge(text, text) IS
'A bank statement shows another charge of SUCCESS payment bizno under channel_ref: journaled once as confirmed on its partition, from then on counted as captured and refundable';

CREATE FUNCTION @extschema@.pay_open_authorization_on_partition(prefix text, biz_id text, amount numeric,
                                                                currency text, expires_in interval)
RETURNS text
AS $$
    CLUSTER 'idempotent_pay';
    RUN ON @extschema@.pay_route(prefix, biz_id);
    SELECT r.result
    FROM pg_catalog.set_config('idempotent_pay.report_constraint', 'on', false) AS s(v),
         LATERAL @extschema@.pay_open_authorization(CASE WHEN s.v IS NOT NULL THEN prefix END,
                                                    biz_id, amount, currency, expires_in) AS r(result);
$$
LANGUAGE plproxy;

COMMENT ON FUNCTION @extschema@.pay_open_authorization_on_partition(text, text, numeric, text, interval) IS
'PL/Proxy: runs pay_open_authorization on the partition of (prefix, biz_id), its constraint names reported; called by pay_open_authorization';

CREATE FUNCTION @extschema@.pay_open_authorization(prefix text, biz_id text, amount numeric, currency text,
                                                   expires_in interval DEFAULT '7 days')
RETURNS text
AS $$
DECLARE
    error_state text;
    error_message text;
    error_detail text;
    error_hint text;
    error_context text;
BEGIN
    RETURN @extschema@.pay_open_authorization_on_partition(prefix, biz_id, amount, currency, expires_in);
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS error_state = RETURNED_SQLSTATE, error_message = MESSAGE_TEXT,
                            error_detail = PG_EXCEPTION_DETAIL, error_hint = PG_EXCEPTION_HINT,
                            error_context = PG_EXCEPTION_CONTEXT;
    PERFORM @extschema@.pay_proxy_raise(error_state, error_message, error_detail, error_hint, error_context,
                                        prefix, biz_id);
END
$$
LANGUAGE plpgsql VOLATILE SET search_path = @extschema@, pg_temp
    SET client_min_messages = warning;

COMMENT ON FUNCTION @extschema@.pay_open_authorization(text, text, numeric, text, interval) IS
'The bizNo of the authorization of business action (prefix, biz_id), on its partition: found again, or recorded as INIT; its SUCCESS places the hold, which expires expires_in after it';

CREATE FUNCTION @extschema@.pay_capture_open_on_partition(auth_bizno text, capture_key text, amount numeric,
                                                          final boolean)
RETURNS text
AS $$
    CLUSTER 'idempotent_pay';
    RUN ON @extschema@.pay_route(auth_bizno);
    SELECT r.result
    FROM pg_catalog.set_config('idempotent_pay.report_constraint', 'on', false) AS s(v),
         LATERAL @extschema@.pay_capture_open(CASE WHEN s.v IS NOT NULL THEN auth_bizno END,
                                              capture_key, amount, final) AS r(result);
$$
LANGUAGE plproxy;

COMMENT ON FUNCTION @extschema@.pay_capture_open_on_partition(text, text, numeric, boolean) IS
'PL/Proxy: runs pay_capture_open on the partition of its key, its constraint names reported; called by pay_capture_open';

CREATE FUNCTION @extschema@.pay_capture_open(auth_bizno text, capture_key text, amount numeric,
                                             final boolean DEFAULT true)
RETURNS text
AS $$
DECLARE
    error_state text;
    error_message text;
    error_detail text;
    error_hint text;
    error_context text;
BEGIN
    RETURN @extschema@.pay_capture_open_on_partition(auth_bizno, capture_key, amount, final);
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS error_state = RETURNED_SQLSTATE, error_message = MESSAGE_TEXT,
                            error_detail = PG_EXCEPTION_DETAIL, error_hint = PG_EXCEPTION_HINT,
                            error_context = PG_EXCEPTION_CONTEXT;
    PERFORM @extschema@.pay_proxy_raise(error_state, error_message, error_detail, error_hint, error_context,
                                        auth_bizno);
END
$$
LANGUAGE plpgsql VOLATILE SET search_path = @extschema@, pg_temp
    SET client_min_messages = warning;

COMMENT ON FUNCTION @extschema@.pay_capture_open(text, text, numeric, boolean) IS
'The bizNo of capture capture_key of a held authorization, opened on the authorization''s partition, where its bizNo routes too; a final capture closes the authorization once claimed';

CREATE FUNCTION @extschema@.pay_void_open_on_partition(auth_bizno text, void_key text)
RETURNS text
AS $$
    CLUSTER 'idempotent_pay';
    RUN ON @extschema@.pay_route(auth_bizno);
    SELECT r.result
    FROM pg_catalog.set_config('idempotent_pay.report_constraint', 'on', false) AS s(v),
         LATERAL @extschema@.pay_void_open(CASE WHEN s.v IS NOT NULL THEN auth_bizno END,
                                           void_key) AS r(result);
$$
LANGUAGE plproxy;

COMMENT ON FUNCTION @extschema@.pay_void_open_on_partition(text, text) IS
'PL/Proxy: runs pay_void_open on the partition of its key, its constraint names reported; called by pay_void_open';

CREATE FUNCTION @extschema@.pay_void_open(auth_bizno text, void_key text)
RETURNS text
AS $$
DECLARE
    error_state text;
    error_message text;
    error_detail text;
    error_hint text;
    error_context text;
BEGIN
    RETURN @extschema@.pay_void_open_on_partition(auth_bizno, void_key);
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS error_state = RETURNED_SQLSTATE, error_message = MESSAGE_TEXT,
                            error_detail = PG_EXCEPTION_DETAIL, error_hint = PG_EXCEPTION_HINT,
                            error_context = PG_EXCEPTION_CONTEXT;
    PERFORM @extschema@.pay_proxy_raise(error_state, error_message, error_detail, error_hint, error_context,
                                        auth_bizno);
END
$$
LANGUAGE plpgsql VOLATILE SET search_path = @extschema@, pg_temp
    SET client_min_messages = warning;

COMMENT ON FUNCTION @extschema@.pay_void_open(text, text) IS
'The bizNo of void void_key of a held authorization (releases what is not captured), opened on the authorization''s partition, where its bizNo routes too';

CREATE FUNCTION @extschema@.pay_increment_open_on_partition(auth_bizno text, increment_key text,
                                                            amount numeric)
RETURNS text
AS $$
    CLUSTER 'idempotent_pay';
    RUN ON @extschema@.pay_route(auth_bizno);
    SELECT r.result
    FROM pg_catalog.set_config('idempotent_pay.report_constraint', 'on', false) AS s(v),
         LATERAL @extschema@.pay_increment_open(CASE WHEN s.v IS NOT NULL THEN auth_bizno END,
                                                increment_key, amount) AS r(result);
$$
LANGUAGE plproxy;

COMMENT ON FUNCTION @extschema@.pay_increment_open_on_partition(text, text, numeric) IS
'PL/Proxy: runs pay_increment_open on the partition of its key, its constraint names reported; called by pay_increment_open';

CREATE FUNCTION @extschema@.pay_increment_open(auth_bizno text, increment_key text, amount numeric)
RETURNS text
AS $$
DECLARE
    error_state text;
    error_message text;
    error_detail text;
    error_hint text;
    error_context text;
BEGIN
    RETURN @extschema@.pay_increment_open_on_partition(auth_bizno, increment_key, amount);
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS error_state = RETURNED_SQLSTATE, error_message = MESSAGE_TEXT,
                            error_detail = PG_EXCEPTION_DETAIL, error_hint = PG_EXCEPTION_HINT,
                            error_context = PG_EXCEPTION_CONTEXT;
    PERFORM @extschema@.pay_proxy_raise(error_state, error_message, error_detail, error_hint, error_context,
                                        auth_bizno);
END
$$
LANGUAGE plpgsql VOLATILE SET search_path = @extschema@, pg_temp
    SET client_min_messages = warning;

COMMENT ON FUNCTION @extschema@.pay_increment_open(text, text, numeric) IS
'The bizNo of increment increment_key of a held authorization before any capture, opened on the authorization''s partition, where its bizNo routes too';

CREATE FUNCTION @extschema@.pay_authorization_balance_on_partition(auth_bizno text)
RETURNS TABLE (authorized numeric, captured numeric, capture_in_flight numeric, refunded numeric,
               refund_in_flight numeric, capturable numeric, refundable numeric, closed_reason text,
               expires_at timestamptz)
AS $$
    CLUSTER 'idempotent_pay';
    RUN ON @extschema@.pay_route(auth_bizno);
    SELECT r.authorized, r.captured, r.capture_in_flight, r.refunded, r.refund_in_flight, r.capturable,
           r.refundable, r.closed_reason, r.expires_at
    FROM pg_catalog.set_config('idempotent_pay.report_constraint', 'on', false) AS s(v),
         LATERAL @extschema@.pay_authorization_balance(CASE WHEN s.v IS NOT NULL THEN auth_bizno END) AS r;
$$
LANGUAGE plproxy;

COMMENT ON FUNCTION @extschema@.pay_authorization_balance_on_partition(text) IS
'PL/Proxy: runs pay_authorization_balance on the partition of its key, its constraint names reported; called by pay_authorization_balance';

CREATE FUNCTION @extschema@.pay_authorization_balance(auth_bizno text)
RETURNS TABLE (authorized numeric, captured numeric, capture_in_flight numeric, refunded numeric,
               refund_in_flight numeric, capturable numeric, refundable numeric, closed_reason text,
               expires_at timestamptz)
AS $$
DECLARE
    error_state text;
    error_message text;
    error_detail text;
    error_hint text;
    error_context text;
BEGIN
    RETURN QUERY SELECT * FROM @extschema@.pay_authorization_balance_on_partition(auth_bizno);
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS error_state = RETURNED_SQLSTATE, error_message = MESSAGE_TEXT,
                            error_detail = PG_EXCEPTION_DETAIL, error_hint = PG_EXCEPTION_HINT,
                            error_context = PG_EXCEPTION_CONTEXT;
    PERFORM @extschema@.pay_proxy_raise(error_state, error_message, error_detail, error_hint, error_context,
                                        auth_bizno);
END
$$
LANGUAGE plpgsql STABLE ROWS 1 SET search_path = @extschema@, pg_temp
    SET client_min_messages = warning;

COMMENT ON FUNCTION @extschema@.pay_authorization_balance(text) IS
'An authorization''s hold, what its captures captured and hold, what its refunds returned and hold, what may still be captured and refunded, why it is closed (NULL while open) and when the hold expires, from its partition';

-- Batches: pay_open_claim_many and pay_settle_many answer a thousand inputs
-- in one call, each in input order.  The proxy splits a batch by partition
-- and sends each partition its part, one part after the other, each a call
-- of its own there (<name>_on_partition), committed when it returns: the
-- claims of a part are durable before the caller sees them, as a single
-- claim's.  A part that fails as a whole does not fail the batch -- the
-- parts before it have committed, and their answers must reach the caller:
-- its inputs answer the part's error instead (action or result NULL), 08001
-- when the partition could not be reached (nothing was sent), 08006 when
-- the connection broke during the call (it may have run there: retry those
-- inputs, answered from the ledger), else the partition's own SQLSTATE
-- (42501 for a role it does not grant the batch).  PL/Proxy's SPLIT would
-- send the parts at once, but fails such a call as a whole, with the
-- answers of the partitions that did run it.  An input no payment can have
-- (a malformed key, prefix or biz_id) answers the shards' own refusal of
-- it, and no partition is asked; a call the shards refuse as a whole (a
-- NULL array or scalar argument, 22004; arrays of unequal lengths or of
-- more than one dimension, 22023) is refused before any partition is asked.

CREATE FUNCTION @extschema@.pay_open_claim_many_on_partition(partition_number integer, prefix text,
                                                             biz_ids text[], amounts numeric[], currency text)
RETURNS TABLE (biz_id text, bizno text, action @extschema@.pay_action, attempt integer, sqlstate text,
               constraint_name text)
AS $$
    CLUSTER 'idempotent_pay';
    RUN ON partition_number;
    SELECT r.biz_id, r.bizno, r.action, r.attempt, r.sqlstate, r.constraint_name
    FROM pg_catalog.set_config('idempotent_pay.report_constraint', 'on', false) AS s(v),
         LATERAL @extschema@.pay_open_claim_many(CASE WHEN s.v IS NOT NULL THEN prefix END, biz_ids, amounts,
                                                 currency) AS r;
$$
LANGUAGE plproxy;

COMMENT ON FUNCTION @extschema@.pay_open_claim_many_on_partition(integer, text, text[], numeric[], text) IS
'PL/Proxy: runs pay_open_claim_many on partition partition_number with the part of a batch that routes there, its constraint names reported; called by pay_open_claim_many_of_partitions';

CREATE FUNCTION @extschema@.pay_open_claim_many_of_partitions(prefix text, biz_ids text[], amounts numeric[],
                                                              currency text)
RETURNS TABLE (input_number integer, biz_id text, bizno text, action @extschema@.pay_action, attempt integer,
               sqlstate text, constraint_name text)
AS $$
DECLARE
    part record;
    i integer;
    error_state text;
    error_message text;
    error_detail text;
    error_hint text;
    error_context text;
    error_constraint text;
BEGIN
    IF prefix IS NULL THEN
        PERFORM @extschema@.pay_proxy_raise('22004', 'prefix must not be null', NULL,
            'Pass a value for prefix: it applies to every input of the batch.');
    END IF;
    IF biz_ids IS NULL THEN
        PERFORM @extschema@.pay_proxy_raise('22004', 'biz_ids must not be null', NULL,
            'Pass an array, empty for no inputs.');
    ELSIF pg_catalog.array_ndims(biz_ids) OPERATOR(pg_catalog.>) 1 THEN
        PERFORM @extschema@.pay_proxy_raise('22023',
            pg_catalog.format('biz_ids must have one dimension, not %s', pg_catalog.array_ndims(biz_ids)),
            NULL, 'Pass one element per input.');
    END IF;
    IF amounts IS NULL THEN
        PERFORM @extschema@.pay_proxy_raise('22004', 'amounts must not be null', NULL,
            'Pass an array, empty for no inputs.');
    ELSIF pg_catalog.array_ndims(amounts) OPERATOR(pg_catalog.>) 1 THEN
        PERFORM @extschema@.pay_proxy_raise('22023',
            pg_catalog.format('amounts must have one dimension, not %s', pg_catalog.array_ndims(amounts)),
            NULL, 'Pass one element per input.');
    END IF;
    IF currency IS NULL THEN
        PERFORM @extschema@.pay_proxy_raise('22004', 'currency must not be null', NULL,
            'Pass a value for currency: it applies to every input of the batch.');
    END IF;
    IF pg_catalog.cardinality(amounts) OPERATOR(pg_catalog.<>) pg_catalog.cardinality(biz_ids) THEN
        PERFORM @extschema@.pay_proxy_raise('22023', 'biz_ids and amounts differ in length',
            pg_catalog.format('The arrays of a batch hold one element per input, in the same order: '
                              'biz_ids has %s, amounts %s.',
                              pg_catalog.cardinality(biz_ids), pg_catalog.cardinality(amounts)),
            'Pass arrays of equal lengths.');
    END IF;

    FOR part IN
        SELECT u.partition_number,
               pg_catalog.array_agg(u.input_number ORDER BY u.input_number) AS input_numbers,
               pg_catalog.array_agg(u.biz_id ORDER BY u.input_number) AS biz_ids,
               pg_catalog.array_agg(u.amount ORDER BY u.input_number) AS amounts
        FROM ROWS FROM (pg_catalog.unnest(biz_ids),
                        pg_catalog.unnest(amounts),
                        pg_catalog.unnest(@extschema@.pay_partitions(prefix, biz_ids)))
             WITH ORDINALITY AS u(biz_id, amount, partition_number, input_number)
        GROUP BY u.partition_number
    LOOP
        IF part.partition_number IS NULL THEN
            -- inputs the router refuses, each with the shards' own error
            FOR i IN 1 .. pg_catalog.cardinality(part.input_numbers) LOOP
                error_state := NULL;
                error_constraint := NULL;
                BEGIN
                    PERFORM @extschema@.pay_route(prefix, part.biz_ids[i]);
                EXCEPTION WHEN OTHERS THEN
                    GET STACKED DIAGNOSTICS error_state = RETURNED_SQLSTATE,
                                            error_constraint = CONSTRAINT_NAME;
                END;
                RETURN QUERY SELECT part.input_numbers[i]::integer, part.biz_ids[i], NULL::text,
                                    NULL::@extschema@.pay_action, NULL::integer, error_state,
                                    NULLIF(error_constraint, '');
            END LOOP;
            CONTINUE;
        END IF;
        BEGIN
            RETURN QUERY
                SELECT part.input_numbers[r.input_number]::integer, r.biz_id, r.bizno, r.action, r.attempt,
                       r.sqlstate, r.constraint_name
                FROM @extschema@.pay_open_claim_many_on_partition(part.partition_number, prefix, part.biz_ids,
                         part.amounts, currency)
                     WITH ORDINALITY AS r(biz_id, bizno, action, attempt, sqlstate, constraint_name, input_number);
        EXCEPTION WHEN OTHERS THEN
            -- the part failed as a whole: each of its inputs answers the error
            GET STACKED DIAGNOSTICS error_state = RETURNED_SQLSTATE, error_message = MESSAGE_TEXT,
                                    error_detail = PG_EXCEPTION_DETAIL, error_hint = PG_EXCEPTION_HINT,
                                    error_context = PG_EXCEPTION_CONTEXT;
            BEGIN
                PERFORM @extschema@.pay_proxy_raise(error_state, error_message, error_detail, error_hint,
                                                    error_context);
            EXCEPTION WHEN OTHERS THEN
                GET STACKED DIAGNOSTICS error_state = RETURNED_SQLSTATE, error_constraint = CONSTRAINT_NAME;
            END;
            RETURN QUERY SELECT u.input_number::integer, u.key, NULL::text, NULL::@extschema@.pay_action,
                                NULL::integer, error_state, NULLIF(error_constraint, '')
                         FROM ROWS FROM (pg_catalog.unnest(part.input_numbers),
                                         pg_catalog.unnest(part.biz_ids)) AS u(input_number, key);
        END;
    END LOOP;
END
$$
LANGUAGE plpgsql VOLATILE SET search_path = @extschema@, pg_temp
    SET client_min_messages = warning;

COMMENT ON FUNCTION @extschema@.pay_open_claim_many_of_partitions(text, text[], numeric[], text) IS
'Splits a batch of pay_open_claim_many by partition and runs each part on its partition, one after the other: every input answered, with its number in the batch; called by pay_open_claim_many';

CREATE FUNCTION @extschema@.pay_open_claim_many(prefix text, biz_ids text[], amounts numeric[], currency text)
RETURNS TABLE (biz_id text, bizno text, action @extschema@.pay_action, attempt integer, sqlstate text,
               constraint_name text)
AS $$
    SELECT a.biz_id, a.bizno, a.action, a.attempt, a.sqlstate, a.constraint_name
    FROM @extschema@.pay_open_claim_many_of_partitions(prefix, biz_ids, amounts, currency) AS a
    ORDER BY a.input_number
$$
LANGUAGE sql VOLATILE SET search_path = @extschema@, pg_temp;

COMMENT ON FUNCTION @extschema@.pay_open_claim_many(text, text[], numeric[], text) IS
'pay_open_claim for each (biz_id, amount) in input order, each on its partition: per input its bizNo, action and attempt, or the SQLSTATE and constraint name of the refusal pay_open_claim would raise, or 08001 / 08006 when its partition could not be reached';

CREATE FUNCTION @extschema@.pay_settle_many_on_partition(partition_number integer, biznos text[],
                                                         attempts bigint[], outcomes @extschema@.pay_status[],
                                                         channel_refs text[], reasons text[])
RETURNS TABLE (bizno text, result text, sqlstate text, constraint_name text)
AS $$
    CLUSTER 'idempotent_pay';
    RUN ON partition_number;
    SELECT r.bizno, r.result, r.sqlstate, r.constraint_name
    FROM pg_catalog.set_config('idempotent_pay.report_constraint', 'on', false) AS s(v),
         LATERAL @extschema@.pay_settle_many(CASE WHEN s.v IS NOT NULL THEN biznos END, attempts, outcomes,
                                             channel_refs, reasons) AS r;
$$
LANGUAGE plproxy;

COMMENT ON FUNCTION @extschema@.pay_settle_many_on_partition(integer, text[], bigint[], @extschema@.pay_status[], text[], text[]) IS
'PL/Proxy: runs pay_settle_many on partition partition_number with the part of a batch that routes there, its constraint names reported; called by pay_settle_many_of_partitions';

CREATE FUNCTION @extschema@.pay_settle_many_of_partitions(biznos text[], attempts bigint[],
                                                          outcomes @extschema@.pay_status[],
                                                          channel_refs text[], reasons text[])
RETURNS TABLE (input_number integer, bizno text, result text, sqlstate text, constraint_name text)
AS $$
DECLARE
    part record;
    i integer;
    error_state text;
    error_message text;
    error_detail text;
    error_hint text;
    error_context text;
    error_constraint text;
BEGIN
    IF biznos IS NULL THEN
        PERFORM @extschema@.pay_proxy_raise('22004', 'biznos must not be null', NULL,
            'Pass an array, empty for no inputs.');
    ELSIF pg_catalog.array_ndims(biznos) OPERATOR(pg_catalog.>) 1 THEN
        PERFORM @extschema@.pay_proxy_raise('22023',
            pg_catalog.format('biznos must have one dimension, not %s', pg_catalog.array_ndims(biznos)),
            NULL, 'Pass one element per input.');
    END IF;
    IF attempts IS NULL THEN
        PERFORM @extschema@.pay_proxy_raise('22004', 'attempts must not be null', NULL,
            'Pass an array, empty for no inputs.');
    ELSIF pg_catalog.array_ndims(attempts) OPERATOR(pg_catalog.>) 1 THEN
        PERFORM @extschema@.pay_proxy_raise('22023',
            pg_catalog.format('attempts must have one dimension, not %s', pg_catalog.array_ndims(attempts)),
            NULL, 'Pass one element per input.');
    END IF;
    IF outcomes IS NULL THEN
        PERFORM @extschema@.pay_proxy_raise('22004', 'outcomes must not be null', NULL,
            'Pass an array, empty for no inputs.');
    ELSIF pg_catalog.array_ndims(outcomes) OPERATOR(pg_catalog.>) 1 THEN
        PERFORM @extschema@.pay_proxy_raise('22023',
            pg_catalog.format('outcomes must have one dimension, not %s', pg_catalog.array_ndims(outcomes)),
            NULL, 'Pass one element per input.');
    END IF;
    IF channel_refs IS NULL THEN
        PERFORM @extschema@.pay_proxy_raise('22004', 'channel_refs must not be null', NULL,
            'Pass an array, empty for no inputs.');
    ELSIF pg_catalog.array_ndims(channel_refs) OPERATOR(pg_catalog.>) 1 THEN
        PERFORM @extschema@.pay_proxy_raise('22023',
            pg_catalog.format('channel_refs must have one dimension, not %s', pg_catalog.array_ndims(channel_refs)),
            NULL, 'Pass one element per input.');
    END IF;
    IF reasons IS NULL THEN
        PERFORM @extschema@.pay_proxy_raise('22004', 'reasons must not be null', NULL,
            'Pass an array, empty for no inputs.');
    ELSIF pg_catalog.array_ndims(reasons) OPERATOR(pg_catalog.>) 1 THEN
        PERFORM @extschema@.pay_proxy_raise('22023',
            pg_catalog.format('reasons must have one dimension, not %s', pg_catalog.array_ndims(reasons)),
            NULL, 'Pass one element per input.');
    END IF;
    IF pg_catalog.cardinality(attempts) OPERATOR(pg_catalog.<>) pg_catalog.cardinality(biznos) THEN
        PERFORM @extschema@.pay_proxy_raise('22023', 'biznos and attempts differ in length',
            pg_catalog.format('The arrays of a batch hold one element per input, in the same order: '
                              'biznos has %s, attempts %s.',
                              pg_catalog.cardinality(biznos), pg_catalog.cardinality(attempts)),
            'Pass arrays of equal lengths.');
    END IF;
    IF pg_catalog.cardinality(outcomes) OPERATOR(pg_catalog.<>) pg_catalog.cardinality(biznos) THEN
        PERFORM @extschema@.pay_proxy_raise('22023', 'biznos and outcomes differ in length',
            pg_catalog.format('The arrays of a batch hold one element per input, in the same order: '
                              'biznos has %s, outcomes %s.',
                              pg_catalog.cardinality(biznos), pg_catalog.cardinality(outcomes)),
            'Pass arrays of equal lengths.');
    END IF;
    IF pg_catalog.cardinality(channel_refs) OPERATOR(pg_catalog.<>) pg_catalog.cardinality(biznos) THEN
        PERFORM @extschema@.pay_proxy_raise('22023', 'biznos and channel_refs differ in length',
            pg_catalog.format('The arrays of a batch hold one element per input, in the same order: '
                              'biznos has %s, channel_refs %s.',
                              pg_catalog.cardinality(biznos), pg_catalog.cardinality(channel_refs)),
            'Pass arrays of equal lengths.');
    END IF;
    IF pg_catalog.cardinality(reasons) OPERATOR(pg_catalog.<>) pg_catalog.cardinality(biznos) THEN
        PERFORM @extschema@.pay_proxy_raise('22023', 'biznos and reasons differ in length',
            pg_catalog.format('The arrays of a batch hold one element per input, in the same order: '
                              'biznos has %s, reasons %s.',
                              pg_catalog.cardinality(biznos), pg_catalog.cardinality(reasons)),
            'Pass arrays of equal lengths.');
    END IF;

    FOR part IN
        SELECT u.partition_number,
               pg_catalog.array_agg(u.input_number ORDER BY u.input_number) AS input_numbers,
               pg_catalog.array_agg(u.bizno ORDER BY u.input_number) AS biznos,
               pg_catalog.array_agg(u.attempt ORDER BY u.input_number) AS attempts,
               pg_catalog.array_agg(u.outcome ORDER BY u.input_number) AS outcomes,
               pg_catalog.array_agg(u.channel_ref ORDER BY u.input_number) AS channel_refs,
               pg_catalog.array_agg(u.reason ORDER BY u.input_number) AS reasons
        FROM ROWS FROM (pg_catalog.unnest(biznos),
                        pg_catalog.unnest(attempts),
                        pg_catalog.unnest(outcomes),
                        pg_catalog.unnest(channel_refs),
                        pg_catalog.unnest(reasons),
                        pg_catalog.unnest(@extschema@.pay_partitions(biznos)))
             WITH ORDINALITY AS u(bizno, attempt, outcome, channel_ref, reason, partition_number, input_number)
        GROUP BY u.partition_number
    LOOP
        IF part.partition_number IS NULL THEN
            -- inputs the router refuses, each with the shards' own error
            FOR i IN 1 .. pg_catalog.cardinality(part.input_numbers) LOOP
                error_state := NULL;
                error_constraint := NULL;
                BEGIN
                    PERFORM @extschema@.pay_route(part.biznos[i]);
                EXCEPTION WHEN OTHERS THEN
                    GET STACKED DIAGNOSTICS error_state = RETURNED_SQLSTATE,
                                            error_constraint = CONSTRAINT_NAME;
                END;
                RETURN QUERY SELECT part.input_numbers[i]::integer, part.biznos[i], NULL::text, error_state,
                                    NULLIF(error_constraint, '');
            END LOOP;
            CONTINUE;
        END IF;
        BEGIN
            RETURN QUERY
                SELECT part.input_numbers[r.input_number]::integer, r.bizno, r.result, r.sqlstate,
                       r.constraint_name
                FROM @extschema@.pay_settle_many_on_partition(part.partition_number, part.biznos,
                         part.attempts, part.outcomes, part.channel_refs, part.reasons)
                     WITH ORDINALITY AS r(bizno, result, sqlstate, constraint_name, input_number);
        EXCEPTION WHEN OTHERS THEN
            -- the part failed as a whole: each of its inputs answers the error
            GET STACKED DIAGNOSTICS error_state = RETURNED_SQLSTATE, error_message = MESSAGE_TEXT,
                                    error_detail = PG_EXCEPTION_DETAIL, error_hint = PG_EXCEPTION_HINT,
                                    error_context = PG_EXCEPTION_CONTEXT;
            BEGIN
                PERFORM @extschema@.pay_proxy_raise(error_state, error_message, error_detail, error_hint,
                                                    error_context);
            EXCEPTION WHEN OTHERS THEN
                GET STACKED DIAGNOSTICS error_state = RETURNED_SQLSTATE, error_constraint = CONSTRAINT_NAME;
            END;
            RETURN QUERY SELECT u.input_number::integer, u.key, NULL::text, error_state,
                                NULLIF(error_constraint, '')
                         FROM ROWS FROM (pg_catalog.unnest(part.input_numbers),
                                         pg_catalog.unnest(part.biznos)) AS u(input_number, key);
        END;
    END LOOP;
END
$$
LANGUAGE plpgsql VOLATILE SET search_path = @extschema@, pg_temp
    SET client_min_messages = warning;

COMMENT ON FUNCTION @extschema@.pay_settle_many_of_partitions(text[], bigint[], @extschema@.pay_status[], text[], text[]) IS
'Splits a batch of pay_settle_many by partition and runs each part on its partition, one after the other: every input answered, with its number in the batch; called by pay_settle_many';

CREATE FUNCTION @extschema@.pay_settle_many(biznos text[], attempts bigint[],
                                            outcomes @extschema@.pay_status[], channel_refs text[],
                                            reasons text[])
RETURNS TABLE (bizno text, result text, sqlstate text, constraint_name text)
AS $$
    SELECT a.bizno, a.result, a.sqlstate, a.constraint_name
    FROM @extschema@.pay_settle_many_of_partitions(biznos, attempts, outcomes, channel_refs, reasons) AS a
    ORDER BY a.input_number
$$
LANGUAGE sql VOLATILE SET search_path = @extschema@, pg_temp;

COMMENT ON FUNCTION @extschema@.pay_settle_many(text[], bigint[], @extschema@.pay_status[], text[], text[]) IS
'pay_succeed (outcome SUCCESS, with its channel_ref) or pay_fail (outcome FAILED, with its reason) for each input in input order, each on its partition: per input SUCCESS, SECOND_CHARGE or FAILED, or the SQLSTATE and constraint name of the refusal that call would raise, or 08001 / 08006 when its partition could not be reached';

-- Calls about every payment: run on every partition at once (PL/Proxy
-- sends them in parallel) and answered as one node would.  A partition
-- that cannot be reached fails the whole call (08001 or 08006 naming its
-- database): a partial answer would look like a complete one.  Only
-- pay_stats answers without it, and says so in every row (below).
-- pay_verify, pay_stats and pay_stats_reset refuse nothing a constraint
-- names (a role without the grant gets 42501 from the partition);
-- pay_reconcile_rows, which settles, reports its constraint names as the
-- routed calls do.

CREATE FUNCTION @extschema@.pay_verify_on_all_partitions()
RETURNS TABLE (bizno text, problem text)
AS $$
    CLUSTER 'idempotent_pay';
    RUN ON ALL;
    TARGET @extschema@.pay_verify;
$$
LANGUAGE plproxy;

COMMENT ON FUNCTION @extschema@.pay_verify_on_all_partitions() IS
'PL/Proxy: runs pay_verify on every partition; called by pay_verify';

CREATE FUNCTION @extschema@.pay_verify()
RETURNS TABLE (bizno text, problem text)
AS $$
DECLARE
    error_state text;
    error_message text;
    error_detail text;
    error_hint text;
    error_context text;
BEGIN
    RETURN QUERY SELECT * FROM @extschema@.pay_verify_on_all_partitions();
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS error_state = RETURNED_SQLSTATE, error_message = MESSAGE_TEXT,
                            error_detail = PG_EXCEPTION_DETAIL, error_hint = PG_EXCEPTION_HINT,
                            error_context = PG_EXCEPTION_CONTEXT;
    PERFORM @extschema@.pay_proxy_raise(error_state, error_message, error_detail, error_hint, error_context);
END
$$
LANGUAGE plpgsql STABLE SET search_path = @extschema@, pg_temp
    SET client_min_messages = warning;

COMMENT ON FUNCTION @extschema@.pay_verify() IS
'Every violation of the ledger/journal invariants on every partition, second charges no statement confirmed among them; no rows when all hold';

CREATE FUNCTION @extschema@.pay_stats_on_all_partitions(OUT status @extschema@.pay_status,
    OUT payments bigint, OUT stuck bigint, OUT oldest_processing_since timestamptz, OUT resets bigint,
    OUT duplicate_answers bigint, OUT stats_reset timestamptz, OUT refunds bigint, OUT second_charges bigint,
    OUT unconfirmed_second_charges bigint, OUT authorizations bigint, OUT captures bigint, OUT voids bigint,
    OUT increments bigint)
RETURNS SETOF record
AS $$
    CLUSTER 'idempotent_pay';
    RUN ON ALL;
    SELECT s.status, s.payments, s.stuck, s.oldest_processing_since, s.resets, s.duplicate_answers,
           s.stats_reset, s.refunds, s.second_charges, s.unconfirmed_second_charges, s.authorizations,
           s.captures, s.voids, s.increments
    FROM @extschema@.pay_stats AS s;
$$
LANGUAGE plproxy;

COMMENT ON FUNCTION @extschema@.pay_stats_on_all_partitions() IS
'PL/Proxy: runs pay_stats on every partition at once; called by pay_stats_of_partitions';

CREATE FUNCTION @extschema@.pay_stats_on_partition(partition_number integer,
    OUT status @extschema@.pay_status, OUT payments bigint, OUT stuck bigint,
    OUT oldest_processing_since timestamptz, OUT resets bigint, OUT duplicate_answers bigint,
    OUT stats_reset timestamptz, OUT refunds bigint, OUT second_charges bigint,
    OUT unconfirmed_second_charges bigint, OUT authorizations bigint, OUT captures bigint, OUT voids bigint,
    OUT increments bigint)
RETURNS SETOF record
AS $$
    CLUSTER 'idempotent_pay';
    RUN ON partition_number;
    SELECT s.status, s.payments, s.stuck, s.oldest_processing_since, s.resets, s.duplicate_answers,
           s.stats_reset, s.refunds, s.second_charges, s.unconfirmed_second_charges, s.authorizations,
           s.captures, s.voids, s.increments
    FROM @extschema@.pay_stats AS s;
$$
LANGUAGE plproxy;

COMMENT ON FUNCTION @extschema@.pay_stats_on_partition(integer) IS
'PL/Proxy: runs pay_stats on partition partition_number (0 to pay_partition_count() - 1); called by pay_stats_of_partitions';

-- Every partition's pay_stats rows, and one row for each partition that
-- did not answer: its name (the server option of its connection string,
-- p<N>) in unanswered_partition, every other column NULL.  First every
-- partition at once, in parallel, as every day.  When that fails with a
-- connection error (08: pay_proxy_raise tells PL/Proxy's unreachable
-- partition and broken connection apart from a shard's own errors), each
-- partition is asked again on its own, in order: one that fails with a
-- connection error again is named, any other error (a role without the
-- grant on the shard: 42501) is raised as the shard raised it.  A
-- PL/Proxy call reads its partitions' whole answer before it returns a
-- row, so a failed call has returned none.
CREATE FUNCTION @extschema@.pay_stats_of_partitions(OUT status @extschema@.pay_status, OUT payments bigint,
    OUT stuck bigint, OUT oldest_processing_since timestamptz, OUT resets bigint,
    OUT duplicate_answers bigint, OUT stats_reset timestamptz, OUT refunds bigint, OUT second_charges bigint,
    OUT unconfirmed_second_charges bigint, OUT authorizations bigint, OUT captures bigint, OUT voids bigint,
    OUT increments bigint, OUT unanswered_partition text)
RETURNS SETOF record
AS $$
DECLARE
    partition_option record;
    error_state text;
    error_message text;
    error_detail text;
    error_hint text;
    error_context text;
BEGIN
    BEGIN
        RETURN QUERY SELECT s.*, NULL::pg_catalog.text FROM @extschema@.pay_stats_on_all_partitions() AS s;
        RETURN;
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS error_state = RETURNED_SQLSTATE, error_message = MESSAGE_TEXT,
                                error_detail = PG_EXCEPTION_DETAIL, error_hint = PG_EXCEPTION_HINT,
                                error_context = PG_EXCEPTION_CONTEXT;
    END;
    BEGIN
        PERFORM @extschema@.pay_proxy_raise(error_state, error_message, error_detail, error_hint, error_context);
    EXCEPTION WHEN connection_exception THEN
        NULL;
    END;

    FOR partition_option IN
        SELECT o.option_name AS name,
               pg_catalog.substring(o.option_name, '[0-9]+$')::pg_catalog.int4 AS number
        FROM pg_catalog.pg_foreign_server AS f,
             pg_catalog.pg_options_to_table(f.srvoptions) AS o
        WHERE f.srvname OPERATOR(pg_catalog.=) 'idempotent_pay'
          AND o.option_name OPERATOR(pg_catalog.~) '^(p|partition_)[0-9]+$'
        ORDER BY 2
    LOOP
        BEGIN
            RETURN QUERY SELECT s.*, NULL::pg_catalog.text
                         FROM @extschema@.pay_stats_on_partition(partition_option.number) AS s;
        EXCEPTION WHEN OTHERS THEN
            GET STACKED DIAGNOSTICS error_state = RETURNED_SQLSTATE, error_message = MESSAGE_TEXT,
                                    error_detail = PG_EXCEPTION_DETAIL, error_hint = PG_EXCEPTION_HINT,
                                    error_context = PG_EXCEPTION_CONTEXT;
            BEGIN
                PERFORM @extschema@.pay_proxy_raise(error_state, error_message, error_detail, error_hint,
                                                    error_context);
            EXCEPTION WHEN connection_exception THEN
                -- (nothing assigns the other OUT parameters: they are NULL)
                unanswered_partition := partition_option.name;
                RETURN NEXT;
            END;
        END;
    END LOOP;
END
$$
LANGUAGE plpgsql STABLE SET search_path = @extschema@, pg_temp
    SET client_min_messages = warning;

COMMENT ON FUNCTION @extschema@.pay_stats_of_partitions() IS
'Every partition''s pay_stats rows, and a row naming each partition that did not answer; added up by the view pay_stats';

-- One row per status, always (all counts NULL when no partition
-- answered).  Counts add up over the partitions that answered; the oldest
-- PROCESSING is the oldest of all; duplicate answers are known only when
-- every partition that answered counts them (each preloads the library);
-- stats_reset is the latest reset, since which every one of them has
-- counted.  unanswered_partitions, the same on every row: the partitions
-- whose rows are missing from the counts, in partition order; empty when
-- every partition answered.
CREATE VIEW @extschema@.pay_stats AS
    WITH p AS (SELECT * FROM @extschema@.pay_stats_of_partitions() WITH ORDINALITY AS p)
    SELECT s.status,
           pg_catalog.sum(p.payments)::bigint AS payments,
           pg_catalog.sum(p.stuck)::bigint AS stuck,
           pg_catalog.min(p.oldest_processing_since) AS oldest_processing_since,
           pg_catalog.sum(p.resets)::bigint AS resets,
           CASE WHEN pg_catalog.count(p.duplicate_answers) OPERATOR(pg_catalog.=) pg_catalog.count(p.status)
               THEN pg_catalog.sum(p.duplicate_answers)::bigint
           END AS duplicate_answers,
           CASE WHEN pg_catalog.count(p.stats_reset) OPERATOR(pg_catalog.=) pg_catalog.count(p.status)
               THEN pg_catalog.max(p.stats_reset)
           END AS stats_reset,
           pg_catalog.sum(p.refunds)::bigint AS refunds,
           pg_catalog.sum(p.second_charges)::bigint AS second_charges,
           pg_catalog.sum(p.unconfirmed_second_charges)::bigint AS unconfirmed_second_charges,
           pg_catalog.sum(p.authorizations)::bigint AS authorizations,
           pg_catalog.sum(p.captures)::bigint AS captures,
           pg_catalog.sum(p.voids)::bigint AS voids,
           pg_catalog.sum(p.increments)::bigint AS increments,
           (SELECT COALESCE(pg_catalog.array_agg(u.unanswered_partition ORDER BY u.ordinality), '{}')
            FROM p AS u
            WHERE u.unanswered_partition IS NOT NULL) AS unanswered_partitions
    FROM pg_catalog.unnest(pg_catalog.enum_range(NULL::@extschema@.pay_status)) AS s(status)
    LEFT JOIN p ON p.status OPERATOR(pg_catalog.=) s.status
    GROUP BY s.status
    ORDER BY s.status;

COMMENT ON VIEW @extschema@.pay_stats IS
'pay_stats of the partitions that answered, added up: per status payments (refunds included), stuck ones, the oldest PROCESSING, resets, duplicate answers, refunds, second charges and those no statement confirmed, and the card flow''s authorizations, captures, voids and increments; unanswered_partitions names the partitions that did not answer (empty when all did)';

CREATE FUNCTION @extschema@.pay_stats_amounts_on_all_partitions(OUT currency text, OUT authorized numeric,
    OUT captured numeric)
RETURNS SETOF record
AS $$
    CLUSTER 'idempotent_pay';
    RUN ON ALL;
    SELECT s.currency, s.authorized, s.captured
    FROM @extschema@.pay_stats_amounts AS s;
$$
LANGUAGE plproxy;

COMMENT ON FUNCTION @extschema@.pay_stats_amounts_on_all_partitions() IS
'PL/Proxy: runs pay_stats_amounts on every partition at once; called by pay_stats_amounts_of_partitions';

CREATE FUNCTION @extschema@.pay_stats_amounts_on_partition(partition_number integer, OUT currency text,
    OUT authorized numeric, OUT captured numeric)
RETURNS SETOF record
AS $$
    CLUSTER 'idempotent_pay';
    RUN ON partition_number;
    SELECT s.currency, s.authorized, s.captured
    FROM @extschema@.pay_stats_amounts AS s;
$$
LANGUAGE plproxy;

COMMENT ON FUNCTION @extschema@.pay_stats_amounts_on_partition(integer) IS
'PL/Proxy: runs pay_stats_amounts on partition partition_number (0 to pay_partition_count() - 1); called by pay_stats_amounts_of_partitions';

-- Every partition's pay_stats_amounts rows, and one row for each
-- partition that did not answer, as pay_stats_of_partitions.
CREATE FUNCTION @extschema@.pay_stats_amounts_of_partitions(OUT currency text, OUT authorized numeric,
    OUT captured numeric, OUT unanswered_partition text)
RETURNS SETOF record
AS $$
DECLARE
    partition_option record;
    error_state text;
    error_message text;
    error_detail text;
    error_hint text;
    error_context text;
BEGIN
    BEGIN
        RETURN QUERY SELECT s.*, NULL::pg_catalog.text FROM @extschema@.pay_stats_amounts_on_all_partitions() AS s;
        RETURN;
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS error_state = RETURNED_SQLSTATE, error_message = MESSAGE_TEXT,
                                error_detail = PG_EXCEPTION_DETAIL, error_hint = PG_EXCEPTION_HINT,
                                error_context = PG_EXCEPTION_CONTEXT;
    END;
    BEGIN
        PERFORM @extschema@.pay_proxy_raise(error_state, error_message, error_detail, error_hint, error_context);
    EXCEPTION WHEN connection_exception THEN
        NULL;
    END;

    FOR partition_option IN
        SELECT o.option_name AS name,
               pg_catalog.substring(o.option_name, '[0-9]+$')::pg_catalog.int4 AS number
        FROM pg_catalog.pg_foreign_server AS f,
             pg_catalog.pg_options_to_table(f.srvoptions) AS o
        WHERE f.srvname OPERATOR(pg_catalog.=) 'idempotent_pay'
          AND o.option_name OPERATOR(pg_catalog.~) '^(p|partition_)[0-9]+$'
        ORDER BY 2
    LOOP
        BEGIN
            RETURN QUERY SELECT s.*, NULL::pg_catalog.text
                         FROM @extschema@.pay_stats_amounts_on_partition(partition_option.number) AS s;
        EXCEPTION WHEN OTHERS THEN
            GET STACKED DIAGNOSTICS error_state = RETURNED_SQLSTATE, error_message = MESSAGE_TEXT,
                                    error_detail = PG_EXCEPTION_DETAIL, error_hint = PG_EXCEPTION_HINT,
                                    error_context = PG_EXCEPTION_CONTEXT;
            BEGIN
                PERFORM @extschema@.pay_proxy_raise(error_state, error_message, error_detail, error_hint,
                                                    error_context);
            EXCEPTION WHEN connection_exception THEN
                -- (nothing assigns the other OUT parameters: they are NULL)
                unanswered_partition := partition_option.name;
                RETURN NEXT;
            END;
        END;
    END LOOP;
END
$$
LANGUAGE plpgsql STABLE SET search_path = @extschema@, pg_temp
    SET client_min_messages = warning;

COMMENT ON FUNCTION @extschema@.pay_stats_amounts_of_partitions() IS
'Every partition''s pay_stats_amounts rows, and a row naming each partition that did not answer; added up by the view pay_stats_amounts';

-- Per currency, the amounts of the partitions that answered, added up;
-- unanswered_partitions as in pay_stats, on every row.  A currency is a
-- row where a partition that answered has it, so that when none has any
-- and a partition did not answer, one row says so, every other column
-- NULL.
CREATE VIEW @extschema@.pay_stats_amounts AS
    WITH p AS (SELECT * FROM @extschema@.pay_stats_amounts_of_partitions() WITH ORDINALITY AS p)
    SELECT a.currency, a.authorized, a.captured, u.unanswered_partitions
    FROM (SELECT COALESCE(pg_catalog.array_agg(u.unanswered_partition ORDER BY u.ordinality), '{}')
            FROM p AS u
            WHERE u.unanswered_partition IS NOT NULL) AS u(unanswered_partitions)
    LEFT JOIN (SELECT p.currency, pg_catalog.sum(p.authorized) AS authorized, pg_catalog.sum(p.captured) AS captured
               FROM p
               WHERE p.unanswered_partition IS NULL
               GROUP BY p.currency) AS a ON true
    WHERE a.currency IS NOT NULL OR pg_catalog.cardinality(u.unanswered_partitions) OPERATOR(pg_catalog.>) 0
    ORDER BY a.currency;

COMMENT ON VIEW @extschema@.pay_stats_amounts IS
'pay_stats_amounts of the partitions that answered, added up per currency: authorized and captured ever; unanswered_partitions names the partitions that did not answer (empty when all did; a row of its own when no other row comes)';

CREATE FUNCTION @extschema@.pay_stats_holds_on_all_partitions(OUT currency text, OUT closed_reason text,
    OUT holds bigint, OUT uncaptured numeric)
RETURNS SETOF record
AS $$
    CLUSTER 'idempotent_pay';
    RUN ON ALL;
    SELECT s.currency, s.closed_reason, s.holds, s.uncaptured
    FROM @extschema@.pay_stats_holds() AS s;
$$
LANGUAGE plproxy;

COMMENT ON FUNCTION @extschema@.pay_stats_holds_on_all_partitions() IS
'PL/Proxy: runs pay_stats_holds on every partition at once; called by pay_stats_holds_of_partitions';

CREATE FUNCTION @extschema@.pay_stats_holds_on_partition(partition_number integer, OUT currency text,
    OUT closed_reason text, OUT holds bigint, OUT uncaptured numeric)
RETURNS SETOF record
AS $$
    CLUSTER 'idempotent_pay';
    RUN ON partition_number;
    SELECT s.currency, s.closed_reason, s.holds, s.uncaptured
    FROM @extschema@.pay_stats_holds() AS s;
$$
LANGUAGE plproxy;

COMMENT ON FUNCTION @extschema@.pay_stats_holds_on_partition(integer) IS
'PL/Proxy: runs pay_stats_holds on partition partition_number (0 to pay_partition_count() - 1); called by pay_stats_holds_of_partitions';

-- Every partition's pay_stats_holds rows, and one row for each
-- partition that did not answer, as pay_stats_of_partitions.
CREATE FUNCTION @extschema@.pay_stats_holds_of_partitions(OUT currency text, OUT closed_reason text,
    OUT holds bigint, OUT uncaptured numeric, OUT unanswered_partition text)
RETURNS SETOF record
AS $$
DECLARE
    partition_option record;
    error_state text;
    error_message text;
    error_detail text;
    error_hint text;
    error_context text;
BEGIN
    BEGIN
        RETURN QUERY SELECT s.*, NULL::pg_catalog.text FROM @extschema@.pay_stats_holds_on_all_partitions() AS s;
        RETURN;
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS error_state = RETURNED_SQLSTATE, error_message = MESSAGE_TEXT,
                                error_detail = PG_EXCEPTION_DETAIL, error_hint = PG_EXCEPTION_HINT,
                                error_context = PG_EXCEPTION_CONTEXT;
    END;
    BEGIN
        PERFORM @extschema@.pay_proxy_raise(error_state, error_message, error_detail, error_hint, error_context);
    EXCEPTION WHEN connection_exception THEN
        NULL;
    END;

    FOR partition_option IN
        SELECT o.option_name AS name,
               pg_catalog.substring(o.option_name, '[0-9]+$')::pg_catalog.int4 AS number
        FROM pg_catalog.pg_foreign_server AS f,
             pg_catalog.pg_options_to_table(f.srvoptions) AS o
        WHERE f.srvname OPERATOR(pg_catalog.=) 'idempotent_pay'
          AND o.option_name OPERATOR(pg_catalog.~) '^(p|partition_)[0-9]+$'
        ORDER BY 2
    LOOP
        BEGIN
            RETURN QUERY SELECT s.*, NULL::pg_catalog.text
                         FROM @extschema@.pay_stats_holds_on_partition(partition_option.number) AS s;
        EXCEPTION WHEN OTHERS THEN
            GET STACKED DIAGNOSTICS error_state = RETURNED_SQLSTATE, error_message = MESSAGE_TEXT,
                                    error_detail = PG_EXCEPTION_DETAIL, error_hint = PG_EXCEPTION_HINT,
                                    error_context = PG_EXCEPTION_CONTEXT;
            BEGIN
                PERFORM @extschema@.pay_proxy_raise(error_state, error_message, error_detail, error_hint,
                                                    error_context);
            EXCEPTION WHEN connection_exception THEN
                -- (nothing assigns the other OUT parameters: they are NULL)
                unanswered_partition := partition_option.name;
                RETURN NEXT;
            END;
        END;
    END LOOP;
END
$$
LANGUAGE plpgsql STABLE SET search_path = @extschema@, pg_temp
    SET client_min_messages = warning;

COMMENT ON FUNCTION @extschema@.pay_stats_holds_of_partitions() IS
'Every partition''s pay_stats_holds rows, and a row naming each partition that did not answer; added up by pay_stats_holds()';

-- Per currency and closed_reason, the holds of the partitions that
-- answered, added up (an authorization and its steps are on one
-- partition: each hold is counted once); unanswered_partitions as in
-- pay_stats_amounts.
CREATE FUNCTION @extschema@.pay_stats_holds(OUT currency text, OUT closed_reason text, OUT holds bigint,
    OUT uncaptured numeric, OUT unanswered_partitions text[])
RETURNS SETOF record
AS $$
    WITH p AS (SELECT * FROM @extschema@.pay_stats_holds_of_partitions() WITH ORDINALITY AS p)
    SELECT h.currency, h.closed_reason, h.holds, h.uncaptured, u.unanswered_partitions
    FROM (SELECT COALESCE(pg_catalog.array_agg(u.unanswered_partition ORDER BY u.ordinality), '{}')
            FROM p AS u
            WHERE u.unanswered_partition IS NOT NULL) AS u(unanswered_partitions)
    LEFT JOIN (SELECT p.currency, p.closed_reason, pg_catalog.sum(p.holds)::bigint AS holds,
                      pg_catalog.sum(p.uncaptured) AS uncaptured
               FROM p
               WHERE p.unanswered_partition IS NULL
               GROUP BY p.currency, p.closed_reason) AS h ON true
    WHERE h.currency IS NOT NULL OR pg_catalog.cardinality(u.unanswered_partitions) OPERATOR(pg_catalog.>) 0
    ORDER BY 1, 2 NULLS FIRST
$$
LANGUAGE sql STABLE SET search_path = @extschema@, pg_temp;

COMMENT ON FUNCTION @extschema@.pay_stats_holds() IS
'pay_stats_holds of the partitions that answered, added up per currency and closed_reason (NULL: open): how many holds, and what is neither captured nor in flight; unanswered_partitions names the partitions that did not answer (empty when all did; a row of its own when no other row comes)';

CREATE FUNCTION @extschema@.pay_stats_reset_on_all_partitions()
RETURNS SETOF boolean
AS $$
    CLUSTER 'idempotent_pay';
    RUN ON ALL;
    SELECT true AS reset FROM @extschema@.pay_stats_reset();
$$
LANGUAGE plproxy;

COMMENT ON FUNCTION @extschema@.pay_stats_reset_on_all_partitions() IS
'PL/Proxy: runs pay_stats_reset on every partition; called by pay_stats_reset';

CREATE FUNCTION @extschema@.pay_stats_reset()
RETURNS void
AS $$
DECLARE
    error_state text;
    error_message text;
    error_detail text;
    error_hint text;
    error_context text;
BEGIN
    PERFORM @extschema@.pay_stats_reset_on_all_partitions();
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS error_state = RETURNED_SQLSTATE, error_message = MESSAGE_TEXT,
                            error_detail = PG_EXCEPTION_DETAIL, error_hint = PG_EXCEPTION_HINT,
                            error_context = PG_EXCEPTION_CONTEXT;
    PERFORM @extschema@.pay_proxy_raise(error_state, error_message, error_detail, error_hint, error_context);
END
$$
LANGUAGE plpgsql VOLATILE SET search_path = @extschema@, pg_temp
    SET client_min_messages = warning;

COMMENT ON FUNCTION @extschema@.pay_stats_reset() IS
'Start the counters of pay_stats again from zero on every partition';

-- Reconciliation: the statement is a relation of the proxy database, which
-- no partition can read.  Its rows are sent, each to the partition of its
-- bizNo (of the bizNo its reference bizNo/attempt names), as one JSON
-- array per partition (an empty one where none belongs, so that every
-- partition reports its own MISSING_IN_BANK payments), and each partition
-- reconciles its share with pay_reconcile_rows, settling its own payments
-- with settle => true.
CREATE FUNCTION @extschema@.pay_reconcile_on_partitions(partitions integer[], shares jsonb[], settle boolean,
                                                        since timestamptz)
RETURNS TABLE (kind text, bizno text, ledger_status @extschema@.pay_status, ledger_amount numeric,
               bank_amount numeric, bank_rows integer, detail text)
AS $$
    CLUSTER 'idempotent_pay';
    SPLIT partitions, shares;
    RUN ON partitions;
    SELECT r.kind, r.bizno, r.ledger_status, r.ledger_amount, r.bank_amount, r.bank_rows, r.detail
    FROM pg_catalog.set_config('idempotent_pay.report_constraint', 'on', false) AS s(v),
         LATERAL @extschema@.pay_reconcile_rows(CASE WHEN s.v IS NOT NULL THEN (shares)[1] END, settle, since) AS r;
$$
LANGUAGE plproxy;

COMMENT ON FUNCTION @extschema@.pay_reconcile_on_partitions(integer[], jsonb[], boolean, timestamptz) IS
'PL/Proxy: runs pay_reconcile_rows on every partition named in partitions, with its share of the statement, its constraint names reported; called by pay_reconcile';

CREATE FUNCTION @extschema@.pay_reconcile(statement regclass, settle boolean DEFAULT false,
                                          since timestamptz DEFAULT NULL)
RETURNS TABLE (kind text, bizno text, ledger_status @extschema@.pay_status, ledger_amount numeric,
               bank_amount numeric, bank_rows integer, detail text)
AS $$
DECLARE
    partitions integer[];
    shares jsonb[];
    error_state text;
    error_message text;
    error_detail text;
    error_hint text;
    error_context text;
BEGIN
    IF statement IS NULL OR settle IS NULL THEN
        RAISE EXCEPTION 'statement and settle must not be null' USING ERRCODE = '22004';
    END IF;

    EXECUTE pg_catalog.format($query$
        SELECT pg_catalog.array_agg(p.partition ORDER BY p.partition),
               pg_catalog.array_agg(COALESCE(r.share, '[]') ORDER BY p.partition)
        FROM pg_catalog.generate_series(0, @extschema@.pay_partition_count() OPERATOR(pg_catalog.-) 1) AS p(partition)
        LEFT JOIN (SELECT @extschema@.pay_statement_partition(s.bizno::pg_catalog.text) AS partition,
                          pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object(
                              'bizno', s.bizno, 'amount', s.amount, 'currency', s.currency,
                              'status', s.status, 'channel_ref', s.channel_ref)) AS share
                   FROM %s AS s
                   GROUP BY 1) AS r ON r.partition OPERATOR(pg_catalog.=) p.partition
    $query$, statement) INTO partitions, shares;

    BEGIN
        RETURN QUERY
            SELECT r.kind, r.bizno, r.ledger_status, r.ledger_amount, r.bank_amount, r.bank_rows, r.detail
            FROM @extschema@.pay_reconcile_on_partitions(partitions, shares, settle, since) AS r
            ORDER BY r.kind, r.bizno;
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS error_state = RETURNED_SQLSTATE, error_message = MESSAGE_TEXT,
                                error_detail = PG_EXCEPTION_DETAIL, error_hint = PG_EXCEPTION_HINT,
                                error_context = PG_EXCEPTION_CONTEXT;
        PERFORM @extschema@.pay_proxy_raise(error_state, error_message, error_detail, error_hint, error_context);
    END;
END
$$
LANGUAGE plpgsql VOLATILE SET search_path = @extschema@, pg_temp
    SET client_min_messages = warning;

COMMENT ON FUNCTION @extschema@.pay_reconcile(regclass, boolean, timestamptz) IS
'Compare every partition''s ledger with a bank statement of the proxy database (bizno or bizno/attempt, amount, currency, status, channel_ref), each row on its bizNo''s partition; settle => true settles there and confirms second charges';

-- Work queues stay on each partition.

CREATE FUNCTION @extschema@.pay_stuck(older_than interval DEFAULT '1 minute', max_rows integer DEFAULT 100)
RETURNS SETOF @extschema@.pay_ledger
AS $$
BEGIN
    PERFORM @extschema@.pay_proxy_raise('0A000',
        'pay_stuck runs on each partition, not through the proxy',
        'It locks the rows it returns FOR UPDATE SKIP LOCKED until the reconciler''s transaction ends; '
        'PL/Proxy commits every call on a partition at once, so through the proxy the locks would be '
        'gone before the reconciler settles, and two reconcilers would take the same payments.',
        'Connect a reconciler to each partition''s database: BEGIN, pay_stuck, ask the bank, '
        'pay_succeed or pay_fail, COMMIT, all on that connection.');
END
$$
LANGUAGE plpgsql VOLATILE SET search_path = @extschema@, pg_temp
    SET client_min_messages = warning;

COMMENT ON FUNCTION @extschema@.pay_stuck(interval, integer) IS
'Refused through the proxy (0A000): run pay_stuck on each partition, whose row locks it needs';

-- Privileges: as on a shard, the API is revoked from PUBLIC; pay_grant and
-- pay_grant_operator give a role what it needs here, and USAGE on the
-- cluster's server, without which PL/Proxy does not connect for it.  Each
-- shard grants the same role its own (pay_grant there): it decides.

REVOKE ALL ON FUNCTION
    @extschema@.pay_bizno_on_partition(text, text),
    @extschema@.pay_bizno(text, text),
    @extschema@.pay_open_on_partition(text, text, numeric, text),
    @extschema@.pay_open(text, text, numeric, text),
    @extschema@.pay_open_claim_on_partition(text, text, numeric, text),
    @extschema@.pay_open_claim(text, text, numeric, text),
    @extschema@.pay_begin_on_partition(text, numeric, text),
    @extschema@.pay_begin(text, numeric, text),
    @extschema@.pay_claim_on_partition(text, numeric, text),
    @extschema@.pay_claim(text, numeric, text),
    @extschema@.pay_succeed_on_partition(text, text, bigint, jsonb),
    @extschema@.pay_succeed(text, text, bigint, jsonb),
    @extschema@.pay_fail_on_partition(text, text, bigint),
    @extschema@.pay_fail(text, text, bigint),
    @extschema@.pay_reset_on_partition(text, text),
    @extschema@.pay_reset(text, text),
    @extschema@.pay_transition_on_partition(text, @extschema@.pay_status, text),
    @extschema@.pay_transition(text, @extschema@.pay_status, text),
    @extschema@.pay_get_on_partition(text),
    @extschema@.pay_get(text),
    @extschema@.pay_find_on_partition(text, text),
    @extschema@.pay_find(text, text),
    @extschema@.pay_refund_open_on_partition(text, text, numeric, text),
    @extschema@.pay_refund_open(text, text, numeric, text),
    @extschema@.pay_refund_balance_on_partition(text),
    @extschema@.pay_refund_balance(text),
    @extschema@.pay_confirm_second_charge_on_partition(text, text),
    @extschema@.pay_confirm_second_charge(text, text),
    @extschema@.pay_open_authorization_on_partition(text, text, numeric, text, interval),
    @extschema@.pay_open_authorization(text, text, numeric, text, interval),
    @extschema@.pay_capture_open_on_partition(text, text, numeric, boolean),
    @extschema@.pay_capture_open(text, text, numeric, boolean),
    @extschema@.pay_void_open_on_partition(text, text),
    @extschema@.pay_void_open(text, text),
    @extschema@.pay_increment_open_on_partition(text, text, numeric),
    @extschema@.pay_increment_open(text, text, numeric),
    @extschema@.pay_authorization_balance_on_partition(text),
    @extschema@.pay_authorization_balance(text),
    @extschema@.pay_open_claim_many_on_partition(integer, text, text[], numeric[], text),
    @extschema@.pay_open_claim_many_of_partitions(text, text[], numeric[], text),
    @extschema@.pay_open_claim_many(text, text[], numeric[], text),
    @extschema@.pay_settle_many_on_partition(integer, text[], bigint[], @extschema@.pay_status[], text[], text[]),
    @extschema@.pay_settle_many_of_partitions(text[], bigint[], @extschema@.pay_status[], text[], text[]),
    @extschema@.pay_settle_many(text[], bigint[], @extschema@.pay_status[], text[], text[]),
    @extschema@.pay_reconcile_on_partitions(integer[], jsonb[], boolean, timestamptz),
    @extschema@.pay_reconcile(regclass, boolean, timestamptz),
    @extschema@.pay_stats_on_all_partitions(),
    @extschema@.pay_stats_on_partition(integer),
    @extschema@.pay_stats_of_partitions(),
    @extschema@.pay_stats_amounts_on_all_partitions(),
    @extschema@.pay_stats_amounts_on_partition(integer),
    @extschema@.pay_stats_amounts_of_partitions(),
    @extschema@.pay_stats_holds_on_all_partitions(),
    @extschema@.pay_stats_holds_on_partition(integer),
    @extschema@.pay_stats_holds_of_partitions(),
    @extschema@.pay_stats_holds(),
    @extschema@.pay_stats_reset_on_all_partitions(),
    @extschema@.pay_stats_reset(),
    @extschema@.pay_verify_on_all_partitions(),
    @extschema@.pay_verify(),
    @extschema@.pay_stuck(interval, integer)
FROM PUBLIC;
REVOKE ALL ON @extschema@.pay_stats, @extschema@.pay_stats_amounts FROM PUBLIC;

-- Grant role functions and relations, and USAGE on the cluster's server.
CREATE FUNCTION @extschema@.pay_grant_functions(role regrole, functions regprocedure[],
                                                relations regclass[] DEFAULT '{}')
RETURNS void
AS $$
BEGIN
    IF role IS NULL THEN
        RAISE EXCEPTION 'role must not be null' USING ERRCODE = '22004';
    END IF;
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_foreign_server AS s
                   WHERE s.srvname OPERATOR(pg_catalog.=) 'idempotent_pay') THEN
        RAISE EXCEPTION 'the PL/Proxy cluster "idempotent_pay" is not defined' USING ERRCODE = '42704',
            HINT = 'Define it first: CREATE SERVER idempotent_pay FOREIGN DATA WRAPPER plproxy OPTIONS (p0 ''...'', ...).';
    END IF;
    EXECUTE pg_catalog.format('GRANT USAGE ON SCHEMA @extschema@ TO %s', role);
    EXECUTE pg_catalog.format('GRANT USAGE ON FOREIGN SERVER idempotent_pay TO %s', role);
    EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO %s',
        (SELECT pg_catalog.string_agg(f::pg_catalog.text, ', ') FROM pg_catalog.unnest(functions) AS f), role);
    IF pg_catalog.cardinality(relations) OPERATOR(pg_catalog.>) 0 THEN
        EXECUTE pg_catalog.format('GRANT SELECT ON %s TO %s',
            (SELECT pg_catalog.string_agg(r::pg_catalog.text, ', ') FROM pg_catalog.unnest(relations) AS r), role);
    END IF;
END
$$
LANGUAGE plpgsql VOLATILE SET search_path = @extschema@, pg_temp;

COMMENT ON FUNCTION @extschema@.pay_grant_functions(regrole, regprocedure[], regclass[]) IS
'Grant role EXECUTE on the functions, SELECT on the relations and USAGE on the schema and on the cluster''s server (pay_grant, pay_grant_operator)';

REVOKE ALL ON FUNCTION @extschema@.pay_grant_functions(regrole, regprocedure[], regclass[]) FROM PUBLIC;

-- Least privilege, as on a 1.4 shard: an application pays, an operator
-- repairs (pay_reset, pay_transition) and reconciles.
CREATE FUNCTION @extschema@.pay_grant(role regrole)
RETURNS void
AS $$
    SELECT @extschema@.pay_grant_functions(role, ARRAY[
        '@extschema@.pay_bizno_on_partition(text, text)',
        '@extschema@.pay_bizno(text, text)',
        '@extschema@.pay_open_on_partition(text, text, numeric, text)',
        '@extschema@.pay_open(text, text, numeric, text)',
        '@extschema@.pay_open_claim_on_partition(text, text, numeric, text)',
        '@extschema@.pay_open_claim(text, text, numeric, text)',
        '@extschema@.pay_begin_on_partition(text, numeric, text)',
        '@extschema@.pay_begin(text, numeric, text)',
        '@extschema@.pay_claim_on_partition(text, numeric, text)',
        '@extschema@.pay_claim(text, numeric, text)',
        '@extschema@.pay_succeed_on_partition(text, text, bigint, jsonb)',
        '@extschema@.pay_succeed(text, text, bigint, jsonb)',
        '@extschema@.pay_fail_on_partition(text, text, bigint)',
        '@extschema@.pay_fail(text, text, bigint)',
        '@extschema@.pay_get_on_partition(text)',
        '@extschema@.pay_get(text)',
        '@extschema@.pay_find_on_partition(text, text)',
        '@extschema@.pay_find(text, text)',
        '@extschema@.pay_refund_open_on_partition(text, text, numeric, text)',
        '@extschema@.pay_refund_open(text, text, numeric, text)',
        '@extschema@.pay_refund_balance_on_partition(text)',
        '@extschema@.pay_refund_balance(text)',
        '@extschema@.pay_open_authorization_on_partition(text, text, numeric, text, interval)',
        '@extschema@.pay_open_authorization(text, text, numeric, text, interval)',
        '@extschema@.pay_capture_open_on_partition(text, text, numeric, boolean)',
        '@extschema@.pay_capture_open(text, text, numeric, boolean)',
        '@extschema@.pay_void_open_on_partition(text, text)',
        '@extschema@.pay_void_open(text, text)',
        '@extschema@.pay_increment_open_on_partition(text, text, numeric)',
        '@extschema@.pay_increment_open(text, text, numeric)',
        '@extschema@.pay_authorization_balance_on_partition(text)',
        '@extschema@.pay_authorization_balance(text)',
        '@extschema@.pay_open_claim_many_on_partition(integer, text, text[], numeric[], text)',
        '@extschema@.pay_open_claim_many_of_partitions(text, text[], numeric[], text)',
        '@extschema@.pay_open_claim_many(text, text[], numeric[], text)',
        '@extschema@.pay_settle_many_on_partition(integer, text[], bigint[], @extschema@.pay_status[], text[], text[])',
        '@extschema@.pay_settle_many_of_partitions(text[], bigint[], @extschema@.pay_status[], text[], text[])',
        '@extschema@.pay_settle_many(text[], bigint[], @extschema@.pay_status[], text[], text[])',
        '@extschema@.pay_stuck(interval, integer)',
        '@extschema@.pay_bizno_valid(text)',
        '@extschema@.pay_bizno_parse(text)'
    ]::pg_catalog.regprocedure[])
$$
LANGUAGE sql VOLATILE SET search_path = @extschema@, pg_temp;

COMMENT ON FUNCTION @extschema@.pay_grant(regrole) IS
'Give an application role what paying through the proxy needs and no more: open, claim, begin, succeed, fail, get, find, refund_open, refund_balance, open_claim_many, settle_many, open_authorization, capture_open, void_open, increment_open, authorization_balance, the bizNo functions, USAGE on the cluster''s server; grant it on every shard too';

CREATE FUNCTION @extschema@.pay_grant_operator(role regrole)
RETURNS void
AS $$
    SELECT @extschema@.pay_grant_functions(role, ARRAY[
        '@extschema@.pay_bizno_on_partition(text, text)',
        '@extschema@.pay_bizno(text, text)',
        '@extschema@.pay_succeed_on_partition(text, text, bigint, jsonb)',
        '@extschema@.pay_succeed(text, text, bigint, jsonb)',
        '@extschema@.pay_fail_on_partition(text, text, bigint)',
        '@extschema@.pay_fail(text, text, bigint)',
        '@extschema@.pay_reset_on_partition(text, text)',
        '@extschema@.pay_reset(text, text)',
        '@extschema@.pay_transition_on_partition(text, @extschema@.pay_status, text)',
        '@extschema@.pay_transition(text, @extschema@.pay_status, text)',
        '@extschema@.pay_get_on_partition(text)',
        '@extschema@.pay_get(text)',
        '@extschema@.pay_find_on_partition(text, text)',
        '@extschema@.pay_find(text, text)',
        '@extschema@.pay_refund_open_on_partition(text, text, numeric, text)',
        '@extschema@.pay_refund_open(text, text, numeric, text)',
        '@extschema@.pay_refund_balance_on_partition(text)',
        '@extschema@.pay_refund_balance(text)',
        '@extschema@.pay_confirm_second_charge_on_partition(text, text)',
        '@extschema@.pay_confirm_second_charge(text, text)',
        '@extschema@.pay_authorization_balance_on_partition(text)',
        '@extschema@.pay_authorization_balance(text)',
        '@extschema@.pay_reconcile_on_partitions(integer[], jsonb[], boolean, timestamptz)',
        '@extschema@.pay_reconcile(regclass, boolean, timestamptz)',
        '@extschema@.pay_stats_on_all_partitions()',
        '@extschema@.pay_stats_on_partition(integer)',
        '@extschema@.pay_stats_of_partitions()',
        '@extschema@.pay_stats_amounts_on_all_partitions()',
        '@extschema@.pay_stats_amounts_on_partition(integer)',
        '@extschema@.pay_stats_amounts_of_partitions()',
        '@extschema@.pay_stats_holds_on_all_partitions()',
        '@extschema@.pay_stats_holds_on_partition(integer)',
        '@extschema@.pay_stats_holds_of_partitions()',
        '@extschema@.pay_stats_holds()',
        '@extschema@.pay_stats_reset_on_all_partitions()',
        '@extschema@.pay_stats_reset()',
        '@extschema@.pay_verify_on_all_partitions()',
        '@extschema@.pay_verify()',
        '@extschema@.pay_stuck(interval, integer)'
    ]::pg_catalog.regprocedure[], ARRAY['@extschema@.pay_stats', '@extschema@.pay_stats_amounts']::pg_catalog.regclass[])
$$
LANGUAGE sql VOLATILE SET search_path = @extschema@, pg_temp;

COMMENT ON FUNCTION @extschema@.pay_grant_operator(regrole) IS
'Give a finance or operations role what repairing, reconciling, refunding and watching through the proxy need: pay_reset, pay_transition, pay_reconcile, pay_confirm_second_charge, pay_authorization_balance, pay_stats, pay_stats_amounts, pay_stats_holds, pay_verify; grant it on every shard too';

REVOKE ALL ON FUNCTION @extschema@.pay_grant(regrole), @extschema@.pay_grant_operator(regrole) FROM PUBLIC;
