-- Hardening: what a misuse, an odd input or a DBA's change must never do --
-- crash a backend, spin, accept what the machine forbids, or drop a value.

-- Claims here run inside transaction blocks or subtransactions on purpose
-- (rolled back, or caught); the refusal of that is claim_durable's test.
SET idempotent_pay.claim_in_transaction = allow;

-- The DBA's DDL on the extension's tables below is maintenance, which
-- idempotent_pay.maintenance lets through (and pay_maintenance_log records).
SET idempotent_pay.maintenance = on;

-- 1. The trigger protocol.  Called directly or fired the wrong way, every
-- trigger function of the extension answers 39P01; the backend lives on.
SELECT outcome($$SELECT pay_ledger_journal()$$) AS journal,
       outcome($$SELECT pay_ledger_bookkeeping()$$) AS bookkeeping,
       outcome($$SELECT pay_guard()$$) AS guard;
SELECT 'still connected' AS backend;

CREATE TABLE misfired (id integer PRIMARY KEY, status text);
CREATE FUNCTION fire(create_trigger text) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE 'DROP TRIGGER IF EXISTS misfire ON misfired';
    EXECUTE create_trigger;
    RETURN outcome($q$INSERT INTO misfired VALUES (1, 'INIT') RETURNING 'ok'$q$) || ' / ' ||
           coalesce(error_message($q$INSERT INTO misfired VALUES (1, 'INIT')$q$), 'no error');
END
$$;
SELECT fire($$CREATE TRIGGER misfire BEFORE INSERT ON misfired
              FOR EACH STATEMENT EXECUTE FUNCTION pay_guard('status')$$) AS guard_per_statement;
SELECT fire($$CREATE TRIGGER misfire AFTER INSERT ON misfired
              FOR EACH ROW EXECUTE FUNCTION pay_guard('status')$$) AS guard_after;
SELECT fire($$CREATE TRIGGER misfire BEFORE INSERT ON misfired
              FOR EACH ROW EXECUTE FUNCTION pay_ledger_bookkeeping()$$) AS bookkeeping_elsewhere;
SELECT fire($$CREATE TRIGGER misfire AFTER INSERT ON misfired
              FOR EACH ROW EXECUTE FUNCTION pay_ledger_journal()$$) AS journal_elsewhere;
SELECT fire($$CREATE TRIGGER misfire BEFORE INSERT ON misfired
              FOR EACH ROW EXECUTE FUNCTION pay_ledger_journal()$$) AS journal_before;
SELECT fire($$CREATE TRIGGER misfire AFTER INSERT ON misfired
              FOR EACH STATEMENT EXECUTE FUNCTION pay_ledger_journal()$$) AS journal_per_statement;
SELECT count(*) AS rows_written FROM misfired;
DROP TABLE misfired;
DROP FUNCTION fire(text);

-- On the ledger itself, a second bookkeeping trigger AFTER, or the journal
-- trigger BEFORE DELETE (it records deletions AFTER), is refused the same way.
CREATE TRIGGER misfire BEFORE DELETE ON pay_ledger
    FOR EACH ROW EXECUTE FUNCTION pay_ledger_journal();
SELECT payment_in('H-DELETE', 'INIT') AS payment;
SELECT outcome($$DELETE FROM pay_ledger WHERE bizno = 'H-DELETE' RETURNING 'deleted'$$) AS journal_on_delete;
DROP TRIGGER misfire ON pay_ledger;
SELECT 'still connected' AS backend;

-- 2. Another unique index on the ledger: a clash answers 23505 naming it, in
-- well under the statement timeout, instead of spinning.
SET statement_timeout = '10s';
CREATE UNIQUE INDEX pay_ledger_bizno_lower_idx ON pay_ledger (lower(bizno));
SELECT pay_begin('h-case', 10, 'EUR') AS first;
SELECT pay_begin('H-CASE', 10, 'EUR') AS same_but_upper;
\echo :LAST_ERROR_SQLSTATE
SELECT standing('H-CASE') AS nothing_written;
CREATE UNIQUE INDEX pay_ledger_biz_id_lower_idx ON pay_ledger (prefix, lower(biz_id));
SELECT pay_open('HCASE', 'order-1', 10, 'EUR') IS NOT NULL AS opened;
SELECT pay_open('HCASE', 'ORDER-1', 10, 'EUR') AS same_order_but_upper;
\echo :LAST_ERROR_SQLSTATE
DROP INDEX pay_ledger_bizno_lower_idx, pay_ledger_biz_id_lower_idx;
RESET statement_timeout;

-- 3. One amount rule, for the API and raw writes alike: NaN and Infinity
-- are not amounts (NaN sorts above every number, so "> 0" let it in).
SELECT amount, pay_amount_valid(amount) AS valid
FROM unnest(ARRAY[0.01, 100, 0, -1, 'NaN', 'Infinity', '-Infinity']::numeric[]) AS amount;
SELECT outcome($$INSERT INTO pay_ledger (bizno, status, amount) VALUES ('H-NAN', 'INIT', 'NaN') RETURNING 'ok'$$) AS raw_nan,
       outcome($$INSERT INTO pay_ledger (bizno, status, amount) VALUES ('H-NAN', 'INIT', 'Infinity') RETURNING 'ok'$$) AS raw_infinity,
       outcome($$INSERT INTO pay_ledger (bizno, status, amount) VALUES ('H-NAN', 'INIT', 0) RETURNING 'ok'$$) AS raw_zero,
       outcome($$INSERT INTO pay_ledger (bizno, status, currency) VALUES ('H-NAN', 'INIT', 'eur') RETURNING 'ok'$$) AS raw_currency;
SELECT outcome($$SELECT pay_begin('H-NAN', 'NaN', 'EUR')$$) AS api_nan,
       outcome($$SELECT pay_begin('H-NAN', 'Infinity', 'EUR')$$) AS api_infinity,
       outcome($$SELECT pay_open('H', 'NAN', 'NaN', 'EUR')$$) AS open_nan;
SELECT payment_in('H-AMOUNT', 'INIT') AS payment;
SELECT outcome($$UPDATE pay_ledger SET amount = 'NaN' WHERE bizno = 'H-AMOUNT' RETURNING 'ok'$$) AS raw_update_nan;
SELECT standing('H-NAN') AS nothing_written;

-- 4. Every setting is checked when it is set: a NOTIFY channel longer than
-- 63 bytes would fail every payment at NOTIFY time.
SELECT outcome($$SELECT set_config('idempotent_pay.notify_channel', repeat('c', 64), false)$$) AS channel_too_long,
       outcome($$SELECT length(set_config('idempotent_pay.notify_channel', repeat('c', 63), true))$$) AS channel_63_bytes,
       outcome($$SELECT set_config('idempotent_pay.retry_failed', 'sometimes', true)$$) AS retry_policy,
       outcome($$SELECT set_config('idempotent_pay.stuck_after', '-1', true)$$) AS stuck_after;
SELECT pay_begin('H-NOTIFY', 1, 'EUR') AS payment_still_works;

-- 5. The journal changed by a DBA.  While it has only its own columns, rows
-- go straight into heap and indexes; with a column of its own default, a
-- generated column or an INSERT trigger, through an INSERT statement that
-- honours each -- never a NULL where a default belongs, never a skipped
-- trigger.
CREATE TABLE journal_audit (seq bigint, note text);
CREATE FUNCTION audit_journal() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.journal_audit VALUES (NEW.seq, NEW.note);
    RETURN NEW;
END
$$;
ALTER TABLE pay_journal
    ADD COLUMN region text NOT NULL DEFAULT 'eu',
    ADD COLUMN recorded_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    ADD COLUMN note_length integer GENERATED ALWAYS AS (length(note)) STORED;
CREATE TRIGGER audit AFTER INSERT ON pay_journal FOR EACH ROW EXECUTE FUNCTION audit_journal();
SELECT pay_begin('H-JOURNAL', 10, 'EUR') AS begin,
       pay_fail('H-JOURNAL', 'card declined', 1) AS fail;
SELECT from_status, to_status, note, region, recorded_at IS NOT NULL AS recorded, note_length
FROM pay_journal WHERE bizno = 'H-JOURNAL' ORDER BY seq;
SELECT a.note FROM journal_audit AS a JOIN pay_journal AS j USING (seq)
WHERE j.bizno = 'H-JOURNAL' ORDER BY seq;
-- A typmod the executor would apply (numeric(12,2) rounds): applied.  The
-- amount is in dinars, which have three minor units.
ALTER TABLE pay_journal ALTER COLUMN amount TYPE numeric(12,2);
SELECT pay_begin('H-JOURNAL-TYPMOD', 1.005, 'KWD') AS begin;
SELECT amount FROM pay_journal WHERE bizno = 'H-JOURNAL-TYPMOD';
ALTER TABLE pay_journal ALTER COLUMN amount TYPE numeric;
DROP TRIGGER audit ON pay_journal;
ALTER TABLE pay_journal DROP COLUMN region, DROP COLUMN recorded_at, DROP COLUMN note_length;
DROP TABLE journal_audit;
DROP FUNCTION audit_journal();

-- A column the C code writes, gone or of another type: refused, naming it,
-- with nothing written; back by name (at another position), written again.
ALTER TABLE pay_journal DROP COLUMN note;
SELECT pay_fail('H-JOURNAL-2', 'lost?', 1) AS fail_without_note_column;
\echo :LAST_ERROR_SQLSTATE
SELECT pay_begin('H-JOURNAL-2', 10, 'EUR') AS begin_without_note_column;
\echo :LAST_ERROR_SQLSTATE
ALTER TABLE pay_journal ADD COLUMN note text;
SELECT pay_begin('H-JOURNAL-2', 10, 'EUR') AS begin, pay_fail('H-JOURNAL-2', 'card declined', 1) AS fail;
SELECT from_status, to_status, note FROM pay_journal WHERE bizno = 'H-JOURNAL-2' ORDER BY seq;
ALTER TABLE pay_ledger ALTER COLUMN attempt TYPE bigint;
SELECT pay_begin('H-JOURNAL-3', 10, 'EUR') AS attempt_of_another_type;
\echo :LAST_ERROR_SQLSTATE
ALTER TABLE pay_ledger ALTER COLUMN attempt TYPE integer;
ALTER TABLE pay_ledger DROP CONSTRAINT pay_ledger_pkey;
SELECT pay_begin('H-JOURNAL-3', 10, 'EUR') AS without_primary_key;
\echo :LAST_ERROR_SQLSTATE
ALTER TABLE pay_ledger ADD PRIMARY KEY (bizno);
SELECT pay_begin('H-JOURNAL-3', 10, 'EUR') AS begin_again;
SELECT * FROM pay_verify();

-- A DBA's trigger that silently skips the API's writes: refused (55000),
-- never a second PROCEED for the same attempt, never a spin.
SELECT payment_in('H-SKIPPED', 'INIT') AS payment;
SELECT pay_begin('H-SKIPPED-2', 10, 'EUR') AS processing;
CREATE FUNCTION skip_updates() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$;
CREATE TRIGGER skip_updates BEFORE UPDATE ON pay_ledger FOR EACH ROW EXECUTE FUNCTION skip_updates();
SET statement_timeout = '10s';
SELECT outcome($$SELECT pay_begin('H-SKIPPED')$$) AS begin_skipped,
       outcome($$SELECT pay_succeed('H-SKIPPED-2', 'BANK-1', 1)$$) AS succeed_skipped;
DROP TRIGGER skip_updates ON pay_ledger;
CREATE TRIGGER skip_inserts BEFORE INSERT ON pay_ledger FOR EACH ROW EXECUTE FUNCTION skip_updates();
SELECT outcome($$SELECT pay_begin('H-SKIPPED-3', 10, 'EUR')$$) AS begin_insert_skipped,
       outcome($$SELECT pay_open('HSKIP', 'ORDER-1', 10, 'EUR')$$) AS open_insert_skipped;
RESET statement_timeout;
DROP TRIGGER skip_inserts ON pay_ledger;
DROP FUNCTION skip_updates();
SELECT standing('H-SKIPPED') AS skipped, standing('H-SKIPPED-2') AS skipped_2;

-- 6. The ledger's note belongs to the write that sets it: a DBA's manual fix
-- carries its note into the journal, and a later write does not repeat it.
SELECT payment_in('H-NOTE', 'FAILED') AS payment;
UPDATE pay_ledger SET status = 'INIT', note = 'ticket 4711: customer called' WHERE bizno = 'H-NOTE';
UPDATE pay_ledger SET status = 'PROCESSING' WHERE bizno = 'H-NOTE';
SELECT from_status, to_status, note FROM pay_journal WHERE bizno = 'H-NOTE' ORDER BY seq;
SELECT note FROM pay_ledger WHERE bizno = 'H-NOTE';
SELECT outcome($$UPDATE pay_ledger SET bizno = 'H-NOTE-2' WHERE bizno = 'H-NOTE' RETURNING 'ok'$$) AS immutable_bizno,
       outcome($$UPDATE pay_ledger SET amount = 99 WHERE bizno = 'H-NOTE' RETURNING 'ok'$$) AS frozen_amount;

-- 7. Every refusal a caller can meet says what to do (a HINT), names its
-- rule where it has one, and shows none of the API's own SQL in its CONTEXT.
CREATE FUNCTION refusal(statement text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    state text;
    constraint_name text;
    hint text;
    context text;
BEGIN
    EXECUTE statement;
    RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, constraint_name = CONSTRAINT_NAME,
                            hint = PG_EXCEPTION_HINT, context = PG_EXCEPTION_CONTEXT;
    RETURN state || ' ' || coalesce(nullif(constraint_name, ''), '-') || ' hint:' || (hint <> '')
        || ' api_sql:' || (context LIKE '%OPERATOR(pg_catalog.=)%' OR context LIKE '%INSERT INTO %.pay_%');
END
$$;
SELECT pay_begin('H-R', 10, 'EUR') AS begin, pay_open('HR', 'O1', 1, 'EUR') IS NOT NULL AS opened;
SELECT call, refusal(call) FROM (VALUES
    ($$SELECT pay_begin('bad key!')$$),
    ($$SELECT pay_begin(NULL)$$),
    ($$SELECT pay_begin('H-R', -1)$$),
    ($$SELECT pay_begin('H-R', 10, 'eur')$$),
    ($$SELECT pay_begin('H-R', 10, 'ZZZ')$$),
    ($$SELECT pay_begin('H-R', 10.005, 'EUR')$$),
    ($$SELECT pay_begin('H-R', 11, 'EUR')$$),
    ($$SELECT pay_begin('H-R', 10, 'USD')$$),
    ($$SELECT pay_succeed('H-UNKNOWN', 'R', 1)$$),
    ($$SELECT pay_succeed('H-R', 'R')$$),
    ($$SELECT pay_succeed('H-R', NULL, 1)$$),
    ($$SELECT pay_succeed('H-R', repeat('r', 129), 1)$$),
    ($$SELECT pay_succeed('H-R', 'R', 0)$$),
    ($$SELECT pay_succeed('H-R', 'R', 7)$$),
    ($$SELECT pay_fail('H-R', repeat('x', 1001), 1)$$),
    ($$SELECT pay_transition('H-R', 'PROCESSING')$$),
    ($$SELECT pay_reset('H-R', 'why')$$),
    ($$SELECT pay_begin(pay_bizno('HR', 'O1'), 1, 'EUR')$$),
    ($$SELECT pay_open('HR!', 'O1', 1, 'EUR')$$),
    ($$SELECT pay_open('HR', 'O1', 1)$$),
    ($$SELECT pay_confirm_second_charge('H-R', 'R')$$),
    ($$UPDATE pay_ledger SET amount = 12 WHERE bizno = 'H-R'$$),
    ($$DELETE FROM pay_ledger WHERE bizno = 'H-R'$$),
    ($$UPDATE pay_ledger SET bizno = 'H-R2' WHERE bizno = 'H-R'$$),
    ($$DELETE FROM pay_journal WHERE bizno = 'H-R'$$)) AS c(call);

-- 8. NULL where the ledger needs a value.  Its BEFORE triggers run before
-- PostgreSQL checks NOT NULL, so they refuse a NULL key, status or attempt
-- themselves, with 23502 as PostgreSQL would (a NULL key once crashed the
-- server); an UPDATE may not remove a payment's amount or currency.
SELECT outcome($$INSERT INTO pay_ledger (bizno, status) VALUES (NULL, 'INIT') RETURNING 'ok'$$) AS null_key;
SELECT 'still connected' AS backend;
SELECT error_message($$INSERT INTO pay_ledger (bizno, status) VALUES (NULL, 'INIT')$$) AS message;
SELECT outcome($$INSERT INTO pay_ledger (bizno, status) VALUES (NULL, 'PROCESSING') RETURNING 'ok'$$) AS null_key_processing,
       outcome($$INSERT INTO pay_ledger (bizno, status) VALUES ('H-NULL', NULL) RETURNING 'ok'$$) AS null_status,
       outcome($$INSERT INTO pay_ledger (bizno) VALUES (NULL) RETURNING 'ok'$$) AS null_key_default_status;
SELECT pay_open('HNULL', 'O1', 10, 'EUR') IS NOT NULL AS opened;
SELECT outcome($$UPDATE pay_ledger SET currency = NULL, attempt = NULL WHERE prefix = 'HNULL' RETURNING 'ok'$$) AS null_currency_attempt,
       outcome($$UPDATE pay_ledger SET attempt = NULL WHERE prefix = 'HNULL' RETURNING 'ok'$$) AS null_attempt,
       outcome($$UPDATE pay_ledger SET amount = NULL WHERE prefix = 'HNULL' RETURNING 'ok'$$) AS null_amount,
       outcome($$UPDATE pay_ledger SET currency = NULL WHERE prefix = 'HNULL' RETURNING 'ok'$$) AS null_currency,
       outcome($$UPDATE pay_ledger SET status = NULL WHERE prefix = 'HNULL' RETURNING 'ok'$$) AS null_status,
       outcome($$UPDATE pay_ledger SET bizno = NULL WHERE prefix = 'HNULL' RETURNING 'ok'$$) AS null_key;
SELECT error_message($$UPDATE pay_ledger SET amount = NULL WHERE prefix = 'HNULL'$$) AS message;
SELECT status, amount, currency, attempt FROM pay_ledger WHERE prefix = 'HNULL';
SELECT outcome($$UPDATE pay_ledger SET amount = 12, currency = 'USD' WHERE prefix = 'HNULL' RETURNING 'ok'$$) AS changed;
SELECT count(*) AS journal_rows FROM pay_journal AS j JOIN pay_ledger AS l USING (bizno) WHERE l.prefix = 'HNULL';
SELECT count(*) AS problems FROM pay_verify();

-- 9. Every function of the extension, called with each combination of NULL
-- arguments (at least one), answers with a value or a documented SQLSTATE --
-- mostly 22004 naming the argument -- never XX000, and the backend lives on.
-- The other arguments are valid values named for their parameter (the bizNo
-- of a payment that succeeded, a currency ISO 4217 knows), so that a call
-- gets past them to the NULL it is given.  Warnings (a second charge
-- reported with a NULL response) are not the point here.
SELECT payment_in('H-NULLS', 'SUCCESS') AS payment;
CREATE TEMP TABLE null_calls (function text, call text, state text);
SET client_min_messages = error;
DO $$
DECLARE
    f record;
    args text[];
    sample text;
    state text;
BEGIN
    FOR f IN SELECT p.proname, p.oid::regprocedure::text AS signature, p.proargtypes::oid[] AS types,
                    p.proargnames AS names, p.pronargs
             FROM pg_proc AS p
             JOIN pg_depend AS d ON d.objid = p.oid AND d.deptype = 'e'
             JOIN pg_extension AS e ON e.oid = d.refobjid AND e.extname = 'idempotent_pay'
             WHERE p.prorettype NOT IN ('trigger'::regtype, 'event_trigger'::regtype)
               AND p.pronargs > 0
             ORDER BY p.oid::regprocedure::text LOOP
        FOR mask IN 1 .. (1 << f.pronargs) - 1 LOOP
            args := '{}';
            FOR n IN 1 .. f.pronargs LOOP
                sample := CASE WHEN mask & (1 << (n - 1)) <> 0 THEN 'NULL'
                    ELSE CASE f.types[n - 1]::regtype::text
                        WHEN 'text' THEN quote_literal(CASE f.names[n]
                            WHEN 'bizno' THEN 'H-NULLS'
                            WHEN 'currency' THEN 'EUR'
                            WHEN 'channel_ref' THEN 'BANK-H-NULLS'
                            ELSE 'HNULLS' END)
                        WHEN 'numeric' THEN '10'
                        WHEN 'integer' THEN '1'
                        WHEN 'bigint' THEN CASE f.names[n] WHEN 'attempt' THEN '1' ELSE 'NULL' END
                        WHEN 'pay_status' THEN '''PROCESSING'''
                        WHEN 'jsonb' THEN '''[]'''
                        WHEN 'regclass' THEN '''pg_class'''
                        WHEN 'regrole' THEN 'NULL'
                        WHEN 'boolean' THEN 'false'
                        WHEN 'timestamp with time zone' THEN 'now()'
                        WHEN 'interval' THEN '''1 minute'''
                        ELSE 'NULL' END END;
                args := args || (sample || '::' || f.types[n - 1]::regtype::text);
            END LOOP;
            BEGIN
                EXECUTE format('SELECT %I(%s)', f.proname, array_to_string(args, ', '));
                state := 'value';
            EXCEPTION WHEN OTHERS THEN
                GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE;
            END;
            INSERT INTO null_calls
            VALUES (f.signature, format('%s(%s)', f.proname, array_to_string(args, ', ')), state);
        END LOOP;
    END LOOP;
END
$$;
RESET client_min_messages;
SELECT 'still connected' AS backend;
-- What each function answers, over all its NULL combinations.
SELECT function, count(*) AS calls, string_agg(DISTINCT state, ' ') AS answers
FROM null_calls GROUP BY function ORDER BY function;
SELECT call, state FROM null_calls
WHERE state <> 'value' AND left(state, 2) NOT IN ('22', '23', '42', '55') AND state <> 'P0002';
-- The second charge reported with a NULL response is one like any other,
-- and is confirmed like one.
SELECT channel_ref, confirmed FROM pay_second_charges() WHERE bizno = 'H-NULLS';
SELECT pay_confirm_second_charge('H-NULLS', 'BANK-H-NULLS');
SELECT * FROM pay_verify();

RESET idempotent_pay.maintenance;
