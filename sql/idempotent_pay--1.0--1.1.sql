/* idempotent_pay 1.0 -> 1.1: reconciliation, stats, notifications */

\echo Use "ALTER EXTENSION idempotent_pay UPDATE TO '1.1'" to load this file. \quit

-- Reconciliation against the bank's statement

CREATE FUNCTION @extschema@.pay_reconcile(statement regclass, settle boolean DEFAULT false,
                                          since timestamptz DEFAULT NULL)
RETURNS TABLE (kind text, bizno text, ledger_status @extschema@.pay_status, ledger_amount numeric,
               bank_amount numeric, bank_rows integer, detail text)
AS $$
DECLARE
    found record;
    previous_note text;
BEGIN
    IF statement IS NULL OR settle IS NULL THEN
        RAISE EXCEPTION 'statement and settle must not be null' USING ERRCODE = '22004';
    END IF;

    FOR found IN EXECUTE pg_catalog.format($query$
        WITH bank AS MATERIALIZED (
            SELECT s.bizno::pg_catalog.text AS bizno,
                   pg_catalog.count(*)::integer AS bank_rows,
                   pg_catalog.count(*) FILTER (WHERE s.status OPERATOR(pg_catalog.=) 'SUCCESS') AS successes,
                   pg_catalog.count(*) FILTER (WHERE s.status OPERATOR(pg_catalog.=) 'FAILED') AS failures,
                   pg_catalog.sum(s.amount) FILTER (WHERE s.status OPERATOR(pg_catalog.=) 'SUCCESS') AS charged,
                   pg_catalog.min(s.amount) FILTER (WHERE s.status OPERATOR(pg_catalog.=) 'SUCCESS') AS least_amount,
                   pg_catalog.max(s.amount) FILTER (WHERE s.status OPERATOR(pg_catalog.=) 'SUCCESS') AS greatest_amount,
                   pg_catalog.min(s.currency) FILTER (WHERE s.status OPERATOR(pg_catalog.=) 'SUCCESS') AS least_currency,
                   pg_catalog.max(s.currency) FILTER (WHERE s.status OPERATOR(pg_catalog.=) 'SUCCESS') AS greatest_currency,
                   pg_catalog.min(s.channel_ref) FILTER (WHERE s.status OPERATOR(pg_catalog.=) 'SUCCESS') AS channel_ref
            FROM %s AS s
            GROUP BY s.bizno
        ), joined AS MATERIALIZED (
            SELECT COALESCE(l.bizno, b.bizno) AS bizno, l.status, l.amount, l.currency, l.updated_at,
                   COALESCE(b.bank_rows, 0) AS bank_rows, COALESCE(b.successes, 0) AS successes,
                   COALESCE(b.failures, 0) AS failures, b.charged, b.least_amount, b.greatest_amount,
                   b.least_currency, b.greatest_currency, b.channel_ref
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
    $query$, statement) USING since
    LOOP
        kind := found.kind;
        bizno := found.bizno;
        ledger_status := found.status;
        ledger_amount := found.amount;
        bank_amount := found.charged;
        bank_rows := found.bank_rows;
        detail := found.detail;

        IF settle AND found.kind OPERATOR(pg_catalog.=) 'UNRESOLVED_PROCESSING' THEN
            previous_note := pg_catalog.current_setting('idempotent_pay.journal_note');
            PERFORM pg_catalog.set_config('idempotent_pay.journal_note', 'settled by reconciliation', true);
            BEGIN
                IF found.successes OPERATOR(pg_catalog.>) 0 THEN
                    ledger_status := @extschema@.pay_succeed(found.bizno, found.channel_ref);
                ELSE
                    ledger_status := @extschema@.pay_fail(found.bizno,
                        'settled by reconciliation: the bank reports FAILED');
                END IF;
                detail := detail OPERATOR(pg_catalog.||) ': settled as ' OPERATOR(pg_catalog.||) ledger_status;
            EXCEPTION WHEN OTHERS THEN
                detail := detail OPERATOR(pg_catalog.||) ': not settled, ' OPERATOR(pg_catalog.||) SQLERRM;
            END;
            PERFORM pg_catalog.set_config('idempotent_pay.journal_note', previous_note, true);
        END IF;
        RETURN NEXT;
    END LOOP;
END
$$
LANGUAGE plpgsql VOLATILE SET search_path = @extschema@, pg_temp;

COMMENT ON FUNCTION @extschema@.pay_reconcile(regclass, boolean, timestamptz) IS
'Compare the ledger with a bank statement (bizno, amount, currency, status, channel_ref); settle => true settles PROCESSING payments the bank has answered';

REVOKE ALL ON FUNCTION @extschema@.pay_reconcile(regclass, boolean, timestamptz) FROM PUBLIC;

-- Stats

CREATE FUNCTION @extschema@.pay_stats_counters(OUT stuck_after interval, OUT already_succeeded bigint,
                                               OUT in_progress bigint, OUT stats_reset timestamptz)
RETURNS record
AS 'MODULE_PATHNAME', 'pay_stats_counters'
LANGUAGE C VOLATILE PARALLEL SAFE;

COMMENT ON FUNCTION @extschema@.pay_stats_counters() IS
'idempotent_pay.stuck_after and the shared counters of duplicate answers (NULL unless preloaded)';

CREATE FUNCTION @extschema@.pay_stats_reset()
RETURNS void
AS 'MODULE_PATHNAME', 'pay_stats_reset'
LANGUAGE C VOLATILE;

COMMENT ON FUNCTION @extschema@.pay_stats_reset() IS
'Start the counters of pay_stats again from zero';

REVOKE ALL ON FUNCTION @extschema@.pay_stats_reset() FROM PUBLIC;

CREATE VIEW @extschema@.pay_stats AS
    WITH counters AS (SELECT * FROM @extschema@.pay_stats_counters())
    SELECT s.status,
           pg_catalog.count(l.bizno) AS payments,
           pg_catalog.min(l.updated_at) AS oldest_updated_at,
           CASE WHEN s.status OPERATOR(pg_catalog.=) 'PROCESSING' THEN
               pg_catalog.count(l.bizno) FILTER (
                   WHERE l.processing_since OPERATOR(pg_catalog.<)
                         (pg_catalog.now() OPERATOR(pg_catalog.-) (SELECT c.stuck_after FROM counters AS c)))
           END AS stuck,
           CASE s.status
               WHEN 'INIT' THEN (SELECT pg_catalog.count(*) FROM @extschema@.pay_journal AS j
                                 WHERE j.from_status OPERATOR(pg_catalog.=) 'FAILED'
                                   AND j.to_status OPERATOR(pg_catalog.=) 'INIT'
                                   AND j.at OPERATOR(pg_catalog.>=)
                                       COALESCE((SELECT c.stats_reset FROM counters AS c), '-infinity'))
           END AS resets,
           CASE s.status
               WHEN 'SUCCESS' THEN (SELECT c.already_succeeded FROM counters AS c)
               WHEN 'PROCESSING' THEN (SELECT c.in_progress FROM counters AS c)
           END AS duplicate_answers,
           (SELECT c.stats_reset FROM counters AS c) AS stats_reset
    FROM pg_catalog.unnest(pg_catalog.enum_range(NULL::@extschema@.pay_status)) AS s(status)
    LEFT JOIN @extschema@.pay_ledger AS l ON l.status OPERATOR(pg_catalog.=) s.status
    GROUP BY s.status
    ORDER BY s.status;

COMMENT ON VIEW @extschema@.pay_stats IS
'Per status: payments, oldest update; PROCESSING: stuck ones; INIT: resets; SUCCESS and PROCESSING: the duplicate answers pay_begin gave since stats_reset';
