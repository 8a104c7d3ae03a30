-- What a superuser's raw SQL cannot make of the record: a settled answer
-- changed behind the guard's back is reported by pay_verify; a journal row
-- or a maintenance entry the extension did not write is refused; a month
-- of the archive is not emptied by TRUNCATE.

-- Claims here run inside transaction blocks on purpose (rolled back); the
-- refusal of that is claim_durable's test.
SET idempotent_pay.claim_in_transaction = allow;

-- 1. The step into SUCCESS journals the bank's reference and a digest of
-- the response (jsonb_hash_extended, seed 0) it settled with.
SELECT pay_begin('VER-PAID', 10, 'EUR') IS NOT NULL AS begun;
SELECT pay_succeed('VER-PAID', 'BANK-VER-1', 1, '{"receipt": "R-1", "fee": 0.25}');
SELECT pay_begin('VER-PLAIN', 10, 'EUR') IS NOT NULL AS begun;
SELECT pay_succeed('VER-PLAIN', 'BANK-VER-2', 1);
SELECT j.bizno, j.from_status, j.to_status, j.channel_ref,
       j.response_digest = jsonb_hash_extended(l.response, 0) AS digest_of_response,
       j.response_digest IS NULL AS no_digest
FROM pay_journal AS j JOIN pay_ledger AS l USING (bizno)
WHERE j.bizno IN ('VER-PAID', 'VER-PLAIN') ORDER BY j.seq;
SELECT count(*) AS problems FROM pay_verify() WHERE bizno LIKE 'VER-%';

-- A superuser who switches the guard off (maintenance, recorded) and
-- rewrites a success's reference or response is reported.
BEGIN;
SET LOCAL idempotent_pay.maintenance = on;
ALTER TABLE pay_ledger DISABLE TRIGGER pay_ledger_guard;
UPDATE pay_ledger SET channel_ref = 'BANK-FORGED' WHERE bizno = 'VER-PAID';
UPDATE pay_ledger SET response = '{"receipt": "R-FORGED"}' WHERE bizno = 'VER-PLAIN';
ALTER TABLE pay_ledger ENABLE ALWAYS TRIGGER pay_ledger_guard;
SELECT bizno, regexp_replace(problem, 'entry [0-9]+', 'entry N') AS problem
FROM pay_verify() WHERE bizno LIKE 'VER-%' ORDER BY 1, 2;
ROLLBACK;
-- and a response changed to an equal jsonb is no difference
BEGIN;
SET LOCAL idempotent_pay.maintenance = on;
ALTER TABLE pay_ledger DISABLE TRIGGER pay_ledger_guard;
UPDATE pay_ledger SET response = '{"fee": 0.25, "receipt": "R-1"}' WHERE bizno = 'VER-PAID';
ALTER TABLE pay_ledger ENABLE ALWAYS TRIGGER pay_ledger_guard;
SELECT count(*) AS problems FROM pay_verify() WHERE bizno LIKE 'VER-%';
ROLLBACK;

-- The journal's own SQL path (a column a DBA added in maintenance) records
-- the same.
BEGIN;
SET LOCAL idempotent_pay.maintenance = on;
ALTER TABLE pay_journal ADD COLUMN ver_extra integer DEFAULT 7;
SELECT pay_begin('VER-SQL', 10, 'EUR') IS NOT NULL AS begun;
SELECT pay_succeed('VER-SQL', 'BANK-VER-3', 1, '{"receipt": "R-3"}');
SELECT j.to_status, j.channel_ref, j.response_digest = jsonb_hash_extended('{"receipt": "R-3"}', 0) AS digest,
       j.ver_extra
FROM pay_journal AS j WHERE j.bizno = 'VER-SQL' ORDER BY j.seq;
ROLLBACK;

-- 2. The journal and the maintenance log are written by the extension
-- alone: a superuser's row is refused, in replica mode too -- a second
-- charge confirmed (which raises what refunds may return), one reported,
-- a step, a maintenance entry.
SELECT captured FROM pay_refund_balance('VER-PAID');
SELECT outcome($$INSERT INTO pay_journal (bizno, attempt, from_status, to_status, amount, currency, channel_ref, second_charge)
                 VALUES ('VER-PAID', 1, 'SUCCESS', 'SUCCESS', 500, 'EUR', 'BANK-FORGED', 'confirmed') RETURNING 'inserted'$$) AS forged_confirmed,
       outcome($$INSERT INTO pay_journal (bizno, attempt, from_status, to_status, amount, currency, channel_ref, second_charge)
                 VALUES ('VER-PAID', 1, 'SUCCESS', 'SUCCESS', 10, 'EUR', 'BANK-FORGED', 'reported') RETURNING 'inserted'$$) AS forged_reported,
       outcome($$INSERT INTO pay_journal (bizno, attempt, from_status, to_status, amount, currency)
                 VALUES ('VER-PAID', 1, 'SUCCESS', 'SUCCESS', 500, 'EUR') RETURNING 'inserted'$$) AS forged_capture,
       outcome($$INSERT INTO pay_maintenance_log (actor, command_tag, object) VALUES ('nobody', 'ALTER TABLE', 'pay_ledger')
                 RETURNING 'inserted'$$) AS forged_entry;
SET session_replication_role = replica;
SELECT outcome($$INSERT INTO pay_journal (bizno, attempt, from_status, to_status, amount, currency, channel_ref, second_charge)
                 VALUES ('VER-PAID', 1, 'SUCCESS', 'SUCCESS', 500, 'EUR', 'BANK-FORGED', 'confirmed') RETURNING 'inserted'$$) AS replica_forged_confirmed,
       outcome($$INSERT INTO pay_maintenance_log (actor, command_tag, object) VALUES ('nobody', 'ALTER TABLE', 'pay_ledger')
                 RETURNING 'inserted'$$) AS replica_forged_entry;
RESET session_replication_role;
SELECT error_message($$COPY pay_journal (bizno, attempt, to_status) FROM PROGRAM 'printf ''VER-PAID\t1\tSUCCESS\n'''$$) AS copied;
INSERT INTO pay_journal (bizno, attempt, to_status) VALUES ('VER-PAID', 1, 'SUCCESS');
SELECT captured FROM pay_refund_balance('VER-PAID');

-- The API writes them as before: a second charge reported and confirmed,
-- a maintenance statement recorded.
SELECT pay_succeed('VER-PAID', 'BANK-VER-AGAIN', 1);
SELECT pay_confirm_second_charge('VER-PAID', 'BANK-VER-AGAIN');
SELECT channel_ref, second_charge FROM pay_journal
WHERE bizno = 'VER-PAID' AND second_charge IS NOT NULL ORDER BY seq;
SELECT captured FROM pay_refund_balance('VER-PAID');
BEGIN;
SET LOCAL idempotent_pay.maintenance = on;
ALTER TABLE pay_ledger DISABLE TRIGGER pay_ledger_bookkeeping;
ALTER TABLE pay_ledger ENABLE TRIGGER pay_ledger_bookkeeping;
SELECT actor, command_tag, object, command FROM pay_maintenance_log WHERE txid = pg_current_xact_id() ORDER BY at;
ROLLBACK;

-- The extension's permit is its one row's alone: a journal INSERT of its
-- own that fails before the guard (a DBA's default, in maintenance, that
-- divides by zero) leaves none behind for the next raw row.
BEGIN;
SET LOCAL idempotent_pay.maintenance = on;
ALTER TABLE pay_journal ADD COLUMN ver_boom integer
    DEFAULT CASE WHEN current_setting('ver.boom', true) = 'on' THEN length(current_setting('ver.boom')) / 0 END;
SET LOCAL ver.boom = on;
SELECT outcome($$SELECT pay_begin('VER-BOOM', 10, 'EUR')$$) AS begin_failing;
SET LOCAL ver.boom = off;
SELECT outcome($$INSERT INTO pay_journal (bizno, attempt, to_status) VALUES ('VER-BOOM', 1, 'SUCCESS')
                 RETURNING 'inserted'$$) AS raw_after_failure;
ROLLBACK;

-- A restore of pg_dump's output brings the rows as they were: with a
-- restore's settings the superuser's row is taken as a restore's.
BEGIN;
SET LOCAL row_security = off;
SET LOCAL check_function_bodies = false;
SELECT outcome($$INSERT INTO pay_journal (bizno, attempt, from_status, to_status, amount, currency)
                 VALUES ('VER-RESTORED', 1, NULL, 'INIT', 10, 'EUR') RETURNING 'inserted'$$) AS restored_row;
ROLLBACK;

-- 3. The archive's month partitions and its default partitions refuse
-- TRUNCATE, in replica mode too; a month still goes with DROP TABLE.
CREATE FUNCTION ver_truncate(target regclass) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    state text;
    constraint_name text;
BEGIN
    EXECUTE format('TRUNCATE %s', target);
    RAISE EXCEPTION USING ERRCODE = 'P0003';
EXCEPTION
    WHEN SQLSTATE 'P0003' THEN
        RETURN 'truncated';
    WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, constraint_name = CONSTRAINT_NAME;
        RETURN state || coalesce(' ' || nullif(constraint_name, ''), '');
END
$$;
SELECT payment_in('VER-OLD', 'SUCCESS');
SET session_replication_role = replica;
UPDATE pay_ledger SET updated_at = '2023-03-10 12:00+00' WHERE bizno = 'VER-OLD';
RESET session_replication_role;
SELECT pay_archive('2023-04-01') >= 1 AS archived;
SELECT c.relname, t.tgname, t.tgenabled
FROM pg_trigger AS t JOIN pg_class AS c ON c.oid = t.tgrelid
WHERE c.relname ~ '^pay_(ledger|journal)_archive_(2023_03|default)$' AND NOT t.tgisinternal
  AND t.tgtype & 32 <> 0 ORDER BY 1, 2;
SELECT ver_truncate('pay_ledger_archive_2023_03') AS truncate_month,
       ver_truncate('pay_journal_archive_2023_03') AS truncate_journal_month,
       ver_truncate('pay_ledger_archive_default') AS truncate_default,
       ver_truncate('pay_journal_archive_default') AS truncate_journal_default;
SET session_replication_role = replica;
SELECT ver_truncate('pay_ledger_archive_2023_03') AS replica_truncate_month,
       ver_truncate('pay_journal_archive_default') AS replica_truncate_default;
RESET session_replication_role;
SELECT month, kept, problem FROM pay_archive_verify() WHERE month = '2023-03-01';
BEGIN;
DROP TABLE pay_ledger_archive_2023_03, pay_journal_archive_2023_03;
SELECT month, kept, problem FROM pay_archive_verify() WHERE month = '2023-03-01';
SELECT action FROM pay_claim('VER-OLD', 10, 'EUR');
ROLLBACK;
-- the guard's trigger is the archive's own form: no maintenance needed,
-- and nothing else passes
SELECT outcome($$CREATE TRIGGER ver_other BEFORE TRUNCATE ON pay_ledger_archive_2023_03
                 FOR EACH STATEMENT EXECUTE FUNCTION pay_guard('status')$$) AS other_trigger;
-- a partition made by hand, without the guard, is reported
BEGIN;
CREATE TABLE ver_ledger_part PARTITION OF pay_ledger_archive FOR VALUES FROM ('2031-01-01') TO ('2031-02-01');
SELECT problem FROM pay_verify() WHERE problem LIKE '%TRUNCATE%';
ROLLBACK;
DROP FUNCTION ver_truncate(regclass);
