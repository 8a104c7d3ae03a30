/* idempotent_pay 1.3 -> 1.4: the caller's ordinary mistakes refused */

\echo Use "ALTER EXTENSION idempotent_pay UPDATE TO '1.4'" to load this file. \quit


/* Parameters: a retry keeps its amount, amounts bounded, the attempt of any
   integer type, the reconciler's response ---------------------------------- */

-- Every write of the ledger holds an amount to idempotent_pay.max_amount
-- (22003), besides 1.3's rules (src/trigger_bookkeeping.c).
CREATE OR REPLACE FUNCTION @extschema@.pay_ledger_bookkeeping()
RETURNS trigger
AS 'MODULE_PATHNAME', 'pay_ledger_bookkeeping_1_4'
LANGUAGE C;

-- The claims bind 1.4's entry points: another amount or currency of a known
-- payment is refused by default (idempotent_pay.parameter_change =
-- default), and an amount is at most idempotent_pay.max_amount.
--
-- Keys are what they claim to be.  pay_open, pay_open_claim, pay_claim and
-- pay_begin bind 1.4's entry points: a key the ledger does not have starts
-- a payment only when it is a bizNo, or a key of another system under
-- idempotent_pay.foreign_keys = accept; a key shaped like a bizNo that is
-- none, or one that starts with a prefix this database issues, is 22P02; a
-- biz_id that is a bizNo is 22023.  Same signatures, so CREATE OR REPLACE
-- keeps grants and dependants.
CREATE OR REPLACE FUNCTION @extschema@.pay_open(prefix text, biz_id text, amount numeric, currency text DEFAULT NULL)
RETURNS text
AS 'MODULE_PATHNAME', 'pay_open_1_4'
LANGUAGE C VOLATILE SECURITY DEFINER SET search_path = @extschema@, pg_temp;

-- A claim is durable before it is acted on: pay_claim, pay_open_claim and
-- pay_begin refuse to run inside a transaction block (25001
-- pay_claim_in_transaction) unless idempotent_pay.claim_in_transaction =
-- allow.  1.3's entry points keep claiming there for installations not yet
-- updated.
CREATE OR REPLACE FUNCTION @extschema@.pay_claim(bizno text, amount numeric DEFAULT NULL, currency text DEFAULT NULL)
RETURNS @extschema@.pay_claim
AS 'MODULE_PATHNAME', 'pay_claim_1_4'
LANGUAGE C VOLATILE SECURITY DEFINER;

CREATE OR REPLACE FUNCTION @extschema@.pay_open_claim(prefix text, biz_id text, amount numeric, currency text DEFAULT NULL,
    OUT bizno text, OUT action @extschema@.pay_action, OUT attempt integer, OUT status @extschema@.pay_status,
    OUT channel_ref text, OUT response jsonb)
RETURNS record
AS 'MODULE_PATHNAME', 'pay_open_claim_1_4'
LANGUAGE C VOLATILE SECURITY DEFINER SET search_path = @extschema@, pg_temp;

CREATE OR REPLACE FUNCTION @extschema@.pay_begin(bizno text, amount numeric DEFAULT NULL, currency text DEFAULT NULL)
RETURNS @extschema@.pay_action
AS 'MODULE_PATHNAME', 'pay_begin_1_4'
LANGUAGE C VOLATILE SECURITY DEFINER;

-- pay_succeed and pay_fail take the attempt as a bigint, so that a
-- smallint, an integer and a bigint all resolve to them.  Another argument
-- type makes them new functions: their grantees are noted and granted them
-- again, PUBLIC and the grant option included.
CREATE TEMPORARY TABLE pay_settle_grantees ON COMMIT DROP AS
    SELECT p.proname::pg_catalog.text AS function_name,
           CASE WHEN a.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC'
                ELSE a.grantee::pg_catalog.regrole::pg_catalog.text END AS grantee,
           a.is_grantable
    FROM pg_catalog.pg_proc AS p, pg_catalog.aclexplode(p.proacl) AS a
    WHERE p.oid OPERATOR(pg_catalog.=) ANY (ARRAY['@extschema@.pay_succeed(text, text, integer, jsonb)',
                                                  '@extschema@.pay_fail(text, text, integer)']::pg_catalog.regprocedure[])
      AND a.privilege_type OPERATOR(pg_catalog.=) 'EXECUTE'
      AND a.grantee OPERATOR(pg_catalog.<>) p.proowner;

DROP FUNCTION @extschema@.pay_succeed(text, text, integer, jsonb);
DROP FUNCTION @extschema@.pay_fail(text, text, integer);

CREATE FUNCTION @extschema@.pay_succeed(bizno text, channel_ref text DEFAULT NULL, attempt bigint DEFAULT NULL,
                                        response jsonb DEFAULT NULL)
RETURNS @extschema@.pay_settlement
AS 'MODULE_PATHNAME', 'pay_succeed_1_4'
LANGUAGE C VOLATILE SECURITY DEFINER;

COMMENT ON FUNCTION @extschema@.pay_succeed(text, text, bigint, jsonb) IS
'PROCESSING -> SUCCESS under the attempt pay_claim returned, with the bank''s reference (both required), storing the response every later claim replays; on SUCCESS a no-op, or SECOND_CHARGE when it brings another reference';

CREATE FUNCTION @extschema@.pay_fail(bizno text, reason text DEFAULT NULL, attempt bigint DEFAULT NULL)
RETURNS @extschema@.pay_status
AS 'MODULE_PATHNAME', 'pay_fail_1_4'
LANGUAGE C VOLATILE SECURITY DEFINER;

COMMENT ON FUNCTION @extschema@.pay_fail(text, text, bigint) IS
'PROCESSING -> FAILED under the attempt pay_claim returned (required); a no-op on FAILED';

REVOKE ALL ON FUNCTION @extschema@.pay_succeed(text, text, bigint, jsonb),
    @extschema@.pay_fail(text, text, bigint) FROM PUBLIC;

DO $$
DECLARE
    noted record;
BEGIN
    FOR noted IN SELECT g.function_name, g.grantee, g.is_grantable FROM pg_temp.pay_settle_grantees AS g LOOP
        EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO %s%s',
                                  CASE noted.function_name
                                      WHEN 'pay_succeed' THEN '@extschema@.pay_succeed(text, text, bigint, jsonb)'
                                      ELSE '@extschema@.pay_fail(text, text, bigint)'
                                  END, noted.grantee,
                                  CASE WHEN noted.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END);
    END LOOP;
END
$$;
DROP TABLE pg_temp.pay_settle_grantees;

-- The grants name the new signatures.
CREATE OR REPLACE FUNCTION @extschema@.pay_grant(role regrole)
RETURNS void
AS $$
BEGIN
    IF role IS NULL THEN
        RAISE EXCEPTION 'role must not be null' USING ERRCODE = '22004';
    END IF;
    EXECUTE pg_catalog.format('GRANT USAGE ON SCHEMA @extschema@ TO %s', role);
    EXECUTE pg_catalog.format('GRANT SELECT ON @extschema@.pay_ledger, @extschema@.pay_journal TO %s', role);
    EXECUTE pg_catalog.format(
        'GRANT EXECUTE ON FUNCTION '
        '@extschema@.pay_open(text, text, numeric, text), '
        '@extschema@.pay_claim(text, numeric, text), '
        '@extschema@.pay_open_claim(text, text, numeric, text), '
        '@extschema@.pay_begin(text, numeric, text), '
        '@extschema@.pay_succeed(text, text, bigint, jsonb), '
        '@extschema@.pay_fail(text, text, bigint), '
        '@extschema@.pay_get(text), '
        '@extschema@.pay_find(text, text), '
        '@extschema@.pay_stuck(interval, integer), '
        '@extschema@.pay_refund_open(text, text, numeric, text), '
        '@extschema@.pay_refund_balance(text) '
        'TO %s', role);
    -- the batches
    EXECUTE pg_catalog.format(
        'GRANT EXECUTE ON FUNCTION '
        '@extschema@.pay_open_claim_many(text, text[], numeric[], text), '
        '@extschema@.pay_settle_many(text[], bigint[], @extschema@.pay_status[], text[], text[]) '
        'TO %s', role);
    -- the card flow
    EXECUTE pg_catalog.format(
        'GRANT EXECUTE ON FUNCTION '
        '@extschema@.pay_open_authorization(text, text, numeric, text, interval), '
        '@extschema@.pay_capture_open(text, text, numeric, boolean), '
        '@extschema@.pay_void_open(text, text), '
        '@extschema@.pay_increment_open(text, text, numeric), '
        '@extschema@.pay_authorization_balance(text) '
        'TO %s', role);
END
$$
LANGUAGE plpgsql VOLATILE SET search_path = @extschema@, pg_temp;

COMMENT ON FUNCTION @extschema@.pay_grant(regrole) IS
'Give an application role what paying needs and no more: open, claim, begin, succeed, fail, get, find, stuck, refund_open, refund_balance, open_authorization, capture_open, void_open, increment_open, authorization_balance, open_claim_many, settle_many; SELECT on ledger and journal (the bizNo functions are everyone''s)';

CREATE OR REPLACE FUNCTION @extschema@.pay_grant_operator(role regrole)
RETURNS void
AS $$
BEGIN
    IF role IS NULL THEN
        RAISE EXCEPTION 'role must not be null' USING ERRCODE = '22004';
    END IF;
    EXECUTE pg_catalog.format('GRANT USAGE ON SCHEMA @extschema@ TO %s', role);
    EXECUTE pg_catalog.format(
        'GRANT SELECT ON @extschema@.pay_ledger, @extschema@.pay_journal, @extschema@.pay_stats, '
        '@extschema@.pay_stats_transitions, @extschema@.pay_guards TO %s', role);
    EXECUTE pg_catalog.format(
        'GRANT EXECUTE ON FUNCTION '
        '@extschema@.pay_reset(text, text), '
        '@extschema@.pay_transition(text, @extschema@.pay_status, text), '
        '@extschema@.pay_reconcile(regclass, boolean, timestamptz), '
        '@extschema@.pay_reconcile_rows(jsonb, boolean, timestamptz), '
        '@extschema@.pay_confirm_second_charge(text, text), '
        '@extschema@.pay_second_charges(), '
        '@extschema@.pay_succeed(text, text, bigint, jsonb), '
        '@extschema@.pay_fail(text, text, bigint), '
        '@extschema@.pay_stats_reset(), '
        '@extschema@.pay_stats_refresh(bigint), '
        '@extschema@.pay_stats_read(), '
        '@extschema@.pay_stats_transitions_read(), '
        '@extschema@.pay_verify(), '
        '@extschema@.pay_archive(timestamptz, integer), '
        '@extschema@.pay_archive_verify(), '
        '@extschema@.pay_get(text), '
        '@extschema@.pay_find(text, text), '
        '@extschema@.pay_stuck(interval, integer), '
        '@extschema@.pay_refund_open(text, text, numeric, text), '
        '@extschema@.pay_refund_balance(text) '
        'TO %s', role);
    -- the card flow: what an authorization holds, and the figures of them all
    EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION @extschema@.pay_authorization_balance(text) TO %s', role);
    EXECUTE pg_catalog.format('GRANT SELECT ON @extschema@.pay_stats_amounts TO %s', role);
    EXECUTE pg_catalog.format(
        'GRANT EXECUTE ON FUNCTION @extschema@.pay_stats_amounts_read(), @extschema@.pay_stats_holds() TO %s', role);
END
$$
LANGUAGE plpgsql VOLATILE SET search_path = @extschema@, pg_temp;

COMMENT ON FUNCTION @extschema@.pay_grant_operator(regrole) IS
'Give a finance or operations role what repairing, reconciling, archiving and watching need: pay_reset, pay_transition, pay_reconcile, pay_confirm_second_charge, pay_second_charges, pay_archive, pay_archive_verify, pay_stats, pay_stats_transitions, pay_stats_amounts, pay_stats_holds, pay_stats_refresh, pay_verify, pay_guards, and what reconciling settles and refunds with';

-- A payment the reconciler settles as SUCCESS stores the response a retry
-- replays: the statement's, or the bank's row.
CREATE OR REPLACE FUNCTION @extschema@.pay_reconcile(statement regclass, settle boolean DEFAULT false,
                                          since timestamptz DEFAULT NULL)
RETURNS TABLE (kind text, bizno text, ledger_status @extschema@.pay_status, ledger_amount numeric,
               bank_amount numeric, bank_rows integer, detail text)
AS $$
DECLARE
    found record;
    previous_note text;
    reference text;
    refund_status @extschema@.pay_status;
    second_charges text[];
    unrefunded boolean;
    response_column text := 'NULL::pg_catalog.jsonb';
BEGIN
    IF statement IS NULL OR settle IS NULL THEN
        RAISE EXCEPTION 'statement and settle must not be null' USING ERRCODE = '22004';
    END IF;
    IF EXISTS (SELECT FROM pg_catalog.pg_attribute AS a
               WHERE a.attrelid OPERATOR(pg_catalog.=) statement
                 AND a.attname OPERATOR(pg_catalog.=) 'response'
                 AND a.attnum OPERATOR(pg_catalog.>) 0 AND NOT a.attisdropped) THEN
        response_column := 's.response::pg_catalog.jsonb';
    END IF;

    FOR found IN EXECUTE pg_catalog.format($query$
        WITH bank AS MATERIALIZED (
            SELECT pg_catalog.split_part(s.bizno::pg_catalog.text, '/', 1) AS bizno,
                   pg_catalog.count(*)::integer AS bank_rows,
                   pg_catalog.count(*) FILTER (WHERE s.status OPERATOR(pg_catalog.=) 'SUCCESS') AS successes,
                   pg_catalog.count(*) FILTER (WHERE s.status OPERATOR(pg_catalog.=) 'FAILED') AS failures,
                   pg_catalog.sum(s.amount) FILTER (WHERE s.status OPERATOR(pg_catalog.=) 'SUCCESS') AS charged,
                   pg_catalog.min(s.amount) FILTER (WHERE s.status OPERATOR(pg_catalog.=) 'SUCCESS') AS least_amount,
                   pg_catalog.max(s.amount) FILTER (WHERE s.status OPERATOR(pg_catalog.=) 'SUCCESS') AS greatest_amount,
                   pg_catalog.min(s.currency) FILTER (WHERE s.status OPERATOR(pg_catalog.=) 'SUCCESS') AS least_currency,
                   pg_catalog.max(s.currency) FILTER (WHERE s.status OPERATOR(pg_catalog.=) 'SUCCESS') AS greatest_currency,
                   pg_catalog.min(s.channel_ref) FILTER (WHERE s.status OPERATOR(pg_catalog.=) 'SUCCESS') AS channel_ref,
                   pg_catalog.array_agg(DISTINCT s.channel_ref::pg_catalog.text) FILTER (
                       WHERE s.status OPERATOR(pg_catalog.=) 'SUCCESS' AND s.channel_ref IS NOT NULL) AS channel_refs,
                   pg_catalog.max(a.attempt) FILTER (WHERE s.status OPERATOR(pg_catalog.=) 'SUCCESS') AS success_attempt,
                   pg_catalog.max(a.attempt) FILTER (WHERE s.status OPERATOR(pg_catalog.=) 'FAILED') AS failure_attempt,
                   -- the response of the success whose reference is settled (the least)
                   (pg_catalog.array_agg(COALESCE(%s, pg_catalog.jsonb_build_object(
                        'bizno', s.bizno, 'amount', s.amount, 'currency', s.currency,
                        'status', s.status, 'channel_ref', s.channel_ref))
                        ORDER BY s.channel_ref NULLS LAST) FILTER (
                        WHERE s.status OPERATOR(pg_catalog.=) 'SUCCESS'))[1] AS bank_response
            FROM %s AS s,
                 LATERAL (SELECT CASE WHEN pg_catalog.split_part(s.bizno::pg_catalog.text, '/', 2)
                                           OPERATOR(pg_catalog.~) '^[0-9]{1,9}$'
                                      THEN pg_catalog.split_part(s.bizno::pg_catalog.text, '/', 2)::pg_catalog.int4
                                 END AS attempt) AS a
            GROUP BY 1
        ), joined AS MATERIALIZED (
            SELECT COALESCE(l.bizno, b.bizno) AS bizno, l.status, l.amount, l.currency, l.updated_at,
                   COALESCE(b.bank_rows, 0) AS bank_rows, COALESCE(b.successes, 0) AS successes,
                   COALESCE(b.failures, 0) AS failures, b.charged, b.least_amount, b.greatest_amount,
                   b.least_currency, b.greatest_currency, b.channel_ref, b.channel_refs,
                   l.channel_ref AS ledger_channel_ref, l.parent, l.attempt AS ledger_attempt,
                   b.success_attempt, b.failure_attempt, b.bank_response, l.kind AS step_kind
            FROM @extschema@.pay_ledger AS l
            FULL JOIN bank AS b ON b.bizno OPERATOR(pg_catalog.=) l.bizno
        )
        SELECT 'MISSING_IN_BANK' AS kind, j.*, 'the ledger says SUCCESS, the bank has no successful charge' AS detail
        FROM joined AS j
        WHERE j.status OPERATOR(pg_catalog.=) 'SUCCESS' AND j.successes OPERATOR(pg_catalog.=) 0
          AND ($1 IS NULL OR j.updated_at OPERATOR(pg_catalog.>=) $1)
        UNION ALL
        SELECT 'MISSING_IN_LEDGER', j.*,
               CASE WHEN j.status IS NULL THEN 'the bank charged, the ledger has no such payment'
                    ELSE 'the bank charged, the ledger says ' OPERATOR(pg_catalog.||) j.status END
        FROM joined AS j
        WHERE j.successes OPERATOR(pg_catalog.>) 0
          AND (j.status IS NULL OR j.status OPERATOR(pg_catalog.=) 'INIT')
        UNION ALL
        SELECT 'DUPLICATE_CHARGE', j.*, pg_catalog.format('the bank charged %%s times', j.successes)
        FROM joined AS j
        WHERE j.successes OPERATOR(pg_catalog.>) 1
        UNION ALL
        SELECT 'AMOUNT_MISMATCH', j.*,
               pg_catalog.format('the ledger says %%s, the bank charged %%s', j.amount, j.least_amount)
        FROM joined AS j
        WHERE j.status OPERATOR(pg_catalog.=) 'SUCCESS' AND j.successes OPERATOR(pg_catalog.>) 0
          AND (j.least_amount OPERATOR(pg_catalog.<>) j.amount OR j.greatest_amount OPERATOR(pg_catalog.<>) j.amount)
        UNION ALL
        SELECT 'CURRENCY_MISMATCH', j.*,
               pg_catalog.format('the ledger says %%s, the bank charged in %%s', j.currency, j.least_currency)
        FROM joined AS j
        WHERE j.status OPERATOR(pg_catalog.=) 'SUCCESS' AND j.successes OPERATOR(pg_catalog.>) 0
          AND j.currency IS NOT NULL
          AND (j.least_currency OPERATOR(pg_catalog.<>) j.currency OR j.greatest_currency OPERATOR(pg_catalog.<>) j.currency)
        UNION ALL
        SELECT 'STATUS_MISMATCH', j.*, 'the ledger says FAILED, the bank charged'
        FROM joined AS j
        WHERE j.status OPERATOR(pg_catalog.=) 'FAILED' AND j.successes OPERATOR(pg_catalog.>) 0
        UNION ALL
        SELECT 'UNRESOLVED_PROCESSING', j.*,
               CASE WHEN j.successes OPERATOR(pg_catalog.>) 0 THEN 'the bank reports SUCCESS'
                    ELSE 'the bank reports FAILED' END
        FROM joined AS j
        WHERE j.status OPERATOR(pg_catalog.=) 'PROCESSING'
          AND (j.successes OPERATOR(pg_catalog.>) 0 OR j.failures OPERATOR(pg_catalog.>) 0)
        ORDER BY 1, 2
    $query$, response_column, statement) USING since
    LOOP
        kind := found.kind;
        bizno := found.bizno;
        ledger_status := found.status;
        ledger_amount := found.amount;
        bank_amount := found.charged;
        bank_rows := found.bank_rows;
        detail := found.detail;

        IF settle AND found.kind OPERATOR(pg_catalog.=) 'UNRESOLVED_PROCESSING' THEN
            -- NULL until the library is loaded (by the first settling below)
            previous_note := pg_catalog.current_setting('idempotent_pay.journal_note', true);
            PERFORM pg_catalog.set_config('idempotent_pay.journal_note', 'settled by reconciliation', true);
            BEGIN
                -- under the attempt the bank's reference names, else the current one
                IF found.successes OPERATOR(pg_catalog.>) 0 THEN
                    PERFORM @extschema@.pay_succeed(found.bizno, found.channel_ref,
                        COALESCE(found.success_attempt, found.ledger_attempt), found.bank_response);
                    ledger_status := 'SUCCESS';
                ELSE
                    ledger_status := @extschema@.pay_fail(found.bizno,
                        'settled by reconciliation: the bank reports FAILED',
                        COALESCE(found.failure_attempt, found.ledger_attempt));
                END IF;
                detail := detail OPERATOR(pg_catalog.||) ': settled as ' OPERATOR(pg_catalog.||) ledger_status;
            EXCEPTION WHEN OTHERS THEN
                detail := detail OPERATOR(pg_catalog.||) ': not settled, ' OPERATOR(pg_catalog.||) SQLERRM;
            END;
            PERFORM pg_catalog.set_config('idempotent_pay.journal_note', previous_note, true);
        END IF;

        -- A duplicate charge: each charge under another reference than the
        -- ledger's is listed with its refund; settling journals it once as
        -- a second charge confirmed by the statement, which the refund limit
        -- then counts as captured.  The
        -- refund is keyed by that reference.
        IF found.kind OPERATOR(pg_catalog.=) 'DUPLICATE_CHARGE'
           AND found.status OPERATOR(pg_catalog.=) 'SUCCESS' THEN
            IF found.ledger_channel_ref IS NULL THEN
                detail := detail OPERATOR(pg_catalog.||)
                    ': the ledger has no channel_ref to tell the first charge from the others';
            ELSE
                second_charges := '{}';
                unrefunded := false;
                BEGIN
                    FOREACH reference IN ARRAY found.channel_refs LOOP
                        CONTINUE WHEN reference OPERATOR(pg_catalog.=) found.ledger_channel_ref;
                        IF settle THEN
                            PERFORM @extschema@.pay_confirm_second_charge(found.bizno, reference);
                        END IF;
                        refund_status := (SELECT r.status FROM @extschema@.pay_ledger AS r
                                          WHERE r.parent OPERATOR(pg_catalog.=) found.bizno
                                            AND r.refund_key OPERATOR(pg_catalog.=) reference);
                        unrefunded := unrefunded OR refund_status IS DISTINCT FROM 'SUCCESS';
                        second_charges := second_charges OPERATOR(pg_catalog.||) pg_catalog.format('%s (%s)',
                            reference, COALESCE('refund ' OPERATOR(pg_catalog.||) refund_status, 'not refunded'));
                    END LOOP;
                    detail := pg_catalog.format('%s: %s %s', detail,
                        CASE WHEN settle THEN 'second charges journaled:' ELSE 'second charges:' END,
                        pg_catalog.array_to_string(second_charges, ', '));
                    IF unrefunded THEN
                        detail := pg_catalog.format('%s; refund each with pay_refund_open(%L, <its reference>, %s)',
                                                    detail, found.bizno, found.amount);
                    END IF;
                EXCEPTION WHEN OTHERS THEN
                    detail := detail OPERATOR(pg_catalog.||) ': not settled, ' OPERATOR(pg_catalog.||) SQLERRM;
                END;
            END IF;
        END IF;

        IF found.parent IS NOT NULL THEN
            detail := pg_catalog.format('%s of %s: %s',
                                        COALESCE(pg_catalog.lower(pg_catalog.replace(found.step_kind, '_', ' ')), 'refund'),
                                        found.parent, detail);
        END IF;
        RETURN NEXT;
    END LOOP;

    -- Captures the bank settled after their authorization closed (a void or
    -- a final capture claimed before their SUCCESS, or the hold expired):
    -- reserved at their claim and counted, listed for the merchant to see.
    RETURN QUERY
    SELECT 'LATE_CAPTURE'::pg_catalog.text, c.bizno, c.status, c.amount::pg_catalog.numeric,
           NULL::pg_catalog.numeric, 0,
           pg_catalog.format('capture of %s settled after its authorization closed: %s', c.parent, closed.why)
    FROM @extschema@.pay_ledger AS c
    JOIN @extschema@.pay_ledger AS a ON a.bizno OPERATOR(pg_catalog.=) c.parent
    JOIN @extschema@.pay_journal AS js ON js.bizno OPERATOR(pg_catalog.=) c.bizno
         AND js.to_status OPERATOR(pg_catalog.=) 'SUCCESS'::@extschema@.pay_status
    CROSS JOIN LATERAL (
        SELECT 'expired'::pg_catalog.text AS why WHERE js.at OPERATOR(pg_catalog.>) a.expires_at
        UNION ALL
        SELECT pg_catalog.lower(v.kind) OPERATOR(pg_catalog.||) ' ' OPERATOR(pg_catalog.||) v.bizno
        FROM @extschema@.pay_ledger AS v
        WHERE v.parent OPERATOR(pg_catalog.=) c.parent AND NOT v.bizno OPERATOR(pg_catalog.=) c.bizno
          AND v.kind OPERATOR(pg_catalog.=) ANY ('{VOID,FINAL_CAPTURE}')
          AND v.status OPERATOR(pg_catalog.=) ANY ('{PROCESSING,SUCCESS}'::@extschema@.pay_status[])
          AND js.seq OPERATOR(pg_catalog.>) (SELECT pg_catalog.max(vj.seq) FROM @extschema@.pay_journal AS vj
                                             WHERE vj.bizno OPERATOR(pg_catalog.=) v.bizno
                                               AND vj.to_status OPERATOR(pg_catalog.=) 'PROCESSING'::@extschema@.pay_status)
        LIMIT 1) AS closed
    WHERE c.kind OPERATOR(pg_catalog.=) ANY ('{CAPTURE,FINAL_CAPTURE}')
      AND c.status OPERATOR(pg_catalog.=) 'SUCCESS'::@extschema@.pay_status
      AND (since IS NULL OR c.updated_at OPERATOR(pg_catalog.>=) since);
END
$$
LANGUAGE plpgsql VOLATILE SET search_path = @extschema@, pg_temp;

COMMENT ON FUNCTION @extschema@.pay_reconcile(regclass, boolean, timestamptz) IS
'Compare the ledger with a bank statement (bizno, amount, currency, status, channel_ref, optionally response), refunds included; settle => true settles PROCESSING payments and refunds the bank has answered, storing the response a retry replays, and journals the second charges of a DUPLICATE_CHARGE';

CREATE OR REPLACE FUNCTION @extschema@.pay_reconcile_rows(statement jsonb, settle boolean DEFAULT false,
                                               since timestamptz DEFAULT NULL)
RETURNS TABLE (kind text, bizno text, ledger_status @extschema@.pay_status, ledger_amount numeric,
               bank_amount numeric, bank_rows integer, detail text)
AS $$
BEGIN
    IF statement IS NULL OR settle IS NULL THEN
        RAISE EXCEPTION 'statement and settle must not be null' USING ERRCODE = '22004';
    END IF;
    IF pg_catalog.jsonb_typeof(statement) OPERATOR(pg_catalog.<>) 'array' THEN
        RAISE EXCEPTION 'a statement is a JSON array of rows, not a JSON %', pg_catalog.jsonb_typeof(statement)
            USING ERRCODE = '22023',
                  HINT = 'Pass [{"bizno": ..., "amount": ..., "currency": ..., "status": ..., "channel_ref": ...}, ...].';
    END IF;
    -- a second call in one transaction finds the first one's table
    IF pg_catalog.to_regclass('pg_temp.pay_statement_rows') IS NOT NULL THEN
        DROP TABLE pg_temp.pay_statement_rows;
    END IF;
    CREATE TEMPORARY TABLE pay_statement_rows ON COMMIT DROP AS
        SELECT s.bizno, s.amount, s.currency, s.status, s.channel_ref, s.response
        FROM pg_catalog.jsonb_to_recordset(statement)
             AS s(bizno text, amount numeric, currency text, status text, channel_ref text, response jsonb);
    -- looked up when run: the table is new on every call
    RETURN QUERY SELECT * FROM @extschema@.pay_reconcile(
        pg_catalog.to_regclass('pg_temp.pay_statement_rows'), settle, since);
    DROP TABLE pg_temp.pay_statement_rows;
END
$$
LANGUAGE plpgsql VOLATILE SET search_path = @extschema@, pg_temp;

COMMENT ON FUNCTION @extschema@.pay_reconcile_rows(jsonb, boolean, timestamptz) IS
'pay_reconcile of a statement given as a JSON array of rows (bizno, amount, currency, status, channel_ref, optionally response): what idempotent_pay_proxy sends each partition';


-- pay_protect quotes a row's status as the C code quotes input: at most 128
-- characters.
CREATE OR REPLACE FUNCTION @extschema@.pay_protect(tbl regclass, status_column name DEFAULT 'status',
                                        frozen_columns name[] DEFAULT '{}')
RETURNS void
AS $$
DECLARE
    status_type regtype;
    column_name name;
    offending text;
    offending_found boolean;
BEGIN
    IF tbl IS NULL OR status_column IS NULL OR frozen_columns IS NULL THEN
        RAISE EXCEPTION 'tbl, status_column and frozen_columns must not be null' USING ERRCODE = '22004';
    END IF;
    IF (SELECT c.relkind FROM pg_catalog.pg_class AS c WHERE c.oid OPERATOR(pg_catalog.=) tbl)
       OPERATOR(pg_catalog.<>) ALL (ARRAY['r', 'p']::"char"[]) THEN
        RAISE EXCEPTION '% is not a table', tbl USING ERRCODE = '42809';
    END IF;

    -- No row may change between the check of its label and the guard.
    EXECUTE pg_catalog.format('LOCK TABLE %s IN SHARE ROW EXCLUSIVE MODE', tbl);

    FOREACH column_name IN ARRAY pg_catalog.array_prepend(status_column, frozen_columns) LOOP
        IF NOT EXISTS (SELECT FROM pg_catalog.pg_attribute AS a
                       WHERE a.attrelid OPERATOR(pg_catalog.=) tbl
                         AND a.attname OPERATOR(pg_catalog.=) column_name
                         AND a.attnum OPERATOR(pg_catalog.>) 0 AND NOT a.attisdropped) THEN
            RAISE EXCEPTION 'column "%" of relation % does not exist', column_name, tbl
                USING ERRCODE = '42703';
        END IF;
    END LOOP;

    SELECT a.atttypid::regtype INTO status_type
    FROM pg_catalog.pg_attribute AS a
    WHERE a.attrelid OPERATOR(pg_catalog.=) tbl AND a.attname OPERATOR(pg_catalog.=) status_column;
    IF status_type OPERATOR(pg_catalog.<>) ALL (ARRAY['@extschema@.pay_status', 'pg_catalog.text',
                                                      'pg_catalog.varchar']::regtype[]) THEN
        RAISE EXCEPTION 'status column "%" of relation % is of type %', status_column, tbl, status_type
            USING ERRCODE = '42804',
                  HINT = 'A guarded status column is of type pay_status, text or varchar.';
    END IF;

    EXECUTE pg_catalog.format(
        'SELECT %1$I::pg_catalog.text, true FROM %2$s '
        'WHERE %1$I IS NULL OR %1$I::pg_catalog.text OPERATOR(pg_catalog.<>) ALL '
        '(ARRAY[''INIT'', ''PROCESSING'', ''SUCCESS'', ''FAILED'']) LIMIT 1',
        status_column, tbl)
    INTO offending, offending_found;
    IF offending_found THEN
        -- quoted as the C code quotes input: at most 128 characters
        RAISE EXCEPTION 'invalid payment status % in column "%" of relation %',
            coalesce(pg_catalog.quote_literal(pg_catalog.left(offending, 128))
                     OPERATOR(pg_catalog.||) CASE WHEN pg_catalog.length(offending) OPERATOR(pg_catalog.>) 128
                                                  THEN pg_catalog.format('... (%s bytes)', pg_catalog.octet_length(offending))
                                                  ELSE '' END,
                     'NULL'), status_column, tbl
            USING ERRCODE = '22P02',
                  HINT = 'A payment status is INIT, PROCESSING, SUCCESS or FAILED; fix the rows, then protect the table.';
    END IF;

    -- Protecting again replaces the guard, e.g. with other frozen columns.
    PERFORM @extschema@.pay_unprotect(tbl);
    EXECUTE pg_catalog.format(
        'CREATE TRIGGER pay_guard BEFORE INSERT OR UPDATE OR DELETE ON %s '
        'FOR EACH ROW EXECUTE FUNCTION @extschema@.pay_guard(%s)',
        tbl, (SELECT pg_catalog.string_agg(pg_catalog.quote_literal(c), ', ')
              FROM pg_catalog.unnest(pg_catalog.array_prepend(status_column, frozen_columns)) AS c));
    EXECUTE pg_catalog.format(
        'CREATE TRIGGER pay_guard_truncate BEFORE TRUNCATE ON %s '
        'FOR EACH STATEMENT EXECUTE FUNCTION @extschema@.pay_guard(%L)', tbl, status_column);
    EXECUTE pg_catalog.format('ALTER TABLE %s ENABLE ALWAYS TRIGGER pay_guard', tbl);
    EXECUTE pg_catalog.format('ALTER TABLE %s ENABLE ALWAYS TRIGGER pay_guard_truncate', tbl);

    IF NOT (SELECT r.rolsuper FROM pg_catalog.pg_class AS c
            JOIN pg_catalog.pg_roles AS r ON r.oid OPERATOR(pg_catalog.=) c.relowner
            WHERE c.oid OPERATOR(pg_catalog.=) tbl) THEN
        RAISE WARNING 'the owner of % can disable its guard', tbl
            USING DETAIL = 'A table owner may ALTER TABLE ... DISABLE TRIGGER.',
                  HINT = 'Let a role the application does not use own the table.';
    END IF;
END
$$
LANGUAGE plpgsql VOLATILE SET search_path = @extschema@, pg_temp;

COMMENT ON FUNCTION @extschema@.pay_protect(regclass, name, name[]) IS
'Guard an existing table with the payment state machine: transitions, frozen columns, protected rows';


-- pay_get and pay_find: no row reads as "not paid" (src/api_lookup.c).
-- 1.3's read the ledger alone, and gave no row for an archived payment and
-- for a mistyped bizNo; these answer from the archive when the ledger has
-- no row, 55000 pay_archived once the month is dropped, 22P02 for a bizNo
-- whose check character fails.  CREATE OR REPLACE keeps their grants.
CREATE OR REPLACE FUNCTION @extschema@.pay_get(bizno text)
RETURNS SETOF @extschema@.pay_ledger
AS 'MODULE_PATHNAME', 'pay_get_1_4'
LANGUAGE C STABLE STRICT SECURITY DEFINER ROWS 1 SET search_path = @extschema@, pg_temp;

COMMENT ON FUNCTION @extschema@.pay_get(text) IS
'The row of a bizNo: the ledger''s, else the archive''s (55000 pay_archived once its month is dropped); 22P02 for a mistyped bizNo; no row when unknown';

CREATE OR REPLACE FUNCTION @extschema@.pay_find(prefix text, biz_id text)
RETURNS SETOF @extschema@.pay_ledger
AS 'MODULE_PATHNAME', 'pay_find_1_4'
LANGUAGE C STABLE STRICT SECURITY DEFINER ROWS 1 SET search_path = @extschema@, pg_temp;

COMMENT ON FUNCTION @extschema@.pay_find(text, text) IS
'The row of business action (prefix, biz_id): the ledger''s, else the archive''s (55000 pay_archived once its month is dropped); no row when it has none. Creates nothing';

/* The seams of the record: a success's answer journaled, the journal and
 * the maintenance log written by the extension alone, the archive's
 * partitions not emptied by TRUNCATE ------------------------------------- */

-- The entry into SUCCESS names the answer it settled with: its reference
-- (channel_ref, until now a second charge's alone) and a digest of its
-- response.  Entries journaled before this update name neither, and
-- pay_verify compares none of them.
ALTER TABLE @extschema@.pay_journal ADD COLUMN response_digest bigint;

COMMENT ON COLUMN @extschema@.pay_journal.channel_ref IS
'The bank''s reference: on the entry into SUCCESS the success''s (since 1.4), on a second charge''s row the second charge''s';
COMMENT ON COLUMN @extschema@.pay_journal.response_digest IS
'On the entry into SUCCESS (since 1.4): jsonb_hash_extended(response, 0) of the response it settled with, NULL for none; pay_verify compares the ledger''s';

-- The journal's and the maintenance log's guards fire on INSERT too, and
-- let pass only the rows the extension's own code writes, a logical
-- replica's apply and a restore.
CREATE OR REPLACE TRIGGER pay_journal_guard
    BEFORE INSERT OR UPDATE OR DELETE ON @extschema@.pay_journal
    FOR EACH ROW EXECUTE FUNCTION @extschema@.pay_guard();
ALTER TABLE @extschema@.pay_journal ENABLE ALWAYS TRIGGER pay_journal_guard;
CREATE OR REPLACE TRIGGER pay_maintenance_log_guard
    BEFORE INSERT OR UPDATE OR DELETE ON @extschema@.pay_maintenance_log
    FOR EACH ROW EXECUTE FUNCTION @extschema@.pay_guard();
ALTER TABLE @extschema@.pay_maintenance_log ENABLE ALWAYS TRIGGER pay_maintenance_log_guard;

-- A partition does not inherit its partitioned table's TRUNCATE trigger:
-- every partition of the archive (the default ones and the months
-- pay_archive made) gets one of its own, of the partitioned table's name,
-- and pay_archive_partitions gives it to each month it makes from now on.
DO $$
DECLARE
    part record;
BEGIN
    FOR part IN
        SELECT i.inhrelid::pg_catalog.regclass AS partition,
               pg_catalog.format('%s_guard_truncate', c.relname) AS guard
        FROM pg_catalog.pg_inherits AS i
        JOIN pg_catalog.pg_class AS c ON c.oid OPERATOR(pg_catalog.=) i.inhparent
        WHERE i.inhparent OPERATOR(pg_catalog.=) ANY
              (ARRAY['@extschema@.pay_ledger_archive', '@extschema@.pay_journal_archive']::pg_catalog.regclass[])
        ORDER BY 1
    LOOP
        EXECUTE pg_catalog.format('CREATE TRIGGER %I BEFORE TRUNCATE ON %s '
                                  'FOR EACH STATEMENT EXECUTE FUNCTION @extschema@.pay_guard()',
                                  part.guard, part.partition);
        EXECUTE pg_catalog.format('ALTER TABLE %s ENABLE ALWAYS TRIGGER %I', part.partition, part.guard);
    END LOOP;
END
$$;

CREATE OR REPLACE FUNCTION @extschema@.pay_archive_partitions(month date)
RETURNS void
AS $$
DECLARE
    suffix text := pg_catalog.to_char(month, 'YYYY_MM');
    ledger_part text := 'pay_ledger_archive_' OPERATOR(pg_catalog.||) suffix;
    journal_part text := 'pay_journal_archive_' OPERATOR(pg_catalog.||) suffix;
    bounds text := pg_catalog.format('FOR VALUES FROM (%L) TO (%L)', month,
                                     month OPERATOR(pg_catalog.+) '1 month'::interval);
BEGIN
    -- A month a logical replica received before it was taken into service
    -- is in the default partitions, which keep it: a partition of its own
    -- cannot be created over rows the default one holds.
    IF EXISTS (SELECT FROM @extschema@.pay_ledger_archive_default AS d
               WHERE d.month OPERATOR(pg_catalog.=) pay_archive_partitions.month)
       OR EXISTS (SELECT FROM @extschema@.pay_journal_archive_default AS d
                  WHERE d.month OPERATOR(pg_catalog.=) pay_archive_partitions.month) THEN
        RETURN;
    END IF;
    -- a month holds a payment once, and a journal row once; pay_open's late
    -- retry finds an archived business action through the second index;
    -- TRUNCATE is refused, as on the partitioned table, whose trigger a
    -- partition does not inherit
    IF pg_catalog.to_regclass('@extschema@.' OPERATOR(pg_catalog.||) pg_catalog.quote_ident(ledger_part)) IS NULL THEN
        EXECUTE pg_catalog.format('CREATE TABLE @extschema@.%I PARTITION OF @extschema@.pay_ledger_archive %s',
                                  ledger_part, bounds);
        EXECUTE pg_catalog.format('ALTER TABLE @extschema@.%I ADD PRIMARY KEY (bizno)', ledger_part);
        EXECUTE pg_catalog.format('CREATE INDEX ON @extschema@.%I (prefix, biz_id) WHERE biz_id IS NOT NULL',
                                  ledger_part);
        EXECUTE pg_catalog.format('REVOKE ALL ON @extschema@.%I FROM PUBLIC', ledger_part);
        EXECUTE pg_catalog.format('CREATE TRIGGER pay_ledger_archive_guard_truncate BEFORE TRUNCATE ON @extschema@.%I '
                                  'FOR EACH STATEMENT EXECUTE FUNCTION @extschema@.pay_guard()', ledger_part);
        EXECUTE pg_catalog.format('ALTER TABLE @extschema@.%I ENABLE ALWAYS TRIGGER pay_ledger_archive_guard_truncate',
                                  ledger_part);
    END IF;
    IF pg_catalog.to_regclass('@extschema@.' OPERATOR(pg_catalog.||) pg_catalog.quote_ident(journal_part)) IS NULL THEN
        EXECUTE pg_catalog.format('CREATE TABLE @extschema@.%I PARTITION OF @extschema@.pay_journal_archive %s',
                                  journal_part, bounds);
        EXECUTE pg_catalog.format('ALTER TABLE @extschema@.%I ADD PRIMARY KEY (seq)', journal_part);
        EXECUTE pg_catalog.format('CREATE INDEX ON @extschema@.%I (bizno, seq)', journal_part);
        EXECUTE pg_catalog.format('REVOKE ALL ON @extschema@.%I FROM PUBLIC', journal_part);
        EXECUTE pg_catalog.format('CREATE TRIGGER pay_journal_archive_guard_truncate BEFORE TRUNCATE ON @extschema@.%I '
                                  'FOR EACH STATEMENT EXECUTE FUNCTION @extschema@.pay_guard()', journal_part);
        EXECUTE pg_catalog.format('ALTER TABLE @extschema@.%I ENABLE ALWAYS TRIGGER pay_journal_archive_guard_truncate',
                                  journal_part);
    END IF;
END
$$
LANGUAGE plpgsql VOLATILE SET search_path = @extschema@, pg_temp;

COMMENT ON FUNCTION @extschema@.pay_archive_partitions(date) IS
'Create the partitions of the archive for a month, pay_ledger_archive_YYYY_MM and pay_journal_archive_YYYY_MM (pay_archive)';

-- pay_verify holds a success to the answer journaled with it, and reports a
-- partition of the archive without its TRUNCATE guard.
CREATE OR REPLACE FUNCTION @extschema@.pay_verify()
RETURNS TABLE (bizno text, problem text)
AS $$
    WITH entries AS (
        SELECT j.bizno, j.seq, j.from_status, j.to_status, j.channel_ref, j.response_digest,
               pg_catalog.lag(j.to_status) OVER w AS previous_status,
               pg_catalog.count(*) FILTER (WHERE j.from_status IS NULL) OVER w AS life
        FROM @extschema@.pay_journal AS j
        WINDOW w AS (PARTITION BY j.bizno ORDER BY j.seq)
    ), latest_life AS (
        SELECT DISTINCT ON (e.bizno) e.bizno, e.life, e.to_status
        FROM entries AS e
        ORDER BY e.bizno, e.seq DESC
    ), summary AS (
        SELECT ll.bizno, ll.to_status AS last_status,
               pg_catalog.count(*) FILTER (
                   WHERE e.to_status OPERATOR(pg_catalog.=) 'PROCESSING'::@extschema@.pay_status
                     AND e.from_status IS DISTINCT FROM e.to_status) AS entries_into_processing
        FROM latest_life AS ll
        JOIN entries AS e ON e.bizno OPERATOR(pg_catalog.=) ll.bizno
                         AND e.life OPERATOR(pg_catalog.=) ll.life
        GROUP BY ll.bizno, ll.to_status
    ), settled AS (
        -- the latest life's entry into SUCCESS, with the answer it settled
        -- with; an entry journaled before 1.4 names none (channel_ref NULL)
        SELECT DISTINCT ON (e.bizno) e.bizno, e.seq, e.channel_ref, e.response_digest
        FROM entries AS e
        JOIN latest_life AS ll ON ll.bizno OPERATOR(pg_catalog.=) e.bizno
                              AND ll.life OPERATOR(pg_catalog.=) e.life
        WHERE e.to_status OPERATOR(pg_catalog.=) 'SUCCESS'::@extschema@.pay_status
          AND e.from_status IS DISTINCT FROM e.to_status
          AND e.channel_ref IS NOT NULL
        ORDER BY e.bizno, e.seq DESC
    )
    SELECT l.bizno, 'the journal has no entry for this payment'
    FROM @extschema@.pay_ledger AS l
    LEFT JOIN summary AS s ON s.bizno OPERATOR(pg_catalog.=) l.bizno
    WHERE s.bizno IS NULL
    UNION ALL
    SELECT l.bizno, pg_catalog.format('the ledger says %s, the latest journal entry says %s',
                                      l.status, s.last_status)
    FROM @extschema@.pay_ledger AS l
    JOIN summary AS s ON s.bizno OPERATOR(pg_catalog.=) l.bizno
    WHERE l.status OPERATOR(pg_catalog.<>) s.last_status
    UNION ALL
    SELECT l.bizno, pg_catalog.format('attempt is %s, the journal shows %s entries into PROCESSING',
                                      l.attempt, s.entries_into_processing)
    FROM @extschema@.pay_ledger AS l
    JOIN summary AS s ON s.bizno OPERATOR(pg_catalog.=) l.bizno
    WHERE l.attempt OPERATOR(pg_catalog.<>) s.entries_into_processing
    UNION ALL
    -- a success keeps the answer it was settled with: changed behind the
    -- guard's back (switched off in maintenance), it differs from the journal
    SELECT l.bizno, pg_catalog.format('channel_ref is %s, journal entry %s into SUCCESS says %s',
                                      COALESCE(l.channel_ref, 'NULL'), s.seq, s.channel_ref)
    FROM @extschema@.pay_ledger AS l
    JOIN settled AS s ON s.bizno OPERATOR(pg_catalog.=) l.bizno
    WHERE l.status OPERATOR(pg_catalog.=) 'SUCCESS'::@extschema@.pay_status
      AND l.channel_ref IS DISTINCT FROM s.channel_ref
    UNION ALL
    SELECT l.bizno, pg_catalog.format('the response is not the one journal entry %s into SUCCESS settled with',
                                      s.seq)
    FROM @extschema@.pay_ledger AS l
    JOIN settled AS s ON s.bizno OPERATOR(pg_catalog.=) l.bizno
    WHERE l.status OPERATOR(pg_catalog.=) 'SUCCESS'::@extschema@.pay_status
      AND pg_catalog.jsonb_hash_extended(l.response, 0) IS DISTINCT FROM s.response_digest
    UNION ALL
    SELECT e.bizno, pg_catalog.format('journal entry %s goes from %s, but the entry before it ended in %s',
                                      e.seq, e.from_status, e.previous_status)
    FROM entries AS e
    WHERE e.from_status IS NOT NULL
      AND e.from_status IS DISTINCT FROM e.previous_status
    UNION ALL
    SELECT ll.bizno, pg_catalog.format('the journal says %s, but the ledger has no such payment',
                                       ll.to_status)
    FROM latest_life AS ll
    LEFT JOIN @extschema@.pay_ledger AS l ON l.bizno OPERATOR(pg_catalog.=) ll.bizno
    WHERE l.bizno IS NULL
      AND ll.to_status OPERATOR(pg_catalog.=) ANY
          (ARRAY['PROCESSING', 'SUCCESS']::@extschema@.pay_status[])
    UNION ALL
    SELECT r.bizno,
           CASE WHEN p.bizno IS NULL THEN
                    pg_catalog.format('a refund of %s, which the ledger does not have', r.parent)
                WHEN p.parent IS NOT NULL THEN
                    pg_catalog.format('a refund of %s, which is itself a refund', r.parent)
                WHEN p.status OPERATOR(pg_catalog.<>) 'SUCCESS' THEN
                    pg_catalog.format('a refund of %s, which is %s', r.parent, p.status)
                ELSE pg_catalog.format('a refund in %s of %s, which is in %s', r.currency, r.parent, p.currency)
           END
    FROM @extschema@.pay_ledger AS r
    LEFT JOIN @extschema@.pay_ledger AS p ON p.bizno OPERATOR(pg_catalog.=) r.parent
    WHERE r.parent IS NOT NULL
      AND (p.bizno IS NULL OR p.parent IS NOT NULL
           OR p.status OPERATOR(pg_catalog.<>) 'SUCCESS'
           OR r.currency IS DISTINCT FROM p.currency)
    UNION ALL
    SELECT refunded.parent,
           pg_catalog.format('its refunds return or hold %s, more than the %s captured',
                             b.refunded OPERATOR(pg_catalog.+) b.in_flight, b.captured)
    FROM (SELECT DISTINCT l.parent FROM @extschema@.pay_ledger AS l WHERE l.parent IS NOT NULL) AS refunded,
         @extschema@.pay_refund_balance(refunded.parent) AS b
    WHERE b.refundable OPERATOR(pg_catalog.<) 0
    UNION ALL
    SELECT held.parent,
           pg_catalog.format('its captures capture or hold %s, more than the %s authorized',
                             b.captured OPERATOR(pg_catalog.+) b.capture_in_flight, b.authorized)
    FROM (SELECT DISTINCT l.parent FROM @extschema@.pay_ledger AS l
          WHERE l.kind OPERATOR(pg_catalog.=) ANY ('{CAPTURE,FINAL_CAPTURE}')) AS held,
         @extschema@.pay_authorization_balance(held.parent) AS b
    WHERE b.captured OPERATOR(pg_catalog.+) b.capture_in_flight OPERATOR(pg_catalog.>) b.authorized
    UNION ALL
    SELECT s.bizno, pg_catalog.format('a step (%s) of %s, which is no authorization', s.kind, s.parent)
    FROM @extschema@.pay_ledger AS s
    LEFT JOIN @extschema@.pay_ledger AS a ON a.bizno OPERATOR(pg_catalog.=) s.parent
    WHERE s.kind OPERATOR(pg_catalog.<>) 'AUTHORIZATION'
      AND a.kind IS DISTINCT FROM 'AUTHORIZATION'
    UNION ALL
    SELECT s.bizno, pg_catalog.format('claimed after its authorization %s closed: %s', s.parent, closed.why)
    FROM @extschema@.pay_ledger AS s
    JOIN @extschema@.pay_ledger AS a ON a.bizno OPERATOR(pg_catalog.=) s.parent
    JOIN @extschema@.pay_journal AS j ON j.bizno OPERATOR(pg_catalog.=) s.bizno
         AND j.to_status OPERATOR(pg_catalog.=) 'PROCESSING'::@extschema@.pay_status
    CROSS JOIN LATERAL (
        SELECT 'expired' AS why WHERE j.at OPERATOR(pg_catalog.>) a.expires_at
        UNION ALL
        SELECT pg_catalog.lower(c.kind) OPERATOR(pg_catalog.||) ' ' OPERATOR(pg_catalog.||) c.bizno
        FROM @extschema@.pay_ledger AS c
        WHERE c.parent OPERATOR(pg_catalog.=) s.parent AND NOT c.bizno OPERATOR(pg_catalog.=) s.bizno
          AND c.kind OPERATOR(pg_catalog.=) ANY ('{VOID,FINAL_CAPTURE}')
          AND c.status OPERATOR(pg_catalog.=) ANY ('{PROCESSING,SUCCESS}'::@extschema@.pay_status[])
          AND j.seq OPERATOR(pg_catalog.>) (SELECT pg_catalog.max(cj.seq) FROM @extschema@.pay_journal AS cj
                                            WHERE cj.bizno OPERATOR(pg_catalog.=) c.bizno
                                              AND cj.to_status OPERATOR(pg_catalog.=) 'PROCESSING'::@extschema@.pay_status)
        LIMIT 1) AS closed
    WHERE s.kind OPERATOR(pg_catalog.=) ANY ('{CAPTURE,FINAL_CAPTURE,VOID,INCREMENT}')
    UNION ALL
    SELECT c.bizno, pg_catalog.format('a second charge under %s was reported, and no bank statement confirms it',
                                      c.channel_ref)
    FROM @extschema@.pay_second_charges() AS c
    WHERE NOT c.confirmed
    UNION ALL
    SELECT l.bizno, 'in the ledger, but its payment was archived: a second charge of it'
    FROM @extschema@.pay_ledger AS l
    CROSS JOIN LATERAL (SELECT @extschema@.pay_archive_key_hash(l.bizno) AS h) AS k
    WHERE (SELECT k.h OPERATOR(pg_catalog.=) ANY (@extschema@.pay_archive_key_unpack(r.lo, r.hashes))
           FROM @extschema@.pay_archive_keys AS r
           WHERE r.lo OPERATOR(pg_catalog.<=) k.h
           ORDER BY r.lo DESC LIMIT 1)
    UNION ALL
    SELECT a.bizno, 'archived, but the hash that refuses its late retries is not kept'
    FROM @extschema@.pay_ledger_archive AS a
    CROSS JOIN LATERAL (SELECT @extschema@.pay_archive_key_hash(a.bizno) AS h) AS k
    WHERE (SELECT k.h OPERATOR(pg_catalog.=) ANY (@extschema@.pay_archive_key_unpack(r.lo, r.hashes))
           FROM @extschema@.pay_archive_keys AS r
           WHERE r.lo OPERATOR(pg_catalog.<=) k.h
           ORDER BY r.lo DESC LIMIT 1) IS NOT TRUE
    UNION ALL
    SELECT NULL, pg_catalog.format('the row of pay_archive_keys from %s is not a list of hashes', r.lo)
    FROM @extschema@.pay_archive_keys AS r
    WHERE @extschema@.pay_archive_key_unpack(r.lo, r.hashes) IS NULL
    UNION ALL
    SELECT NULL, pg_catalog.format('the rows of pay_archive_keys from %s and from %s both answer for the hashes from %s to %s',
                                   r.lo, r.next_lo, r.next_lo, LEAST(r.hi, r.next_hi))
    FROM (SELECT k.lo, k.hi, pg_catalog.lead(k.lo) OVER w AS next_lo, pg_catalog.lead(k.hi) OVER w AS next_hi
          FROM @extschema@.pay_archive_keys AS k WINDOW w AS (ORDER BY k.lo)) AS r
    WHERE r.next_lo OPERATOR(pg_catalog.<=) r.hi
    UNION ALL
    SELECT pg_catalog.min(a.bizno), pg_catalog.format('business action %s %s was archived under %s bizNos',
                                                     a.prefix, a.biz_id, pg_catalog.count(*))
    FROM @extschema@.pay_ledger_archive AS a
    WHERE a.biz_id IS NOT NULL
    GROUP BY a.prefix, a.biz_id
    HAVING pg_catalog.count(*) OPERATOR(pg_catalog.>) 1
    UNION ALL
    SELECT NULL, pg_catalog.format('the archive of %s: %s', pg_catalog.to_char(v.month, 'YYYY-MM'), v.problem)
    FROM @extschema@.pay_archive_verify() AS v
    WHERE v.problem IS NOT NULL
    UNION ALL
    -- each step the journal records is one the state machine allows (the
    -- same state again, as a second charge's or an amount change's row, is
    -- no step): what the guard refuses may still be journaled where it did
    -- not fire, or with the type's labels changed in the catalog
    SELECT e.bizno, pg_catalog.format('journal entry %s goes from %s to %s, which the state machine does not allow',
                                      e.seq, COALESCE(e.from_status::text, 'nothing'), e.to_status)
    FROM entries AS e
    WHERE e.from_status IS DISTINCT FROM e.to_status
      AND NOT @extschema@.pay_allowed(e.from_status, e.to_status)
    UNION ALL
    SELECT j.bizno, pg_catalog.format('journal entry %s is a second charge %s of a step from %s to %s under %s, which the API never journals',
                                      j.seq, j.second_charge, COALESCE(j.from_status::text, 'nothing'), j.to_status,
                                      COALESCE(j.channel_ref, 'no reference'))
    FROM @extschema@.pay_journal AS j
    WHERE j.second_charge IS NOT NULL
      AND (j.second_charge OPERATOR(pg_catalog.<>) ALL (ARRAY['reported', 'confirmed'])
           OR j.from_status IS DISTINCT FROM 'SUCCESS'::@extschema@.pay_status
           OR j.to_status OPERATOR(pg_catalog.<>) 'SUCCESS'::@extschema@.pay_status
           OR j.channel_ref IS NULL)
    -- the triggers that fire ALWAYS, switched off or to one session mode
    -- (by a superuser in maintenance, or behind the event triggers' back),
    -- a partition of the archive without its TRUNCATE guard (one made by
    -- hand, not by pay_archive_partitions), and the event triggers themselves
    UNION ALL
    SELECT NULL, pg_catalog.format('the partition %s of %s has no guard against TRUNCATE',
                                   i.inhrelid::pg_catalog.regclass, i.inhparent::pg_catalog.regclass)
    FROM pg_catalog.pg_inherits AS i
    WHERE i.inhparent OPERATOR(pg_catalog.=) ANY
          (ARRAY['@extschema@.pay_ledger_archive', '@extschema@.pay_journal_archive']::pg_catalog.regclass[])
      AND NOT EXISTS (SELECT FROM pg_catalog.pg_trigger AS t
                      WHERE t.tgrelid OPERATOR(pg_catalog.=) i.inhrelid
                        AND t.tgfoid OPERATOR(pg_catalog.=) '@extschema@.pay_guard()'::pg_catalog.regprocedure
                        AND (t.tgtype OPERATOR(pg_catalog.&) 32::pg_catalog.int2) OPERATOR(pg_catalog.<>) 0)
    UNION ALL
    SELECT NULL, pg_catalog.format('the trigger %s on %s is %s, not ENABLE ALWAYS', t.tgname, t.tgrelid::pg_catalog.regclass,
                                   CASE t.tgenabled WHEN 'D' THEN 'disabled' WHEN 'O' THEN 'enabled outside a replica''s apply only'
                                                    ELSE 'enabled in a replica''s apply only' END)
    FROM pg_catalog.pg_trigger AS t
    JOIN pg_catalog.pg_proc AS p ON p.oid OPERATOR(pg_catalog.=) t.tgfoid
    WHERE p.pronamespace OPERATOR(pg_catalog.=)
          (SELECT e.extnamespace FROM pg_catalog.pg_extension AS e WHERE e.extname OPERATOR(pg_catalog.=) 'idempotent_pay')
      AND p.proname OPERATOR(pg_catalog.=) ANY
          (ARRAY['pay_guard', 'pay_archive_moved', 'pay_archive_keys_kept']::pg_catalog.name[])
      AND t.tgenabled OPERATOR(pg_catalog.<>) 'A'
    UNION ALL
    SELECT NULL, CASE WHEN v.evtname IS NULL THEN pg_catalog.format('the event trigger %s is missing', w.name)
                      ELSE pg_catalog.format('the event trigger %s is not ENABLE ALWAYS', w.name) END
    FROM (VALUES ('pay_refuse_drop'::pg_catalog.name), ('pay_keep_guards_always'), ('pay_refuse_ddl')) AS w(name)
    LEFT JOIN pg_catalog.pg_event_trigger AS v ON v.evtname OPERATOR(pg_catalog.=) w.name
    WHERE v.evtname IS NULL OR v.evtenabled OPERATOR(pg_catalog.<>) 'A'
    -- pay_stats against a full count of the same snapshot: its counts are
    -- tables an owner could write by hand
    UNION ALL
    SELECT NULL, pg_catalog.format('pay_stats counts %s payments and %s refunds %s, the ledger holds %s and %s',
                                   s.payments, s.refunds, s.status, f.payments, f.refunds)
    FROM (SELECT t.status, pg_catalog.count(l.bizno) AS payments,
                 pg_catalog.count(l.bizno) FILTER (WHERE l.parent IS NOT NULL) AS refunds
          FROM pg_catalog.unnest(pg_catalog.enum_range(NULL::@extschema@.pay_status)) AS t(status)
          LEFT JOIN @extschema@.pay_ledger AS l ON l.status OPERATOR(pg_catalog.=) t.status
          GROUP BY t.status) AS f
    JOIN @extschema@.pay_stats AS s ON s.status OPERATOR(pg_catalog.=) f.status
    WHERE s.payments OPERATOR(pg_catalog.<>) f.payments OR s.refunds OPERATOR(pg_catalog.<>) f.refunds
    UNION ALL
    SELECT NULL, pg_catalog.format('pay_stats counts %s authorizations, %s captures, %s voids and %s increments %s, '
                                   'the ledger holds %s, %s, %s and %s',
                                   s.authorizations, s.captures, s.voids, s.increments, s.status,
                                   f.authorizations, f.captures, f.voids, f.increments)
    FROM (SELECT t.status,
                 pg_catalog.count(l.bizno) FILTER (WHERE l.kind OPERATOR(pg_catalog.=) 'AUTHORIZATION') AS authorizations,
                 pg_catalog.count(l.bizno) FILTER (WHERE l.kind OPERATOR(pg_catalog.=) ANY ('{CAPTURE,FINAL_CAPTURE}'))
                     AS captures,
                 pg_catalog.count(l.bizno) FILTER (WHERE l.kind OPERATOR(pg_catalog.=) 'VOID') AS voids,
                 pg_catalog.count(l.bizno) FILTER (WHERE l.kind OPERATOR(pg_catalog.=) 'INCREMENT') AS increments
          FROM pg_catalog.unnest(pg_catalog.enum_range(NULL::@extschema@.pay_status)) AS t(status)
          LEFT JOIN @extschema@.pay_ledger AS l ON l.status OPERATOR(pg_catalog.=) t.status
          GROUP BY t.status) AS f
    JOIN @extschema@.pay_stats AS s ON s.status OPERATOR(pg_catalog.=) f.status
    WHERE (s.authorizations, s.captures, s.voids, s.increments)
          IS DISTINCT FROM (f.authorizations, f.captures, f.voids, f.increments)
    UNION ALL
    SELECT NULL, pg_catalog.format('pay_stats_amounts counts %s authorized and %s captured in %s, '
                                   'the journal and the archive %s and %s',
                                   COALESCE(s.authorized, 0), COALESCE(s.captured, 0), COALESCE(s.currency, f.currency),
                                   COALESCE(f.authorized, 0), COALESCE(f.captured, 0))
    FROM @extschema@.pay_stats_amounts AS s
    FULL JOIN (SELECT c.currency,
                      COALESCE(pg_catalog.sum(c.amount) FILTER (WHERE c.kind OPERATOR(pg_catalog.=) ANY ('{AUTHORIZATION,INCREMENT}')), 0)
                          AS authorized,
                      COALESCE(pg_catalog.sum(c.amount) FILTER (WHERE c.kind OPERATOR(pg_catalog.=) ANY ('{CAPTURE,FINAL_CAPTURE}')), 0)
                          AS captured
               FROM (SELECT j.from_status, j.to_status, l.kind, j.currency, j.amount
                     FROM @extschema@.pay_journal AS j
                     JOIN @extschema@.pay_ledger AS l ON l.bizno OPERATOR(pg_catalog.=) j.bizno
                     WHERE l.kind IS NOT NULL
                     UNION ALL
                     SELECT a.from_status, a.to_status, a.kind, a.currency, a.amount
                     FROM @extschema@.pay_archive_counts AS a
                     WHERE a.kind IS NOT NULL) AS c
               WHERE c.to_status OPERATOR(pg_catalog.=) 'SUCCESS'::@extschema@.pay_status
                 AND c.from_status IS DISTINCT FROM 'SUCCESS'::@extschema@.pay_status
               GROUP BY 1) AS f
      ON f.currency OPERATOR(pg_catalog.=) s.currency
    WHERE (s.authorized, s.captured) IS DISTINCT FROM (f.authorized, f.captured)
    UNION ALL
    SELECT NULL, pg_catalog.format('pay_stats_transitions counts %s transitions from %s to %s, the journal and the archive %s',
                                   COALESCE(s.transitions, 0),
                                   COALESCE(COALESCE(s.from_status, j.from_status)::text, 'nothing'),
                                   COALESCE(s.to_status, j.to_status), COALESCE(j.n, 0))
    FROM @extschema@.pay_stats_transitions AS s
    FULL JOIN (SELECT a.from_status, a.to_status, pg_catalog.sum(a.n) AS n
               FROM (SELECT e.from_status, e.to_status, 1 AS n FROM @extschema@.pay_journal AS e
                     UNION ALL
                     SELECT c.from_status, c.to_status, c.n FROM @extschema@.pay_archive_counts AS c) AS a
               WHERE a.from_status IS DISTINCT FROM a.to_status
               GROUP BY 1, 2) AS j
      ON s.from_status IS NOT DISTINCT FROM j.from_status AND s.to_status OPERATOR(pg_catalog.=) j.to_status
    WHERE s.transitions IS DISTINCT FROM j.n
$$
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = @extschema@, pg_temp;

COMMENT ON FUNCTION @extschema@.pay_verify() IS
'Every violation of the ledger/journal invariants, including a PROCESSING or SUCCESS payment missing from the ledger, a success whose reference or response differs from the one it was journaled with, refunds beyond their payment''s capture, and (since 1.4) captures beyond their authorization''s hold, steps of what is no authorization, steps claimed after their authorization closed; no rows when all hold';


/* The card flow: authorize, capture, void, increment ------------------- */

-- An authorization and its steps are ledger rows: kind names the step,
-- expires_in an authorization's life, expires_at (kept by the ledger) when
-- its hold expires.  Rows of before the update are payments and refunds.
ALTER TABLE @extschema@.pay_ledger ADD COLUMN kind text;
ALTER TABLE @extschema@.pay_ledger ADD COLUMN expires_in interval;
ALTER TABLE @extschema@.pay_ledger ADD COLUMN expires_at timestamptz;
COMMENT ON COLUMN @extschema@.pay_ledger.kind IS
'The step of the card flow: AUTHORIZATION, or CAPTURE, FINAL_CAPTURE, VOID or INCREMENT of the authorization named by parent; NULL for a payment or a refund; never changes';
COMMENT ON COLUMN @extschema@.pay_ledger.expires_in IS
'An authorization''s life: its hold expires this long after it succeeded; never changes';
COMMENT ON COLUMN @extschema@.pay_ledger.expires_at IS
'When an authorization''s hold expires, fixed by the ledger when the authorization succeeds';

-- The card flow (src/api_card.c, src/card.c): an authorization is a payment
-- (kind AUTHORIZATION) whose SUCCESS means the bank placed a hold; its
-- captures, voids and increments are ledger rows of their own, children of
-- the authorization (parent) under a key (refund_key), claimed and settled
-- as any payment.  The ledger's bookkeeping holds every write to the rules
-- of the card flow: captures in PROCESSING or SUCCESS within the hold,
-- closing one-way, increments before any capture.
CREATE FUNCTION @extschema@.pay_open_authorization(prefix text, biz_id text, amount numeric, currency text,
                                                   expires_in interval DEFAULT '7 days')
RETURNS text
AS 'MODULE_PATHNAME', 'pay_open_authorization'
LANGUAGE C VOLATILE SECURITY DEFINER SET search_path = @extschema@, pg_temp;

COMMENT ON FUNCTION @extschema@.pay_open_authorization(text, text, numeric, text, interval) IS
'The bizNo of the authorization of business action (prefix, biz_id): found again, or recorded as INIT; its SUCCESS places the hold, which expires expires_in after it';

CREATE FUNCTION @extschema@.pay_capture_open(auth_bizno text, capture_key text, amount numeric,
                                             final boolean DEFAULT true)
RETURNS text
AS 'MODULE_PATHNAME', 'pay_capture_open'
LANGUAGE C VOLATILE SECURITY DEFINER SET search_path = @extschema@, pg_temp;

COMMENT ON FUNCTION @extschema@.pay_capture_open(text, text, numeric, boolean) IS
'The bizNo of capture capture_key of a held authorization: found again, or recorded as INIT; a final capture closes the authorization once claimed';

CREATE FUNCTION @extschema@.pay_void_open(auth_bizno text, void_key text)
RETURNS text
AS 'MODULE_PATHNAME', 'pay_void_open'
LANGUAGE C VOLATILE SECURITY DEFINER SET search_path = @extschema@, pg_temp;

COMMENT ON FUNCTION @extschema@.pay_void_open(text, text) IS
'The bizNo of void void_key of a held authorization (releases what is not captured): found again, or recorded as INIT for the authorization''s amount';

CREATE FUNCTION @extschema@.pay_increment_open(auth_bizno text, increment_key text, amount numeric)
RETURNS text
AS 'MODULE_PATHNAME', 'pay_increment_open'
LANGUAGE C VOLATILE SECURITY DEFINER SET search_path = @extschema@, pg_temp;

COMMENT ON FUNCTION @extschema@.pay_increment_open(text, text, numeric) IS
'The bizNo of increment increment_key of a held authorization before any capture (raises the hold by amount once SUCCESS): found again, or recorded as INIT';

-- An authorization's refunds are held to what its captures captured; a
-- payment's refunds are its children of no kind.
CREATE OR REPLACE FUNCTION @extschema@.pay_refund_balance(bizno text, OUT captured numeric, OUT refunded numeric,
                                               OUT in_flight numeric, OUT refundable numeric)
RETURNS record
AS $$
    SELECT c.captured, r.refunded, r.in_flight,
           c.captured OPERATOR(pg_catalog.-) r.refunded OPERATOR(pg_catalog.-) r.in_flight
    FROM (SELECT CASE WHEN EXISTS (SELECT FROM @extschema@.pay_ledger AS a
                                   WHERE a.bizno OPERATOR(pg_catalog.=) $1
                                     AND a.kind OPERATOR(pg_catalog.=) 'AUTHORIZATION')
                 THEN (SELECT COALESCE(pg_catalog.sum(l.amount), 0)
                       FROM @extschema@.pay_ledger AS l
                       WHERE l.parent OPERATOR(pg_catalog.=) $1
                         AND l.kind OPERATOR(pg_catalog.=) ANY ('{CAPTURE,FINAL_CAPTURE}')
                         AND l.status OPERATOR(pg_catalog.=) 'SUCCESS'::@extschema@.pay_status)
                 ELSE (SELECT COALESCE(pg_catalog.sum(j.amount), 0)
                       FROM @extschema@.pay_journal AS j
                       WHERE j.bizno OPERATOR(pg_catalog.=) $1
                         AND j.to_status OPERATOR(pg_catalog.=) 'SUCCESS'::@extschema@.pay_status
                         AND j.second_charge IS DISTINCT FROM 'reported') END AS captured) AS c,
         (SELECT COALESCE(pg_catalog.sum(l.amount) FILTER (
                     WHERE l.status OPERATOR(pg_catalog.=) 'SUCCESS'::@extschema@.pay_status), 0) AS refunded,
                 COALESCE(pg_catalog.sum(l.amount) FILTER (
                     WHERE l.status OPERATOR(pg_catalog.=) 'PROCESSING'::@extschema@.pay_status), 0) AS in_flight
          FROM @extschema@.pay_ledger AS l
          WHERE l.parent OPERATOR(pg_catalog.=) $1 AND l.kind IS NULL) AS r
$$
LANGUAGE sql STABLE SET search_path = @extschema@, pg_temp;

-- An authorization's figures, summed from its children: pay_verify,
-- pay_archive, pay_reconcile and a caller read them here; the ledger's
-- bookkeeping (src/card.c, under the authorization's row lock) sums the same
-- in C, and reads them here where it cannot (row security, an audit hook).
-- authorized is the hold: the amount and every successful increment, once
-- the authorization is SUCCESS.  closed_reason says why nothing more is
-- captured, NULL while the hold is open: a void done or in flight, a final
-- capture done or in flight, the hold fully captured, the hold expired (at
-- the start of the statement, a claim's), or the authorization not held.
-- STABLE, so that the bookkeeping's call sums in the snapshot it takes
-- after the lock; a set of one row, every name qualified and no search_path
-- of its own, so that the planner inlines it into the bookkeeping's saved
-- query (a claim of a capture costs no planning of it).  No row for a key
-- that is no authorization.
CREATE FUNCTION @extschema@.pay_authorization_balance(auth_bizno text)
RETURNS TABLE (authorized numeric, captured numeric, capture_in_flight numeric,
               refunded numeric, refund_in_flight numeric, capturable numeric, refundable numeric,
               closed_reason text, expires_at timestamptz)
AS $$
    SELECT f.authorized, f.captured, f.capture_in_flight, f.refunded, f.refund_in_flight,
           CASE WHEN f.closed_reason IS NULL
                THEN f.authorized OPERATOR(pg_catalog.-) f.captured OPERATOR(pg_catalog.-) f.capture_in_flight
                ELSE 0 END,
           f.captured OPERATOR(pg_catalog.-) f.refunded OPERATOR(pg_catalog.-) f.refund_in_flight,
           f.closed_reason, f.expires_at
    FROM (SELECT CASE WHEN a.status OPERATOR(pg_catalog.=) 'SUCCESS'::@extschema@.pay_status
                      THEN a.amount OPERATOR(pg_catalog.+) s.incremented ELSE 0 END AS authorized,
                 s.captured, s.capture_in_flight, s.refunded, s.refund_in_flight, a.expires_at,
                 CASE WHEN NOT a.status OPERATOR(pg_catalog.=) 'SUCCESS'::@extschema@.pay_status THEN 'not held'
                      WHEN s.voided THEN 'voided'
                      WHEN s.void_in_flight THEN 'void in flight'
                      WHEN s.final_captured THEN 'final capture done'
                      WHEN s.final_in_flight THEN 'final capture in flight'
                      WHEN s.captured OPERATOR(pg_catalog.>=) (a.amount OPERATOR(pg_catalog.+) s.incremented)
                          THEN 'fully captured'
                      WHEN pg_catalog.statement_timestamp() OPERATOR(pg_catalog.>=) a.expires_at THEN 'expired'
                 END AS closed_reason
          FROM @extschema@.pay_ledger AS a,
               LATERAL (SELECT
                   COALESCE(pg_catalog.sum(c.amount) FILTER (WHERE c.kind OPERATOR(pg_catalog.=) 'INCREMENT'
                       AND c.status OPERATOR(pg_catalog.=) 'SUCCESS'::@extschema@.pay_status), 0) AS incremented,
                   COALESCE(pg_catalog.sum(c.amount) FILTER (WHERE c.kind OPERATOR(pg_catalog.=) ANY ('{CAPTURE,FINAL_CAPTURE}')
                       AND c.status OPERATOR(pg_catalog.=) 'SUCCESS'::@extschema@.pay_status), 0) AS captured,
                   COALESCE(pg_catalog.sum(c.amount) FILTER (WHERE c.kind OPERATOR(pg_catalog.=) ANY ('{CAPTURE,FINAL_CAPTURE}')
                       AND c.status OPERATOR(pg_catalog.=) 'PROCESSING'::@extschema@.pay_status), 0) AS capture_in_flight,
                   COALESCE(pg_catalog.sum(c.amount) FILTER (WHERE c.kind IS NULL
                       AND c.status OPERATOR(pg_catalog.=) 'SUCCESS'::@extschema@.pay_status), 0) AS refunded,
                   COALESCE(pg_catalog.sum(c.amount) FILTER (WHERE c.kind IS NULL
                       AND c.status OPERATOR(pg_catalog.=) 'PROCESSING'::@extschema@.pay_status), 0) AS refund_in_flight,
                   COALESCE(pg_catalog.bool_or(c.kind OPERATOR(pg_catalog.=) 'VOID'
                       AND c.status OPERATOR(pg_catalog.=) 'SUCCESS'::@extschema@.pay_status), false) AS voided,
                   COALESCE(pg_catalog.bool_or(c.kind OPERATOR(pg_catalog.=) 'VOID'
                       AND c.status OPERATOR(pg_catalog.=) 'PROCESSING'::@extschema@.pay_status), false) AS void_in_flight,
                   COALESCE(pg_catalog.bool_or(c.kind OPERATOR(pg_catalog.=) 'FINAL_CAPTURE'
                       AND c.status OPERATOR(pg_catalog.=) 'SUCCESS'::@extschema@.pay_status), false) AS final_captured,
                   COALESCE(pg_catalog.bool_or(c.kind OPERATOR(pg_catalog.=) 'FINAL_CAPTURE'
                       AND c.status OPERATOR(pg_catalog.=) 'PROCESSING'::@extschema@.pay_status), false) AS final_in_flight
                FROM @extschema@.pay_ledger AS c
                WHERE c.parent OPERATOR(pg_catalog.=) a.bizno) AS s
          WHERE a.bizno OPERATOR(pg_catalog.=) $1
            AND a.kind OPERATOR(pg_catalog.=) 'AUTHORIZATION') AS f
$$
LANGUAGE sql STABLE;

COMMENT ON FUNCTION @extschema@.pay_authorization_balance(text) IS
'An authorization''s hold (authorized: its amount and successful increments), what its captures captured (SUCCESS) and hold (PROCESSING), what its refunds returned and hold, what may still be captured and refunded, why it is closed (NULL while open), and when the hold expires';

-- pay_archive moves an authorization, with all its steps and refunds, only
-- once it is closed and all of them are settled.
CREATE OR REPLACE FUNCTION @extschema@.pay_archive_unready(before timestamptz, folded_below bigint,
                                                candidates text[])
RETURNS SETOF text
AS $$
    SELECT r.parent FROM @extschema@.pay_ledger AS r
    WHERE r.parent IS NOT NULL
      AND (r.status OPERATOR(pg_catalog.<>) ALL (ARRAY['SUCCESS', 'FAILED']::@extschema@.pay_status[])
           OR r.updated_at OPERATOR(pg_catalog.>=) $1)
    UNION
    SELECT COALESCE(l.parent, j.bizno) FROM @extschema@.pay_journal AS j
    LEFT JOIN @extschema@.pay_ledger AS l ON l.bizno OPERATOR(pg_catalog.=) j.bizno
    WHERE j.seq OPERATOR(pg_catalog.>=) $2
    UNION
    SELECT j.bizno
    FROM pg_catalog.unnest($3) AS c(bizno)
    JOIN @extschema@.pay_journal AS j ON j.bizno OPERATOR(pg_catalog.=) c.bizno
    WHERE j.second_charge IS NOT NULL
    GROUP BY j.bizno, j.channel_ref
    HAVING NOT pg_catalog.bool_or(j.second_charge OPERATOR(pg_catalog.=) 'confirmed')
    UNION
    SELECT a.bizno
    FROM pg_catalog.unnest($3) AS c(bizno)
    JOIN @extschema@.pay_ledger AS a ON a.bizno OPERATOR(pg_catalog.=) c.bizno
    CROSS JOIN LATERAL @extschema@.pay_authorization_balance(a.bizno) AS b
    WHERE a.kind OPERATOR(pg_catalog.=) 'AUTHORIZATION'
      AND a.status OPERATOR(pg_catalog.=) 'SUCCESS'::@extschema@.pay_status
      AND b.closed_reason IS NULL
$$
LANGUAGE sql STABLE SET search_path = @extschema@, pg_temp;

REVOKE ALL ON FUNCTION
    @extschema@.pay_open_authorization(text, text, numeric, text, interval),
    @extschema@.pay_capture_open(text, text, numeric, boolean),
    @extschema@.pay_void_open(text, text),
    @extschema@.pay_increment_open(text, text, numeric),
    @extschema@.pay_authorization_balance(text)
FROM PUBLIC;


/* Batches: pay_open_claim_many and pay_settle_many ---------------------- */

-- Batches (src/api_batch.c): a thousand claims or settlements in one call,
-- one answer per input in input order, each what the single call answers --
-- or the refusal it raises, as its SQLSTATE and constraint name, without
-- aborting the rest.  A refusal of the whole call: the batch's claims inside
-- a transaction block (25001), a NULL array or scalar argument (22004),
-- arrays of unequal lengths or of more than one dimension (22023).  The
-- attempts are bigint[], as pay_succeed's attempt is bigint: an integer[]
-- resolves to it as well.
CREATE FUNCTION @extschema@.pay_open_claim_many(prefix text, biz_ids text[], amounts numeric[], currency text)
RETURNS TABLE (biz_id text, bizno text, action @extschema@.pay_action, attempt integer,
               sqlstate text, constraint_name text)
AS 'MODULE_PATHNAME', 'pay_open_claim_many'
LANGUAGE C VOLATILE SECURITY DEFINER SET search_path = @extschema@, pg_temp;

COMMENT ON FUNCTION @extschema@.pay_open_claim_many(text, text[], numeric[], text) IS
'pay_open_claim for each (biz_id, amount) in input order, in one call: per input its bizNo, action and attempt, or the SQLSTATE and constraint name of the refusal pay_open_claim would raise';

CREATE FUNCTION @extschema@.pay_settle_many(biznos text[], attempts bigint[], outcomes @extschema@.pay_status[],
                                            channel_refs text[], reasons text[])
RETURNS TABLE (bizno text, result text, sqlstate text, constraint_name text)
AS 'MODULE_PATHNAME', 'pay_settle_many'
LANGUAGE C VOLATILE SECURITY DEFINER SET search_path = @extschema@, pg_temp;

COMMENT ON FUNCTION @extschema@.pay_settle_many(text[], bigint[], @extschema@.pay_status[], text[], text[]) IS
'pay_succeed (outcome SUCCESS, with its channel_ref) or pay_fail (outcome FAILED, with its reason) for each input in input order, in one call: per input SUCCESS, SECOND_CHARGE or FAILED, or the SQLSTATE and constraint name of the refusal that call would raise';

REVOKE ALL ON FUNCTION
    @extschema@.pay_open_claim_many(text, text[], numeric[], text),
    @extschema@.pay_settle_many(text[], bigint[], @extschema@.pay_status[], text[], text[])
FROM PUBLIC;


/* pay_stats knows the card flow: counts by kind, the amounts held and
   captured, the holds --------------------------------------------------- */

-- The counts gain the card flow's kind of the rows they count, and for the
-- card flow's journal rows their currency and the sum of their amounts.
-- Every row a 1.3 installation counted is a payment or a refund (1.3 has no
-- card flow), of no kind: the counts kept so far stay exact with kind,
-- currency and amount NULL, and no row needs counting again.
ALTER TABLE @extschema@.pay_stats_counts ADD COLUMN kind text, ADD COLUMN currency text, ADD COLUMN amount numeric;
ALTER TABLE @extschema@.pay_stats_counts DROP CONSTRAINT pay_stats_counts_key,
    ADD CONSTRAINT pay_stats_counts_key UNIQUE NULLS NOT DISTINCT (from_status, to_status, refund, second_charge,
                                                                   kind, currency),
    ADD CONSTRAINT pay_stats_counts_kind
        CHECK (kind IN ('AUTHORIZATION', 'CAPTURE', 'FINAL_CAPTURE', 'VOID', 'INCREMENT'));
COMMENT ON COLUMN @extschema@.pay_stats_counts.kind IS
'The card flow''s kind of the rows counted (since 1.4); NULL for payments and refunds';
COMMENT ON COLUMN @extschema@.pay_stats_counts.currency IS
'For journal rows of the card flow (since 1.4): their currency, whose amounts amount sums; NULL otherwise';
COMMENT ON COLUMN @extschema@.pay_stats_counts.amount IS
'For journal rows of the card flow (since 1.4): the sum of their amounts; NULL otherwise';

ALTER TABLE @extschema@.pay_archive_counts ADD COLUMN kind text, ADD COLUMN currency text, ADD COLUMN amount numeric;
ALTER TABLE @extschema@.pay_archive_counts DROP CONSTRAINT pay_archive_counts_key,
    ADD CONSTRAINT pay_archive_counts_key UNIQUE NULLS NOT DISTINCT (from_status, to_status, refund, second_charge,
                                                                     kind, currency),
    ADD CONSTRAINT pay_archive_counts_kind
        CHECK (kind IN ('AUTHORIZATION', 'CAPTURE', 'FINAL_CAPTURE', 'VOID', 'INCREMENT'));
COMMENT ON COLUMN @extschema@.pay_archive_counts.kind IS
'The card flow''s kind of the rows counted (since 1.4); NULL for payments and refunds';
COMMENT ON COLUMN @extschema@.pay_archive_counts.currency IS
'For journal rows of the card flow (since 1.4): their currency, whose amounts amount sums; NULL otherwise';
COMMENT ON COLUMN @extschema@.pay_archive_counts.amount IS
'For journal rows of the card flow (since 1.4): the sum of their amounts; NULL otherwise';

ALTER TABLE @extschema@.pay_stats_deletions ADD COLUMN kind text;
COMMENT ON COLUMN @extschema@.pay_stats_deletions.kind IS
'The card flow''s kind of the deleted row (since 1.4); NULL for a payment or refund';

-- The holds, by when they expire: what pay_stats_holds reads instead of
-- the whole ledger.  expires_at is set by the ledger alone, when an
-- authorization enters SUCCESS: payments, refunds and steps have no entry,
-- and their updates, which leave it NULL, stay HOT.  A predicate on kind
-- would name the same rows, less the authorizations not yet held, but its
-- text comparison costs every payment's insert (some 6% of a new payment's
-- instructions on PostgreSQL 15); a null test costs nothing measurable.
-- A 1.3 ledger has no authorization: the index is built empty, in one read
-- of the ledger.
CREATE INDEX pay_ledger_authorization_expires_at ON @extschema@.pay_ledger (expires_at)
    WHERE expires_at IS NOT NULL;

-- Another result: dropped and made again (pay_stats_refresh and
-- pay_stats_read call it by name).
DROP FUNCTION @extschema@.pay_stats_unfolded(bigint, pg_snapshot);

-- The journal rows and deletions no count includes yet: those not visible in
-- the snapshot counted, numbered from counted_from on.  A refund and the card
-- flow's kind of a row are known by its ledger row (a join: looked up row by
-- row for a few rows, hashed for the first fold's whole journal), or by its
-- deletion when the row is gone; a row of the card flow brings its currency
-- and amount, which the counts sum.  Without a
-- search_path of its own (every name in it is qualified) the planner inlines
-- it, and so sees counted_from's value; bounded above too (no row visible
-- has a number the sequence has not handed out), the range reads as narrow
-- even before the journal was analyzed, and is read through the primary key.
CREATE FUNCTION @extschema@.pay_stats_unfolded(counted_from bigint, counted pg_snapshot,
    OUT seq bigint, OUT bizno text, OUT from_status @extschema@.pay_status,
    OUT to_status @extschema@.pay_status, OUT refund boolean, OUT second_charge text,
    OUT at timestamptz, OUT kind text, OUT currency text, OUT amount numeric)
RETURNS SETOF record
AS $$
    WITH journal AS (
        SELECT j.seq, j.bizno, j.from_status, j.to_status, j.channel_ref, j.second_charge, j.at,
               j.currency, j.amount
        FROM @extschema@.pay_journal AS j
        WHERE j.seq OPERATOR(pg_catalog.>=) $1
          AND j.seq OPERATOR(pg_catalog.<=) (SELECT s.last_value FROM @extschema@.pay_journal_seq_seq AS s)
          AND NOT pg_catalog.pg_visible_in_snapshot(j.txid, $2)),
    deletions AS (
        SELECT d.seq, d.bizno, d.status, d.refund, d.kind
        FROM @extschema@.pay_stats_deletions AS d
        WHERE d.seq OPERATOR(pg_catalog.>=) $1
          AND d.seq OPERATOR(pg_catalog.<=) (SELECT s.last_value FROM @extschema@.pay_journal_seq_seq AS s)
          AND NOT pg_catalog.pg_visible_in_snapshot(d.txid, $2))
    SELECT j.seq, j.bizno, j.from_status, j.to_status,
           CASE WHEN l.bizno IS NOT NULL THEN l.parent IS NOT NULL
                ELSE COALESCE((SELECT pg_catalog.bool_or(d.refund) FROM deletions AS d
                               WHERE d.bizno OPERATOR(pg_catalog.=) j.bizno), false)
           END,
           CASE WHEN j.second_charge IS NOT NULL
                THEN @extschema@.pay_stats_second_charge(j.bizno, j.second_charge, j.channel_ref, j.seq, $1, $2)
           END,
           j.at, k.kind,
           CASE WHEN k.kind IS NOT NULL THEN j.currency END,
           CASE WHEN k.kind IS NOT NULL THEN j.amount END
    FROM journal AS j
    LEFT JOIN @extschema@.pay_ledger AS l ON l.bizno OPERATOR(pg_catalog.=) j.bizno
    CROSS JOIN LATERAL (SELECT CASE WHEN l.bizno IS NOT NULL THEN l.kind
                                    ELSE (SELECT pg_catalog.max(d.kind) FROM deletions AS d
                                          WHERE d.bizno OPERATOR(pg_catalog.=) j.bizno)
                               END AS kind) AS k
    UNION ALL
    SELECT d.seq, d.bizno, d.status, NULL, d.refund, NULL, NULL, d.kind, NULL, NULL
    FROM deletions AS d
$$
LANGUAGE sql STABLE;

COMMENT ON FUNCTION @extschema@.pay_stats_unfolded(bigint, pg_snapshot) IS
'The journal rows and deletions pay_stats_counts does not include yet, given pay_stats_state''s counted_from and counted';

REVOKE ALL ON FUNCTION @extschema@.pay_stats_unfolded(bigint, pg_snapshot) FROM PUBLIC;

-- Fold the journal rows written since the last fold into pay_stats_counts;
-- the first fold counts the ledger and the whole journal.  pay_stats calls
-- it when at least 250 journal rows may be unfolded; a pg_cron job can
-- call it too.  It folds nothing, and answers false, in a read-only or a
-- REPEATABLE READ transaction (the fold needs a snapshot newer than its look
-- at the running transactions, which only READ COMMITTED takes), while
-- another session folds, when fewer than min_rows rows may be unfolded, or
-- in a transaction that wrote already.
CREATE OR REPLACE FUNCTION @extschema@.pay_stats_refresh(min_rows bigint DEFAULT 0)
RETURNS boolean
AS $$
DECLARE
    state @extschema@.pay_stats_state;
    last_seq bigint;
    new_counted_from bigint;
    new_next_from bigint;
    new_next_from_after text[];
    renumber_from timestamptz;
BEGIN
    IF pg_catalog.current_setting('transaction_read_only')::boolean
       OR pg_catalog.current_setting('transaction_isolation') OPERATOR(pg_catalog.<>) 'read committed' THEN
        RETURN false;
    END IF;
    -- A transaction that wrote already may have written journal rows: a fold
    -- would count them, in a snapshot that does not show its own
    -- transaction, and every reader would count them again.
    IF pg_catalog.pg_current_xact_id_if_assigned() IS NOT NULL THEN
        RETURN false;
    END IF;
    IF @extschema@.pay_stats_subscribed() THEN
        RETURN false;
    END IF;
    BEGIN
        SELECT * INTO state FROM @extschema@.pay_stats_state FOR UPDATE NOWAIT;
    EXCEPTION WHEN lock_not_available THEN
        RETURN false;
    END;
    -- Counts another server kept (replicated to a subscriber since taken
    -- into service, or in a data directory pg_upgrade made) are in its
    -- transactions' terms: count again.
    IF state IS NOT NULL AND NOT @extschema@.pay_stats_counts_usable(state.system_identifier) THEN
        DELETE FROM @extschema@.pay_stats_state;
        state := NULL;
    END IF;

    -- The highest number the journal's sequence handed out, then the
    -- transactions running: each row numbered up to it was written by one of
    -- them or by a transaction that has ended.
    SELECT CASE WHEN s.is_called THEN s.last_value ELSE s.last_value OPERATOR(pg_catalog.-) 1 END
    INTO last_seq FROM @extschema@.pay_journal_seq_seq AS s;

    IF state IS NULL THEN
        -- The first fold: while the deletions wait, count the ledger and the
        -- whole journal in one snapshot.
        BEGIN
            LOCK TABLE @extschema@.pay_stats_state, @extschema@.pay_stats_counts,
                @extschema@.pay_stats_deletions, @extschema@.pay_stats_processing
                IN EXCLUSIVE MODE NOWAIT;
        EXCEPTION WHEN lock_not_available THEN
            RETURN false;
        END;
        IF EXISTS (SELECT FROM @extschema@.pay_stats_state) THEN
            RETURN false;
        END IF;
        new_next_from := last_seq OPERATOR(pg_catalog.+) 1;
        new_next_from_after := @extschema@.pay_stats_running_transactions();
        new_counted_from := CASE WHEN @extschema@.pay_stats_transactions_ended(new_next_from_after)
                                 THEN new_next_from ELSE 0 END;
        DELETE FROM @extschema@.pay_stats_counts;
        DELETE FROM @extschema@.pay_stats_deletions;
        DELETE FROM @extschema@.pay_stats_processing;
        WITH unfolded AS MATERIALIZED (
            SELECT * FROM @extschema@.pay_stats_unfolded(0, '1:1:'::pg_snapshot)),
        folded AS (
            SELECT f.from_status, f.to_status, f.refund, f.second_charge, f.kind, f.currency,
                   pg_catalog.sum(f.n)::bigint AS n, pg_catalog.sum(f.amount) AS amount
            FROM (SELECT u.from_status, u.to_status, u.refund, u.second_charge, u.kind, u.currency,
                         1 AS n, u.amount
                  FROM unfolded AS u
                  UNION ALL
                  -- and the rows the archive took from the journal
                  SELECT a.from_status, a.to_status, a.refund, a.second_charge, a.kind, a.currency,
                         a.n, a.amount
                  FROM @extschema@.pay_archive_counts AS a) AS f
            GROUP BY 1, 2, 3, 4, 5, 6),
        journal_balance AS (
            SELECT b.status, b.refund, b.kind, pg_catalog.sum(b.n) AS n
            FROM (SELECT f.to_status AS status, f.refund, f.kind, f.n FROM folded AS f
                  UNION ALL
                  SELECT f.from_status, f.refund, f.kind, OPERATOR(pg_catalog.-) f.n FROM folded AS f
                  WHERE f.from_status IS NOT NULL) AS b
            GROUP BY 1, 2, 3),
        ledger_balance AS (
            SELECT l.status, l.parent IS NOT NULL AS refund, l.kind, pg_catalog.count(*) AS n
            FROM @extschema@.pay_ledger AS l
            GROUP BY 1, 2, 3),
        counts AS (
            INSERT INTO @extschema@.pay_stats_counts (from_status, to_status, refund, second_charge, n,
                                                      kind, currency, amount)
            SELECT f.from_status, f.to_status, f.refund, f.second_charge, f.n, f.kind, f.currency, f.amount
            FROM folded AS f
            UNION ALL
            -- what the journal implies less what the ledger holds: the rows
            -- deleted before the counts were kept
            SELECT COALESCE(j.status, l.status), NULL, COALESCE(j.refund, l.refund), NULL,
                   (COALESCE(j.n, 0) OPERATOR(pg_catalog.-) COALESCE(l.n, 0))::bigint,
                   COALESCE(j.kind, l.kind), NULL, NULL
            FROM journal_balance AS j
            FULL JOIN ledger_balance AS l
              ON l.status OPERATOR(pg_catalog.=) j.status AND l.refund OPERATOR(pg_catalog.=) j.refund
             AND l.kind IS NOT DISTINCT FROM j.kind
            WHERE COALESCE(j.n, 0) OPERATOR(pg_catalog.<>) COALESCE(l.n, 0)
            RETURNING 1),
        processing AS (
            INSERT INTO @extschema@.pay_stats_processing (bizno, since, ordinal)
            SELECT l.bizno, COALESCE(l.processing_since, l.updated_at),
                   pg_catalog.row_number() OVER (ORDER BY COALESCE(l.processing_since, l.updated_at), l.bizno)
            FROM @extschema@.pay_ledger AS l
            WHERE l.status OPERATOR(pg_catalog.=) 'PROCESSING'::@extschema@.pay_status
            RETURNING 1)
        INSERT INTO @extschema@.pay_stats_state (counted, counted_from, next_from, next_from_after, folded_at,
                                                 system_identifier)
        VALUES (@extschema@.pay_stats_counted_snapshot(), new_counted_from, new_next_from, new_next_from_after,
                pg_catalog.clock_timestamp(),
                (SELECT c.system_identifier FROM pg_catalog.pg_control_system() AS c));
        RETURN true;
    END IF;

    IF last_seq OPERATOR(pg_catalog.<) (state.counted_from OPERATOR(pg_catalog.+) min_rows) THEN
        RETURN false;
    END IF;
    -- Once the transactions noted at an earlier fold have ended, no row
    -- numbered below that fold's next_from can still appear.  Those running
    -- now are noted in turn; when none is (a quiet moment), this fold's own
    -- snapshot already sees every row up to last_seq.
    IF @extschema@.pay_stats_transactions_ended(state.next_from_after) THEN
        new_next_from := last_seq OPERATOR(pg_catalog.+) 1;
        new_next_from_after := @extschema@.pay_stats_running_transactions();
        new_counted_from := CASE WHEN @extschema@.pay_stats_transactions_ended(new_next_from_after)
                                 THEN new_next_from ELSE state.next_from END;
    ELSE
        new_counted_from := state.counted_from;
        new_next_from := state.next_from;
        new_next_from_after := state.next_from_after;
    END IF;

    -- One statement, one snapshot: what it folds, and the snapshot it records.
    WITH unfolded AS MATERIALIZED (
        SELECT * FROM @extschema@.pay_stats_unfolded(state.counted_from, state.counted)),
    counts AS (
        INSERT INTO @extschema@.pay_stats_counts AS c (from_status, to_status, refund, second_charge, n,
                                                       kind, currency, amount)
        SELECT u.from_status, u.to_status, u.refund, u.second_charge, pg_catalog.count(*),
               u.kind, u.currency, pg_catalog.sum(u.amount)
        FROM unfolded AS u
        GROUP BY 1, 2, 3, 4, 6, 7
        ON CONFLICT ON CONSTRAINT pay_stats_counts_key
        DO UPDATE SET n = c.n OPERATOR(pg_catalog.+) excluded.n,
                      amount = c.amount OPERATOR(pg_catalog.+) excluded.amount
        RETURNING 1),
    latest AS (
        SELECT DISTINCT ON (u.bizno) u.bizno, u.to_status, u.at
        FROM unfolded AS u
        WHERE u.from_status IS DISTINCT FROM u.to_status AND u.to_status IS NOT NULL
        ORDER BY u.bizno, u.seq DESC),
    left_processing AS (
        DELETE FROM @extschema@.pay_stats_processing AS p
        USING latest AS l
        WHERE p.bizno OPERATOR(pg_catalog.=) l.bizno
          AND l.to_status OPERATOR(pg_catalog.<>) 'PROCESSING'::@extschema@.pay_status
        RETURNING 1),
    -- its ordinal is set below, with those of the rows after it
    entered_processing AS (
        INSERT INTO @extschema@.pay_stats_processing AS p (bizno, since, ordinal)
        SELECT l.bizno, l.at, 0 FROM latest AS l
        WHERE l.to_status OPERATOR(pg_catalog.=) 'PROCESSING'::@extschema@.pay_status
        ON CONFLICT (bizno) DO UPDATE SET since = excluded.since
        RETURNING 1),
    -- the earliest place in the PROCESSING set this fold changes: a row
    -- leaves it or moves (seen here as it was), or one enters
    changed_from AS (
        SELECT LEAST((SELECT pg_catalog.min(p.since) FROM @extschema@.pay_stats_processing AS p
                      JOIN latest AS l ON l.bizno OPERATOR(pg_catalog.=) p.bizno),
                     (SELECT pg_catalog.min(l.at) FROM latest AS l
                      WHERE l.to_status OPERATOR(pg_catalog.=) 'PROCESSING'::@extschema@.pay_status)) AS since),
    folded_deletions AS (
        DELETE FROM @extschema@.pay_stats_deletions AS d
        USING unfolded AS u
        WHERE u.to_status IS NULL AND d.seq OPERATOR(pg_catalog.=) u.seq
        RETURNING 1)
    UPDATE @extschema@.pay_stats_state
    SET counted = @extschema@.pay_stats_counted_snapshot(), counted_from = new_counted_from,
        next_from = new_next_from, next_from_after = new_next_from_after,
        folded_at = pg_catalog.clock_timestamp()
    RETURNING (SELECT c.since FROM changed_from AS c) INTO renumber_from;

    -- The rows before the first change keep their ordinals; those from it
    -- on are numbered after them again.  Payments mostly enter and leave
    -- PROCESSING at the end of the order, where few rows follow.
    IF renumber_from IS NOT NULL THEN
        UPDATE @extschema@.pay_stats_processing AS p
        SET ordinal = r.ordinal
        FROM (SELECT q.bizno,
                     b.n OPERATOR(pg_catalog.+) pg_catalog.row_number() OVER (ORDER BY q.since, q.bizno) AS ordinal
              FROM @extschema@.pay_stats_processing AS q,
                   (SELECT COALESCE((SELECT o.ordinal FROM @extschema@.pay_stats_processing AS o
                                     WHERE o.since OPERATOR(pg_catalog.<) renumber_from
                                     ORDER BY o.since DESC, o.bizno DESC LIMIT 1), 0) AS n) AS b
              WHERE q.since OPERATOR(pg_catalog.>=) renumber_from) AS r
        WHERE p.bizno OPERATOR(pg_catalog.=) r.bizno AND p.ordinal OPERATOR(pg_catalog.<>) r.ordinal;
    END IF;
    RETURN true;
END
$$
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = @extschema@, pg_temp SET jit = off;

COMMENT ON FUNCTION @extschema@.pay_stats_refresh(bigint) IS
'Fold the journal rows written since the last fold into pay_stats'' counts (the first time, count the ledger and the journal); false when it folded nothing';

-- pay_stats gains columns: the view and its function are made again, and
-- the roles that could read the view or call the function are noted, to be
-- granted them again (below, with the card flow's figures).
CREATE TEMPORARY TABLE pay_stats_readers ON COMMIT DROP AS
    SELECT a.grantee::pg_catalog.regrole AS grantee, 'view' AS granted
    FROM pg_catalog.pg_class AS c, pg_catalog.aclexplode(c.relacl) AS a
    WHERE c.oid OPERATOR(pg_catalog.=) '@extschema@.pay_stats'::pg_catalog.regclass
      AND a.privilege_type OPERATOR(pg_catalog.=) 'SELECT'
      AND a.grantee OPERATOR(pg_catalog.<>) c.relowner
      AND a.grantee OPERATOR(pg_catalog.<>) 0
    UNION
    SELECT a.grantee::pg_catalog.regrole, 'function'
    FROM pg_catalog.pg_proc AS p, pg_catalog.aclexplode(p.proacl) AS a
    WHERE p.oid OPERATOR(pg_catalog.=) '@extschema@.pay_stats_read()'::pg_catalog.regprocedure
      AND a.privilege_type OPERATOR(pg_catalog.=) 'EXECUTE'
      AND a.grantee OPERATOR(pg_catalog.<>) p.proowner
      AND a.grantee OPERATOR(pg_catalog.<>) 0;

DROP VIEW @extschema@.pay_stats;
DROP FUNCTION @extschema@.pay_stats_read();

-- What the views pay_stats and pay_stats_transitions show: the counts with
-- the rows folded into none yet.  Before the first fold (which a read-only
-- transaction cannot make), and with counts of another server, they count
-- by scanning the ledger and journal.
-- These reads take milliseconds: compiling them with JIT, which their plan's
-- cost before the journal is analyzed can bring on, would take a second.
CREATE FUNCTION @extschema@.pay_stats_read(OUT status @extschema@.pay_status, OUT payments bigint,
    OUT stuck bigint, OUT oldest_processing_since timestamptz, OUT resets bigint,
    OUT duplicate_answers bigint, OUT stats_reset timestamptz, OUT refunds bigint,
    OUT second_charges bigint, OUT unconfirmed_second_charges bigint, OUT authorizations bigint,
    OUT captures bigint, OUT voids bigint, OUT increments bigint)
RETURNS SETOF record
AS $$
DECLARE
    state @extschema@.pay_stats_state;
BEGIN
    state := @extschema@.pay_stats_usable_state();
    IF state IS NULL THEN
        RETURN QUERY
        WITH counters AS (SELECT * FROM @extschema@.pay_stats_counters()),
        second_charges AS (SELECT * FROM @extschema@.pay_second_charges())
        SELECT s.status,
               pg_catalog.count(l.bizno),
               CASE WHEN s.status OPERATOR(pg_catalog.=) 'PROCESSING' THEN
                   pg_catalog.count(l.bizno) FILTER (
                       WHERE l.processing_since OPERATOR(pg_catalog.<)
                             (pg_catalog.now() OPERATOR(pg_catalog.-) (SELECT c.stuck_after FROM counters AS c)))
               END,
               CASE WHEN s.status OPERATOR(pg_catalog.=) 'PROCESSING' THEN pg_catalog.min(l.processing_since) END,
               CASE WHEN s.status OPERATOR(pg_catalog.=) 'INIT' THEN
                   (SELECT pg_catalog.count(*) FROM @extschema@.pay_journal AS j
                    WHERE j.from_status OPERATOR(pg_catalog.=) 'FAILED'
                      AND j.to_status OPERATOR(pg_catalog.=) 'INIT')
                   OPERATOR(pg_catalog.+)
                   (SELECT COALESCE(pg_catalog.sum(a.n), 0) FROM @extschema@.pay_archive_counts AS a
                    WHERE a.from_status OPERATOR(pg_catalog.=) 'FAILED'
                      AND a.to_status OPERATOR(pg_catalog.=) 'INIT')::bigint
               END,
               CASE s.status
                   WHEN 'SUCCESS' THEN (SELECT c.already_succeeded FROM counters AS c)
                   WHEN 'PROCESSING' THEN (SELECT c.in_progress FROM counters AS c)
               END,
               (SELECT c.stats_reset FROM counters AS c),
               pg_catalog.count(l.bizno) FILTER (WHERE l.parent IS NOT NULL),
               CASE WHEN s.status OPERATOR(pg_catalog.=) 'SUCCESS' THEN
                   (SELECT pg_catalog.count(*) FROM second_charges)
                   OPERATOR(pg_catalog.+)
                   (SELECT COALESCE(pg_catalog.sum(a.n), 0) FROM @extschema@.pay_archive_counts AS a
                    WHERE a.second_charge IN ('reported', 'found'))::bigint
               END,
               CASE WHEN s.status OPERATOR(pg_catalog.=) 'SUCCESS' THEN
                   (SELECT pg_catalog.count(*) FROM second_charges AS c WHERE NOT c.confirmed)
               END,
               pg_catalog.count(l.bizno) FILTER (WHERE l.kind OPERATOR(pg_catalog.=) 'AUTHORIZATION'),
               pg_catalog.count(l.bizno) FILTER (WHERE l.kind OPERATOR(pg_catalog.=) ANY ('{CAPTURE,FINAL_CAPTURE}')),
               pg_catalog.count(l.bizno) FILTER (WHERE l.kind OPERATOR(pg_catalog.=) 'VOID'),
               pg_catalog.count(l.bizno) FILTER (WHERE l.kind OPERATOR(pg_catalog.=) 'INCREMENT')
        FROM pg_catalog.unnest(pg_catalog.enum_range(NULL::@extschema@.pay_status)) AS s(status)
        LEFT JOIN @extschema@.pay_ledger AS l ON l.status OPERATOR(pg_catalog.=) s.status
        GROUP BY s.status
        ORDER BY s.status;
        RETURN;
    END IF;

    RETURN QUERY
    WITH unfolded AS MATERIALIZED (
        SELECT * FROM @extschema@.pay_stats_unfolded(state.counted_from, state.counted)),
    counts AS (
        SELECT c.from_status, c.to_status, c.refund, c.second_charge, c.kind, c.n
        FROM @extschema@.pay_stats_counts AS c
        UNION ALL
        SELECT u.from_status, u.to_status, u.refund, u.second_charge, u.kind, pg_catalog.count(*)
        FROM unfolded AS u
        GROUP BY 1, 2, 3, 4, 5),
    -- each count enters its to_status and leaves its from_status
    moves AS (
        SELECT c.to_status AS status, c.refund, c.kind, c.n FROM counts AS c WHERE c.to_status IS NOT NULL
        UNION ALL
        SELECT c.from_status, c.refund, c.kind, OPERATOR(pg_catalog.-) c.n FROM counts AS c
        WHERE c.from_status IS NOT NULL),
    latest AS (
        SELECT DISTINCT ON (u.bizno) u.bizno, u.to_status, u.at
        FROM unfolded AS u
        WHERE u.from_status IS DISTINCT FROM u.to_status AND u.to_status IS NOT NULL
        ORDER BY u.bizno, u.seq DESC),
    counters AS (SELECT * FROM @extschema@.pay_stats_counters()),
    stuck_before AS (
        SELECT pg_catalog.now() OPERATOR(pg_catalog.-) (SELECT c.stuck_after FROM counters AS c) AS at),
    -- The payments PROCESSING now: the fold's set less its rows the unfolded
    -- ones changed, and the unfolded ones entering PROCESSING.  Read by the
    -- set's index, a few rows however large it is: those entered before a
    -- time are the ordinal of its last row before it, and the oldest is
    -- among its first rows, one more than it has changed.
    changed AS (
        SELECT p.since FROM latest AS l
        JOIN @extschema@.pay_stats_processing AS p ON p.bizno OPERATOR(pg_catalog.=) l.bizno),
    entered AS (
        SELECT l.at AS since FROM latest AS l
        WHERE l.to_status OPERATOR(pg_catalog.=) 'PROCESSING'::@extschema@.pay_status),
    processing_summary AS (
        SELECT COALESCE((SELECT p.ordinal FROM @extschema@.pay_stats_processing AS p
                         WHERE p.since OPERATOR(pg_catalog.<) (SELECT t.at FROM stuck_before AS t)
                         ORDER BY p.since DESC, p.bizno DESC LIMIT 1), 0)
               OPERATOR(pg_catalog.-)
               (SELECT pg_catalog.count(*) FROM changed AS c
                WHERE c.since OPERATOR(pg_catalog.<) (SELECT t.at FROM stuck_before AS t))
               OPERATOR(pg_catalog.+)
               (SELECT pg_catalog.count(*) FROM entered AS e
                WHERE e.since OPERATOR(pg_catalog.<) (SELECT t.at FROM stuck_before AS t)) AS stuck,
               LEAST((SELECT pg_catalog.min(f.since)
                      FROM (SELECT p.bizno, p.since FROM @extschema@.pay_stats_processing AS p
                            ORDER BY p.since, p.bizno
                            LIMIT (SELECT pg_catalog.count(*) FROM changed) OPERATOR(pg_catalog.+) 1) AS f
                      WHERE NOT EXISTS (SELECT FROM latest AS l WHERE l.bizno OPERATOR(pg_catalog.=) f.bizno)),
                     (SELECT pg_catalog.min(e.since) FROM entered AS e)) AS oldest)
    SELECT s.status,
           (SELECT COALESCE(pg_catalog.sum(m.n), 0) FROM moves AS m
            WHERE m.status OPERATOR(pg_catalog.=) s.status)::bigint,
           CASE WHEN s.status OPERATOR(pg_catalog.=) 'PROCESSING' THEN
               (SELECT p.stuck FROM processing_summary AS p)
           END,
           CASE WHEN s.status OPERATOR(pg_catalog.=) 'PROCESSING' THEN
               (SELECT p.oldest FROM processing_summary AS p)
           END,
           CASE WHEN s.status OPERATOR(pg_catalog.=) 'INIT' THEN
               (SELECT COALESCE(pg_catalog.sum(c.n), 0) FROM counts AS c
                WHERE c.from_status OPERATOR(pg_catalog.=) 'FAILED'
                  AND c.to_status OPERATOR(pg_catalog.=) 'INIT')::bigint
           END,
           CASE s.status
               WHEN 'SUCCESS' THEN (SELECT c.already_succeeded FROM counters AS c)
               WHEN 'PROCESSING' THEN (SELECT c.in_progress FROM counters AS c)
           END,
           (SELECT c.stats_reset FROM counters AS c),
           (SELECT COALESCE(pg_catalog.sum(m.n), 0) FROM moves AS m
            WHERE m.status OPERATOR(pg_catalog.=) s.status AND m.refund)::bigint,
           CASE WHEN s.status OPERATOR(pg_catalog.=) 'SUCCESS' THEN
               (SELECT COALESCE(pg_catalog.sum(c.n), 0) FROM counts AS c
                WHERE c.second_charge IN ('reported', 'found'))::bigint
           END,
           CASE WHEN s.status OPERATOR(pg_catalog.=) 'SUCCESS' THEN
               (SELECT COALESCE(pg_catalog.sum(c.n) FILTER (WHERE c.second_charge OPERATOR(pg_catalog.=) 'reported'), 0)
                       OPERATOR(pg_catalog.-)
                       COALESCE(pg_catalog.sum(c.n) FILTER (WHERE c.second_charge OPERATOR(pg_catalog.=) 'confirmed'), 0)
                FROM counts AS c)::bigint
           END,
           k.authorizations::bigint, k.captures::bigint, k.voids::bigint, k.increments::bigint
    FROM pg_catalog.unnest(pg_catalog.enum_range(NULL::@extschema@.pay_status)) AS s(status),
         LATERAL (SELECT COALESCE(pg_catalog.sum(m.n) FILTER (WHERE m.kind OPERATOR(pg_catalog.=) 'AUTHORIZATION'), 0)
                             AS authorizations,
                         COALESCE(pg_catalog.sum(m.n) FILTER (WHERE m.kind OPERATOR(pg_catalog.=) ANY ('{CAPTURE,FINAL_CAPTURE}')), 0)
                             AS captures,
                         COALESCE(pg_catalog.sum(m.n) FILTER (WHERE m.kind OPERATOR(pg_catalog.=) 'VOID'), 0) AS voids,
                         COALESCE(pg_catalog.sum(m.n) FILTER (WHERE m.kind OPERATOR(pg_catalog.=) 'INCREMENT'), 0)
                             AS increments
                  FROM moves AS m
                  WHERE m.status OPERATOR(pg_catalog.=) s.status) AS k
    ORDER BY s.status;
END
$$
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = @extschema@, pg_temp SET jit = off;

COMMENT ON FUNCTION @extschema@.pay_stats_read() IS
'What the view pay_stats shows, from the maintained counts';

REVOKE ALL ON FUNCTION @extschema@.pay_stats_read() FROM PUBLIC;

CREATE VIEW @extschema@.pay_stats AS
    SELECT * FROM @extschema@.pay_stats_read();

COMMENT ON VIEW @extschema@.pay_stats IS
'Per status: payments (refunds included); PROCESSING: stuck ones and the oldest one''s start; INIT: resets ever; SUCCESS and PROCESSING: the duplicate answers pay_begin gave since stats_reset; refunds: how many of the payments are refunds; SUCCESS: second charges ever and those no statement confirmed; authorizations, captures (final ones included), voids, increments: how many of the payments are rows of the card flow of each kind';

-- The card flow's money, per currency, from the same counts: what holds
-- placed (authorizations and increments entering SUCCESS) and what captures
-- took (captures and final captures entering SUCCESS), ever, the archive's
-- rows included.  Each is a sum of the amounts its journal rows carry, so
-- it costs what pay_stats costs, however large the ledger.
CREATE FUNCTION @extschema@.pay_stats_amounts_read(OUT currency text, OUT authorized numeric,
    OUT captured numeric)
RETURNS SETOF record
AS $$
DECLARE
    state @extschema@.pay_stats_state;
BEGIN
    state := @extschema@.pay_stats_usable_state();
    IF state IS NULL THEN
        RETURN QUERY
        SELECT c.currency,
               COALESCE(pg_catalog.sum(c.amount) FILTER (WHERE c.kind OPERATOR(pg_catalog.=) ANY ('{AUTHORIZATION,INCREMENT}')), 0),
               COALESCE(pg_catalog.sum(c.amount) FILTER (WHERE c.kind OPERATOR(pg_catalog.=) ANY ('{CAPTURE,FINAL_CAPTURE}')), 0)
        FROM (SELECT j.from_status, j.to_status, l.kind, j.currency, j.amount
              FROM @extschema@.pay_journal AS j
              JOIN @extschema@.pay_ledger AS l ON l.bizno OPERATOR(pg_catalog.=) j.bizno
              WHERE l.kind IS NOT NULL
              UNION ALL
              SELECT a.from_status, a.to_status, a.kind, a.currency, a.amount
              FROM @extschema@.pay_archive_counts AS a
              WHERE a.kind IS NOT NULL) AS c
        WHERE c.to_status OPERATOR(pg_catalog.=) 'SUCCESS'::@extschema@.pay_status
          AND c.from_status IS DISTINCT FROM 'SUCCESS'::@extschema@.pay_status
        GROUP BY 1
        ORDER BY 1;
        RETURN;
    END IF;

    RETURN QUERY
    SELECT c.currency,
           COALESCE(pg_catalog.sum(c.amount) FILTER (WHERE c.kind OPERATOR(pg_catalog.=) ANY ('{AUTHORIZATION,INCREMENT}')), 0),
           COALESCE(pg_catalog.sum(c.amount) FILTER (WHERE c.kind OPERATOR(pg_catalog.=) ANY ('{CAPTURE,FINAL_CAPTURE}')), 0)
    FROM (SELECT c.from_status, c.to_status, c.kind, c.currency, c.amount
          FROM @extschema@.pay_stats_counts AS c
          WHERE c.kind IS NOT NULL
          UNION ALL
          SELECT u.from_status, u.to_status, u.kind, u.currency, u.amount
          FROM @extschema@.pay_stats_unfolded(state.counted_from, state.counted) AS u
          WHERE u.kind IS NOT NULL) AS c
    WHERE c.to_status OPERATOR(pg_catalog.=) 'SUCCESS'::@extschema@.pay_status
      AND c.from_status IS DISTINCT FROM 'SUCCESS'::@extschema@.pay_status
    GROUP BY 1
    ORDER BY 1;
END
$$
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = @extschema@, pg_temp SET jit = off;

COMMENT ON FUNCTION @extschema@.pay_stats_amounts_read() IS
'What the view pay_stats_amounts shows, from the maintained counts';

-- The holds the ledger keeps now, by why each is closed (NULL: open), per
-- currency: how many and what of them is neither captured nor in flight --
-- what an open hold may still capture, what a void or a final capture
-- released, what an expired hold no void released.  Expiry changes no row
-- (it is checked when a step is claimed), so this is a query, not a count:
-- it reads every authorization the ledger holds (through
-- pay_ledger_authorization_expires_at, payments left out) and each one's
-- steps, and the archive's are gone from it.
CREATE FUNCTION @extschema@.pay_stats_holds(OUT currency text, OUT closed_reason text, OUT holds bigint,
    OUT uncaptured numeric)
RETURNS SETOF record
AS $$
    SELECT a.currency, b.closed_reason, pg_catalog.count(*),
           pg_catalog.sum(b.authorized OPERATOR(pg_catalog.-) b.captured OPERATOR(pg_catalog.-) b.capture_in_flight)
    FROM @extschema@.pay_ledger AS a
    CROSS JOIN LATERAL @extschema@.pay_authorization_balance(a.bizno) AS b
    WHERE a.expires_at IS NOT NULL
      AND a.kind OPERATOR(pg_catalog.=) 'AUTHORIZATION'
      AND a.status OPERATOR(pg_catalog.=) 'SUCCESS'::@extschema@.pay_status
    GROUP BY 1, 2
    ORDER BY 1, 2 NULLS FIRST
$$
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = @extschema@, pg_temp;

COMMENT ON FUNCTION @extschema@.pay_stats_holds() IS
'The holds of the authorizations in the ledger, per currency and closed_reason (NULL: open): how many, and what is neither captured nor in flight; a query over every authorization, not a count';

REVOKE ALL ON FUNCTION @extschema@.pay_stats_amounts_read(), @extschema@.pay_stats_holds() FROM PUBLIC;

-- What the card flow's holds placed and its captures took, per currency.
CREATE VIEW @extschema@.pay_stats_amounts AS
    SELECT * FROM @extschema@.pay_stats_amounts_read();

COMMENT ON VIEW @extschema@.pay_stats_amounts IS
'Per currency, ever (the archive''s included): authorized, the amounts of the authorizations and increments that succeeded; captured, of the captures that succeeded; from the maintained counts';

-- The roles that could read pay_stats read it again, and what 1.4 counts
-- beside it: the card flow's figures come from the same counts (an
-- operator's role, and a monitoring role made as doc/monitoring.md made it,
-- which 1.4's queries file reads them with).
DO $$
DECLARE
    noted record;
BEGIN
    FOR noted IN SELECT r.grantee, r.granted FROM pg_temp.pay_stats_readers AS r LOOP
        IF noted.granted OPERATOR(pg_catalog.=) 'view' THEN
            EXECUTE pg_catalog.format('GRANT SELECT ON @extschema@.pay_stats, @extschema@.pay_stats_amounts TO %s',
                                      noted.grantee);
        ELSE
            EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION @extschema@.pay_stats_read(), '
                                      '@extschema@.pay_stats_amounts_read(), @extschema@.pay_stats_holds() TO %s',
                                      noted.grantee);
        END IF;
    END LOOP;
END
$$;

DROP TABLE pg_temp.pay_stats_readers;

-- pay_archive counts the rows it moves by the card flow's kind too, which
-- it reads from the ledger (the archive does not keep it).
-- The table of every row moved is built in the order the guard needs: the
-- archive receives the rows first, then they are deleted from the journal
-- and the ledger (the refunds before their payment).  Row texts and
-- digests are taken with TimeZone UTC and DateStyle ISO, as
-- pay_archive_verify takes them.  A batch's joins and sorts of a million
-- keys fit in work_mem = 128MB, which a nightly job may take.
CREATE OR REPLACE FUNCTION @extschema@.pay_archive(before timestamptz, max_rows integer DEFAULT 100000)
RETURNS bigint
AS $$
DECLARE
    folded_below bigint;
    unready text[];
    locked text[];
    chosen text[];
    moved text[];
    moved_months date[];
    moved_refunds boolean[];
    hashes bigint[];
    archive_month date;
    moved_journal_rows bigint;
BEGIN
    IF before IS NULL OR max_rows IS NULL THEN
        RAISE EXCEPTION 'before and max_rows must not be null' USING ERRCODE = '22004';
    END IF;
    IF before OPERATOR(pg_catalog.>) pg_catalog.now() THEN
        RAISE EXCEPTION 'before must not be later than now'
            USING ERRCODE = '22023',
                  HINT = 'Archive what was settled before a moment past, such as now() - interval ''90 days''.';
    END IF;
    IF max_rows OPERATOR(pg_catalog.<) 1 THEN
        RAISE EXCEPTION 'max_rows must be at least 1' USING ERRCODE = '22023';
    END IF;
    -- What a payment is judged by (its refunds, its second charges) must
    -- be what committed before its lock was taken: under a snapshot of the
    -- transaction's start, a refund claimed since would stay behind in the
    -- ledger without its payment.
    IF pg_catalog.current_setting('transaction_isolation') OPERATOR(pg_catalog.<>) 'read committed' THEN
        RAISE EXCEPTION 'pay_archive runs only at READ COMMITTED, not %',
                        pg_catalog.upper(pg_catalog.current_setting('transaction_isolation'))
            USING ERRCODE = '25000',
                  HINT = 'Call it in a transaction of its own at READ COMMITTED (SET TRANSACTION ISOLATION LEVEL READ COMMITTED first where the default is another).';
    END IF;
    BEGIN
        LOCK TABLE @extschema@.pay_archive_runs IN SHARE ROW EXCLUSIVE MODE NOWAIT;
    EXCEPTION WHEN lock_not_available THEN
        RAISE EXCEPTION 'another pay_archive is running'
            USING ERRCODE = '55P03', HINT = 'Archive again once it has committed.';
    END;

    -- pay_stats counts what the journal held: what leaves it must be
    -- counted first
    PERFORM @extschema@.pay_stats_refresh(0);
    SELECT s.counted_from INTO folded_below FROM @extschema@.pay_stats_state AS s
    WHERE @extschema@.pay_stats_counts_usable(s.system_identifier);
    unready := ARRAY(SELECT @extschema@.pay_archive_unready(before, folded_below, '{}'));

    -- Lock the payments to move, skipping any a claim holds; then their
    -- refunds.  Judged again under the locks, with a snapshot that sees
    -- whatever committed before them: no refund can start, retry or settle
    -- meanwhile (a new refund locks its payment first).  Payments found
    -- unready only then (an unconfirmed second charge) are passed over and
    -- the next are locked, so that 0 means nothing is left to move.
    LOOP
        locked := ARRAY(
            SELECT l.bizno FROM @extschema@.pay_ledger AS l
            WHERE l.parent IS NULL
              AND l.status OPERATOR(pg_catalog.<>) 'PROCESSING'::@extschema@.pay_status
              AND l.updated_at OPERATOR(pg_catalog.<) before
              AND l.bizno OPERATOR(pg_catalog.<>) ALL (unready)
            LIMIT max_rows
            FOR UPDATE SKIP LOCKED);
        IF pg_catalog.cardinality(locked) OPERATOR(pg_catalog.=) 0 THEN
            RETURN 0;
        END IF;
        PERFORM FROM pg_catalog.unnest(locked) AS c(bizno)
        JOIN @extschema@.pay_ledger AS r ON r.parent OPERATOR(pg_catalog.=) c.bizno
        FOR UPDATE OF r;
        unready := ARRAY(SELECT pg_catalog.unnest(unready)
                         UNION
                         SELECT @extschema@.pay_archive_unready(before, folded_below, locked));
        chosen := ARRAY(
            SELECT l.bizno FROM pg_catalog.unnest(locked) AS c(bizno)
            JOIN @extschema@.pay_ledger AS l ON l.bizno OPERATOR(pg_catalog.=) c.bizno
            WHERE l.status OPERATOR(pg_catalog.<>) 'PROCESSING'::@extschema@.pay_status
              AND l.updated_at OPERATOR(pg_catalog.<) before
              AND l.bizno OPERATOR(pg_catalog.<>) ALL (unready));
        EXIT WHEN pg_catalog.cardinality(chosen) OPERATOR(pg_catalog.>) 0;
    END LOOP;

    -- every row to move, refunds first, with its payment's month
    SELECT pg_catalog.array_agg(m.bizno ORDER BY m.is_payment, m.bizno),
           pg_catalog.array_agg(m.month ORDER BY m.is_payment, m.bizno),
           pg_catalog.array_agg(NOT m.is_payment ORDER BY m.is_payment, m.bizno)
    INTO moved, moved_months, moved_refunds
    FROM (SELECT l.bizno, l.parent IS NULL AS is_payment,
                 pg_catalog.date_trunc('month',
                     pg_catalog.max(l.updated_at) OVER (PARTITION BY COALESCE(l.parent, l.bizno))
                     AT TIME ZONE 'UTC')::date AS month
          FROM (SELECT l.* FROM pg_catalog.unnest(chosen) AS c(bizno)
                JOIN @extschema@.pay_ledger AS l ON l.bizno OPERATOR(pg_catalog.=) c.bizno
                UNION ALL
                SELECT l.* FROM pg_catalog.unnest(chosen) AS c(bizno)
                JOIN @extschema@.pay_ledger AS l ON l.parent OPERATOR(pg_catalog.=) c.bizno) AS l) AS m;
    FOR archive_month IN SELECT DISTINCT m.month FROM pg_catalog.unnest(moved_months) AS m(month) LOOP
        PERFORM @extschema@.pay_archive_partitions(archive_month);
    END LOOP;

    -- into the archive, counted and digested per month
    WITH rows AS (SELECT * FROM ROWS FROM (pg_catalog.unnest(moved), pg_catalog.unnest(moved_months)) AS m(bizno, month)),
    archived AS (
        INSERT INTO @extschema@.pay_ledger_archive
            (bizno, prefix, biz_id, status, amount, currency, attempt, channel_ref, last_error,
             created_at, updated_at, processing_since, note, parent, refund_key, response,
             month, archived_at)
        SELECT l.bizno, l.prefix, l.biz_id, l.status, l.amount, l.currency, l.attempt,
               l.channel_ref, l.last_error, l.created_at, l.updated_at, l.processing_since,
               l.note, l.parent, l.refund_key, l.response, r.month, pg_catalog.now()
        FROM rows AS r
        JOIN @extschema@.pay_ledger AS l ON l.bizno OPERATOR(pg_catalog.=) r.bizno
        RETURNING *)
    INSERT INTO @extschema@.pay_archive_months AS m
        (month, payments, ledger_rows, journal_rows, ledger_digest, journal_digest)
    SELECT a.month, pg_catalog.count(*) FILTER (WHERE a.parent IS NULL), pg_catalog.count(*), 0,
           pg_catalog.sum(pg_catalog.hashtextextended(a::text COLLATE "C", 0)::numeric), 0
    FROM archived AS a
    GROUP BY a.month
    ON CONFLICT (month) DO UPDATE
    SET payments = m.payments OPERATOR(pg_catalog.+) excluded.payments,
        ledger_rows = m.ledger_rows OPERATOR(pg_catalog.+) excluded.ledger_rows,
        ledger_digest = m.ledger_digest OPERATOR(pg_catalog.+) excluded.ledger_digest;

    WITH rows AS (SELECT * FROM ROWS FROM (pg_catalog.unnest(moved), pg_catalog.unnest(moved_months),
                                           pg_catalog.unnest(moved_refunds)) AS m(bizno, month, refund)),
    archived AS (
        INSERT INTO @extschema@.pay_journal_archive
            (seq, bizno, attempt, from_status, to_status, amount, currency, at, txid, actor, note,
             channel_ref, second_charge, month)
        SELECT j.seq, j.bizno, j.attempt, j.from_status, j.to_status, j.amount, j.currency, j.at,
               j.txid, j.actor, j.note, j.channel_ref, j.second_charge, r.month
        FROM rows AS r
        JOIN @extschema@.pay_journal AS j ON j.bizno OPERATOR(pg_catalog.=) r.bizno
        RETURNING *),
    digests AS (
        INSERT INTO @extschema@.pay_archive_months AS m
            (month, payments, ledger_rows, journal_rows, ledger_digest, journal_digest)
        SELECT a.month, 0, 0, pg_catalog.count(*), 0,
               pg_catalog.sum(pg_catalog.hashtextextended(a::text COLLATE "C", 0)::numeric)
        FROM archived AS a
        GROUP BY a.month
        ON CONFLICT (month) DO UPDATE
        SET journal_rows = m.journal_rows OPERATOR(pg_catalog.+) excluded.journal_rows,
            journal_digest = m.journal_digest OPERATOR(pg_catalog.+) excluded.journal_digest
        RETURNING 1)
    -- what they counted in pay_stats, as a first fold would count them
    -- (the card flow's kind read from the ledger, which the archive does
    -- not keep)
    INSERT INTO @extschema@.pay_archive_counts AS c (from_status, to_status, refund, second_charge, n,
                                                     kind, currency, amount)
    SELECT a.from_status, a.to_status, r.refund,
           CASE WHEN a.second_charge IS NOT NULL
                THEN @extschema@.pay_stats_second_charge(a.bizno, a.second_charge, a.channel_ref, a.seq, 0,
                                                          '1:1:'::pg_snapshot)
           END,
           pg_catalog.count(*), l.kind,
           CASE WHEN l.kind IS NOT NULL THEN a.currency END,
           pg_catalog.sum(a.amount) FILTER (WHERE l.kind IS NOT NULL)
    FROM archived AS a
    JOIN rows AS r ON r.bizno OPERATOR(pg_catalog.=) a.bizno
    JOIN @extschema@.pay_ledger AS l ON l.bizno OPERATOR(pg_catalog.=) a.bizno
    GROUP BY 1, 2, 3, 4, 6, 7
    ON CONFLICT ON CONSTRAINT pay_archive_counts_key
    DO UPDATE SET n = c.n OPERATOR(pg_catalog.+) excluded.n,
                  amount = c.amount OPERATOR(pg_catalog.+) excluded.amount;

    -- what outlives the archive: the hash of each payment's identity
    hashes := ARRAY(
        SELECT @extschema@.pay_archive_key_hash(m.bizno)
        FROM pg_catalog.unnest(moved) AS m(bizno));
    PERFORM @extschema@.pay_archive_add_keys(hashes);

    DELETE FROM @extschema@.pay_journal AS j
    USING pg_catalog.unnest(moved) AS m(bizno)
    WHERE j.bizno OPERATOR(pg_catalog.=) m.bizno;
    GET DIAGNOSTICS moved_journal_rows = ROW_COUNT;
    -- pay_stats' counts learn of the deletions here, all at once (the
    -- journal trigger leaves the rows the archive received to it)
    WITH gone AS (
        DELETE FROM @extschema@.pay_ledger AS l
        USING pg_catalog.unnest(chosen) AS c(bizno)
        WHERE l.parent OPERATOR(pg_catalog.=) c.bizno
        RETURNING l.bizno, l.status, l.kind)
    INSERT INTO @extschema@.pay_stats_deletions (bizno, status, refund, kind)
    SELECT g.bizno, g.status, true, g.kind FROM gone AS g;
    WITH gone AS (
        DELETE FROM @extschema@.pay_ledger AS l
        USING pg_catalog.unnest(chosen) AS c(bizno)
        WHERE l.bizno OPERATOR(pg_catalog.=) c.bizno
        RETURNING l.bizno, l.status, l.kind)
    INSERT INTO @extschema@.pay_stats_deletions (bizno, status, refund, kind)
    SELECT g.bizno, g.status, false, g.kind FROM gone AS g;

    INSERT INTO @extschema@.pay_archive_runs (before, payments, ledger_rows, journal_rows)
    VALUES (before, pg_catalog.cardinality(chosen), pg_catalog.cardinality(moved), moved_journal_rows);
    RETURN pg_catalog.cardinality(chosen);
END
$$
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = @extschema@, pg_temp SET TimeZone = 'UTC' SET DateStyle = 'ISO, YMD'
SET extra_float_digits = 1 SET jit = off SET work_mem = '128MB';

COMMENT ON FUNCTION @extschema@.pay_archive(timestamptz, integer) IS
'Move up to max_rows settled payments whose last change (and their refunds'') is before "before" out of the ledger and the journal into the archive; returns how many; call again until 0';

/* The roles 1.3 granted get 1.4's new functions ----------------------- */

-- An application's role and an operator's keep working across the update:
-- a role 1.3's pay_grant gave pay_open_claim gets what 1.4's pay_grant adds
-- (the batches, the card flow's openers and balance), a role 1.3's
-- pay_grant_operator gave pay_reconcile what 1.4's pay_grant_operator adds
-- (the card flow's balance; its figures went with pay_stats, above).  The
-- functions alone: granting again all that pay_grant_operator grants would
-- give the views it grants SELECT on initial privileges a fresh
-- installation has not.
DO $$
DECLARE
    grantee record;
BEGIN
    FOR grantee IN
        SELECT a.grantee::pg_catalog.regrole AS role,
               pg_catalog.bool_or(p.oid OPERATOR(pg_catalog.=)
                   '@extschema@.pay_open_claim(text, text, numeric, text)'::pg_catalog.regprocedure) AS application,
               pg_catalog.bool_or(p.oid OPERATOR(pg_catalog.=)
                   '@extschema@.pay_reconcile(regclass, boolean, timestamptz)'::pg_catalog.regprocedure) AS operator
        FROM pg_catalog.pg_proc AS p, pg_catalog.aclexplode(p.proacl) AS a
        WHERE p.oid OPERATOR(pg_catalog.=) ANY (ARRAY[
                  '@extschema@.pay_open_claim(text, text, numeric, text)',
                  '@extschema@.pay_reconcile(regclass, boolean, timestamptz)']::pg_catalog.regprocedure[])
          AND a.privilege_type OPERATOR(pg_catalog.=) 'EXECUTE'
          AND a.grantee OPERATOR(pg_catalog.<>) p.proowner
          AND a.grantee OPERATOR(pg_catalog.<>) 0
        GROUP BY a.grantee
    LOOP
        IF grantee.application THEN
            EXECUTE pg_catalog.format(
                'GRANT EXECUTE ON FUNCTION '
                '@extschema@.pay_open_claim_many(text, text[], numeric[], text), '
                '@extschema@.pay_settle_many(text[], bigint[], @extschema@.pay_status[], text[], text[]), '
                '@extschema@.pay_open_authorization(text, text, numeric, text, interval), '
                '@extschema@.pay_capture_open(text, text, numeric, boolean), '
                '@extschema@.pay_void_open(text, text), '
                '@extschema@.pay_increment_open(text, text, numeric), '
                '@extschema@.pay_authorization_balance(text) TO %s', grantee.role);
        END IF;
        IF grantee.operator THEN
            EXECUTE pg_catalog.format(
                'GRANT EXECUTE ON FUNCTION @extschema@.pay_authorization_balance(text) TO %s', grantee.role);
        END IF;
    END LOOP;
END
$$;

-- Last: the initial privileges (pg_init_privs) back to what the complete
-- script records, the owner's and PUBLIC's alone.  PostgreSQL records the
-- whole ACL of every object an update script creates or replaces among its
-- initial privileges, the grants of the DBA's roles with it, and pg_dump
-- leaves those out of a dump: without this a restored application could
-- claim payments it could not settle (the reasoning in full is with the
-- same step of idempotent_pay--1.2--1.3.sql).
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
                     ORDER BY k.n) AS kept
        FROM pg_catalog.pg_init_privs AS i
        WHERE EXISTS (SELECT FROM pg_catalog.pg_depend AS d, pg_catalog.pg_extension AS e
                      WHERE d.classid OPERATOR(pg_catalog.=) i.classoid
                        AND d.objid OPERATOR(pg_catalog.=) i.objoid
                        AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass
                        AND d.refobjid OPERATOR(pg_catalog.=) e.oid
                        AND d.deptype OPERATOR(pg_catalog.=) 'e'
                        AND e.extname OPERATOR(pg_catalog.=) 'idempotent_pay')
           OR (i.classoid OPERATOR(pg_catalog.=) 'pg_catalog.pg_namespace'::pg_catalog.regclass
               AND i.objoid OPERATOR(pg_catalog.=) '@extschema@'::pg_catalog.regnamespace)
    LOOP
        CONTINUE WHEN entry.kept OPERATOR(pg_catalog.=) entry.initprivs;
        IF pg_catalog.cardinality(entry.kept) OPERATOR(pg_catalog.=) 0 THEN
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

-- The views pay_stats (made again) and pay_stats_amounts (new) have no
-- initial privileges in a fresh installation, which grants nothing on them;
-- granting them again to the roles that read pay_stats recorded the owner's
-- default privileges as theirs, which the step above keeps.
DELETE FROM pg_catalog.pg_init_privs AS i
WHERE i.classoid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
  AND i.objoid OPERATOR(pg_catalog.=) ANY (ARRAY['@extschema@.pay_stats',
                                                 '@extschema@.pay_stats_amounts']::pg_catalog.regclass[]);
