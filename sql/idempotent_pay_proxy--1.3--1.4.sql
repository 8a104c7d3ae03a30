/* idempotent_pay_proxy 1.3 -> 1.4: for shards running idempotent_pay 1.4; batches split by partition, the card flow */

\echo Use "ALTER EXTENSION idempotent_pay_proxy UPDATE TO '1.4'" to load this file. \quit

-- Written by test/proxy_sql.pl, with sql/idempotent_pay_proxy--1.4.sql,
-- from the same definitions (test/tap/007_proxy.pl compares proxies
-- updated from 1.2 and 1.3 with one created at 1.4).  The partitions are
-- updated to idempotent_pay 1.4 before the proxy: a 1.3 proxy pays through
-- 1.4 partitions, while this one calls what only 1.4 has (pay_succeed and
-- pay_fail with a bigint attempt, the batches, the card flow, the ledger's
-- new columns).

-- A ledger row has the card flow's columns.
ALTER TYPE @extschema@.pay_ledger
    ADD ATTRIBUTE kind text,
    ADD ATTRIBUTE expires_in interval,
    ADD ATTRIBUTE expires_at timestamptz;

-- The partitions of a batch's inputs.
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

-- pay_succeed and pay_fail take the attempt as a bigint, as on a 1.4
-- shard.  Another argument type makes them new functions: their grantees
-- are noted and granted them again, PUBLIC and the grant option included.
CREATE TEMPORARY TABLE pay_proxy_grantees ON COMMIT DROP AS
    SELECT p.proname::pg_catalog.text AS function_name,
           CASE WHEN a.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC'
                ELSE a.grantee::pg_catalog.regrole::pg_catalog.text END AS grantee,
           a.is_grantable
    FROM pg_catalog.pg_proc AS p, pg_catalog.aclexplode(p.proacl) AS a
    WHERE p.oid OPERATOR(pg_catalog.=) ANY (ARRAY[
                                                  '@extschema@.pay_succeed_on_partition(text, text, integer, jsonb)',
                                                  '@extschema@.pay_succeed(text, text, integer, jsonb)',
                                                  '@extschema@.pay_fail_on_partition(text, text, integer)',
                                                  '@extschema@.pay_fail(text, text, integer)',
                                                  '@extschema@.pay_stats_of_partitions()',
                                                  '@extschema@.pay_stats_on_partition(integer)',
                                                  '@extschema@.pay_stats_on_all_partitions()'
          ]::pg_catalog.regprocedure[])
      AND a.privilege_type OPERATOR(pg_catalog.=) 'EXECUTE'
      AND a.grantee OPERATOR(pg_catalog.<>) p.proowner;

DROP FUNCTION @extschema@.pay_succeed_on_partition(text, text, integer, jsonb);
DROP FUNCTION @extschema@.pay_succeed(text, text, integer, jsonb);
DROP FUNCTION @extschema@.pay_fail_on_partition(text, text, integer);
DROP FUNCTION @extschema@.pay_fail(text, text, integer);

-- pay_stats has the card flow's columns, before unanswered_partitions:
-- the view and its functions are created again (below), its grantees
-- noted here.
CREATE TEMPORARY TABLE pay_proxy_view_grantees ON COMMIT DROP AS
    SELECT CASE WHEN a.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC'
                ELSE a.grantee::pg_catalog.regrole::pg_catalog.text END AS grantee,
           a.privilege_type, a.is_grantable
    FROM pg_catalog.pg_class AS c, pg_catalog.aclexplode(c.relacl) AS a
    WHERE c.oid OPERATOR(pg_catalog.=) '@extschema@.pay_stats'::pg_catalog.regclass
      AND a.grantee OPERATOR(pg_catalog.<>) c.relowner;

DROP VIEW @extschema@.pay_stats;
DROP FUNCTION @extschema@.pay_stats_of_partitions();
DROP FUNCTION @extschema@.pay_stats_on_partition(integer);
DROP FUNCTION @extschema@.pay_stats_on_all_partitions();

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

-- pay_get and pay_find ask the partition for the new columns.
CREATE OR REPLACE FUNCTION @extschema@.pay_get_on_partition(bizno text)
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

CREATE OR REPLACE FUNCTION @extschema@.pay_get(bizno text)
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

CREATE OR REPLACE FUNCTION @extschema@.pay_find_on_partition(prefix text, biz_id text)
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

CREATE OR REPLACE FUNCTION @extschema@.pay_find(prefix text, biz_id text)
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

-- The card flow.
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

-- pay_stats with the card flow's columns, and the card flow's amounts
-- and holds over the partitions.
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

REVOKE ALL ON FUNCTION
    @extschema@.pay_succeed_on_partition(text, text, bigint, jsonb),
    @extschema@.pay_succeed(text, text, bigint, jsonb),
    @extschema@.pay_fail_on_partition(text, text, bigint),
    @extschema@.pay_fail(text, text, bigint),
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
    @extschema@.pay_stats_on_all_partitions(),
    @extschema@.pay_stats_on_partition(integer),
    @extschema@.pay_stats_of_partitions(),
    @extschema@.pay_stats_amounts_on_all_partitions(),
    @extschema@.pay_stats_amounts_on_partition(integer),
    @extschema@.pay_stats_amounts_of_partitions(),
    @extschema@.pay_stats_holds_on_all_partitions(),
    @extschema@.pay_stats_holds_on_partition(integer),
    @extschema@.pay_stats_holds_of_partitions(),
    @extschema@.pay_stats_holds()
FROM PUBLIC;
REVOKE ALL ON @extschema@.pay_stats, @extschema@.pay_stats_amounts FROM PUBLIC;

DO $$
DECLARE
    noted record;
BEGIN
    FOR noted IN SELECT g.function_name, g.grantee, g.is_grantable FROM pg_temp.pay_proxy_grantees AS g LOOP
        EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO %s%s',
                                  CASE noted.function_name
                   WHEN 'pay_succeed_on_partition' THEN '@extschema@.pay_succeed_on_partition(text, text, bigint, jsonb)'
                   WHEN 'pay_succeed' THEN '@extschema@.pay_succeed(text, text, bigint, jsonb)'
                   WHEN 'pay_fail_on_partition' THEN '@extschema@.pay_fail_on_partition(text, text, bigint)'
                   WHEN 'pay_fail' THEN '@extschema@.pay_fail(text, text, bigint)'
                   WHEN 'pay_stats_of_partitions' THEN '@extschema@.pay_stats_of_partitions()'
                   WHEN 'pay_stats_on_partition' THEN '@extschema@.pay_stats_on_partition(integer)'
                   WHEN 'pay_stats_on_all_partitions' THEN '@extschema@.pay_stats_on_all_partitions()'
                                  END, noted.grantee,
                                  CASE WHEN noted.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END);
    END LOOP;
    FOR noted IN SELECT g.grantee, g.privilege_type, g.is_grantable FROM pg_temp.pay_proxy_view_grantees AS g LOOP
        EXECUTE pg_catalog.format('GRANT %s ON @extschema@.pay_stats TO %s%s', noted.privilege_type, noted.grantee,
                                  CASE WHEN noted.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END);
    END LOOP;
END
$$;
DROP TABLE pg_temp.pay_proxy_grantees, pg_temp.pay_proxy_view_grantees;

-- Least privilege, as on a 1.4 shard: an application pays, an operator
-- repairs (pay_reset, pay_transition) and reconciles.
CREATE OR REPLACE FUNCTION @extschema@.pay_grant(role regrole)
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

CREATE OR REPLACE FUNCTION @extschema@.pay_grant_operator(role regrole)
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

-- The roles 1.3's pay_grant and pay_grant_operator granted get 1.4's: an
-- application's (it could claim) the batches and the card flow, an
-- operator's (it could reconcile) pay_authorization_balance.
DO $$
DECLARE
    grantee record;
BEGIN
    FOR grantee IN
        SELECT DISTINCT a.grantee::pg_catalog.regrole AS role,
               p.oid OPERATOR(pg_catalog.=) '@extschema@.pay_reconcile(regclass, boolean, timestamptz)'::pg_catalog.regprocedure
                   AS operator
        FROM pg_catalog.pg_proc AS p, pg_catalog.aclexplode(p.proacl) AS a
        WHERE p.oid OPERATOR(pg_catalog.=) ANY (ARRAY[
                  '@extschema@.pay_open_claim(text, text, numeric, text)',
                  '@extschema@.pay_reconcile(regclass, boolean, timestamptz)']::pg_catalog.regprocedure[])
          AND a.privilege_type OPERATOR(pg_catalog.=) 'EXECUTE'
          AND a.grantee OPERATOR(pg_catalog.<>) p.proowner
          AND a.grantee OPERATOR(pg_catalog.<>) 0
    LOOP
        IF grantee.operator THEN
            PERFORM @extschema@.pay_grant_operator(grantee.role);
        ELSE
            PERFORM @extschema@.pay_grant(grantee.role);
        END IF;
    END LOOP;
END
$$;

-- Last: the initial privileges (pg_init_privs) back to what the complete
-- script records, the owner's and PUBLIC's alone.  PostgreSQL records the
-- whole ACL of every object an update script creates, replaces or grants
-- among its initial privileges -- the grants of the DBA's roles with it,
-- on the proxy's functions, its schema and the cluster's server -- and
-- pg_dump leaves those out of a dump: a restored proxy would refuse the
-- application what it was granted.  (This also mends what the update from
-- 1.2 to 1.3 recorded.)
DO $$
DECLARE
    entry record;
BEGIN
    FOR entry IN
        SELECT i.classoid, i.objoid, i.objsubid, i.initprivs,
               ARRAY(SELECT k.item
                     FROM pg_catalog.unnest(i.initprivs) WITH ORDINALITY AS k(item, n)
                     WHERE EXISTS (SELECT FROM pg_catalog.aclexplode(ARRAY[k.item]) AS a
                                   WHERE a.grantee OPERATOR(pg_catalog.=) 0
                                      OR a.grantee OPERATOR(pg_catalog.=) a.grantor)
                     ORDER BY k.n) AS kept,
               (SELECT pg_catalog.acldefault('f', p.proowner) FROM pg_catalog.pg_proc AS p
                WHERE i.classoid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
                  AND p.oid OPERATOR(pg_catalog.=) i.objoid) AS function_default
        FROM pg_catalog.pg_init_privs AS i
        WHERE EXISTS (SELECT FROM pg_catalog.pg_depend AS d, pg_catalog.pg_extension AS e
                      WHERE d.classid OPERATOR(pg_catalog.=) i.classoid
                        AND d.objid OPERATOR(pg_catalog.=) i.objoid
                        AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass
                        AND d.refobjid OPERATOR(pg_catalog.=) e.oid
                        AND d.deptype OPERATOR(pg_catalog.=) 'e'
                        AND e.extname OPERATOR(pg_catalog.=) 'idempotent_pay_proxy')
           OR (i.classoid OPERATOR(pg_catalog.=) 'pg_catalog.pg_namespace'::pg_catalog.regclass
               AND i.objoid OPERATOR(pg_catalog.=) '@extschema@'::pg_catalog.regnamespace)
           OR (i.classoid OPERATOR(pg_catalog.=) 'pg_catalog.pg_foreign_server'::pg_catalog.regclass
               AND i.objoid OPERATOR(pg_catalog.=) (SELECT s.oid FROM pg_catalog.pg_foreign_server AS s
                                                    WHERE s.srvname OPERATOR(pg_catalog.=) 'idempotent_pay'))
    LOOP
        CONTINUE WHEN entry.kept OPERATOR(pg_catalog.=) entry.initprivs;
        -- a function's default privileges are what the complete script
        -- leaves where it grants and revokes nothing: no entry
        IF pg_catalog.cardinality(entry.kept) OPERATOR(pg_catalog.=) 0
           OR entry.kept OPERATOR(pg_catalog.=) entry.function_default THEN
            DELETE FROM pg_catalog.pg_init_privs AS i
            WHERE i.classoid OPERATOR(pg_catalog.=) entry.classoid AND i.objoid OPERATOR(pg_catalog.=) entry.objoid
              AND i.objsubid OPERATOR(pg_catalog.=) entry.objsubid;
        ELSE
            UPDATE pg_catalog.pg_init_privs AS i SET initprivs = entry.kept
            WHERE i.classoid OPERATOR(pg_catalog.=) entry.classoid AND i.objoid OPERATOR(pg_catalog.=) entry.objoid
              AND i.objsubid OPERATOR(pg_catalog.=) entry.objsubid;
        END IF;
        DELETE FROM pg_catalog.pg_shdepend AS s
        WHERE s.dbid OPERATOR(pg_catalog.=) (SELECT d.oid FROM pg_catalog.pg_database AS d
                                             WHERE d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database())
          AND s.classid OPERATOR(pg_catalog.=) entry.classoid AND s.objid OPERATOR(pg_catalog.=) entry.objoid
          AND s.objsubid OPERATOR(pg_catalog.=) entry.objsubid
          AND s.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_authid'::pg_catalog.regclass
          AND s.deptype OPERATOR(pg_catalog.=) 'i'
          AND NOT s.refobjid OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT a.grantee FROM pg_catalog.aclexplode(entry.kept) AS a
                                                               UNION ALL
                                                               SELECT a.grantor FROM pg_catalog.aclexplode(entry.kept) AS a));
    END LOOP;
END
$$;
