-- The ledger's rules in every session mode.  Under session_replication_role
-- = replica (a logical replica's apply, or a superuser who sets it) the
-- bookkeeping and journal triggers do not fire; the guard does.  What keeps
-- a payment's identity and its settled answer is the guard's, so it holds
-- there too; and a new row of an archived payment is refused in every mode,
-- a restore's (row_security off, check_function_bodies off) included.

-- A paid order: a bizNo of pay_bizno (prefix and biz_id), a response.
SELECT pay_open('RM', 'ORDER-1', 10, 'EUR') AS paid \gset
SELECT action FROM pay_claim(:'paid', 10, 'EUR');
SELECT pay_succeed(:'paid', 'BANK-RM-1', 1, '{"receipt": "R-1"}') IS NOT NULL AS settled;

-- 1. Every column of pay_ledger, from the catalog (a column added later
-- joins), written on the SUCCESS row by a superuser, in origin and in
-- replica mode: once with another value of its type, once with NULL.
-- "refused" names the refusal, "written" keeps the value given, "derived"
-- takes the write with the ledger's own value instead.  Each write, and
-- the mode it runs in, is rolled back.
CREATE FUNCTION write_outcome(mode text, key text, col name, expr text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    wanted text;
    got text;
    state text;
    constraint_name text;
BEGIN
    BEGIN
        PERFORM set_config('session_replication_role', mode, true);
        EXECUTE format('SELECT (%s)::text FROM pay_ledger WHERE bizno = $1', expr)
        INTO wanted USING key;
        EXECUTE format('UPDATE pay_ledger SET %I = %s WHERE bizno = $1 RETURNING %I::text', col, expr, col)
        INTO got USING key;
        RAISE EXCEPTION USING ERRCODE = 'P0003';
    EXCEPTION
        WHEN SQLSTATE 'P0003' THEN
            RETURN CASE WHEN got IS NOT DISTINCT FROM wanted THEN 'written' ELSE 'derived' END;
        WHEN OTHERS THEN
            GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, constraint_name = CONSTRAINT_NAME;
            RETURN 'refused ' || state || coalesce(' ' || nullif(constraint_name, ''), '');
    END;
END
$$;

-- Another value of a column's type; NULL for a type it does not know, which
-- the count below shows, so that a new column's writes are decided here.
CREATE FUNCTION other_value(col name, typ regtype) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
    RETURN CASE typ
        WHEN 'text'::regtype THEN format('coalesce(%I || ''-forged'', ''forged'')', col)
        WHEN 'integer'::regtype THEN format('%I - 1', col)
        WHEN 'timestamptz'::regtype THEN format('coalesce(%I, now()) - interval ''1 day''', col)
        WHEN 'interval'::regtype THEN format('coalesce(%I, interval ''1 day'') + interval ''1 day''', col)
        WHEN 'pay_amount'::regtype THEN format('%I + 1', col)
        WHEN 'pay_currency'::regtype THEN format('CASE WHEN %I = ''USD'' THEN ''EUR'' ELSE ''USD'' END', col)
        WHEN 'pay_status'::regtype THEN '''FAILED'''
        WHEN 'jsonb'::regtype THEN '''{"receipt": "forged"}'''
    END;
END
$$;

CREATE TABLE ledger_columns AS
SELECT attnum, attname, atttypid::regtype AS typ, attnotnull
FROM pg_attribute
WHERE attrelid = 'pay_ledger'::regclass AND attnum > 0 AND NOT attisdropped;

SELECT c.attname AS column_name, m.mode,
       write_outcome(m.mode, :'paid', c.attname, other_value(c.attname, c.typ)) AS other_value,
       write_outcome(m.mode, :'paid', c.attname, 'NULL') AS null_value
FROM ledger_columns AS c, unnest(ARRAY['origin', 'replica']) AS m(mode)
ORDER BY c.attnum, m.mode;
SHOW session_replication_role;
SELECT count(*) AS columns_checked,
       count(*) FILTER (WHERE other_value(attname, typ) IS NULL) AS of_a_type_not_decided
FROM ledger_columns;
DROP TABLE ledger_columns;

-- 2. The forgeries that would reach a retry, in replica mode, each refused;
-- the retries of the order then get its first answer.
SET session_replication_role = replica;
SELECT outcome(format($$UPDATE pay_ledger SET bizno = 'RM-RENAMED' WHERE bizno = %L RETURNING 1$$, :'paid')) AS rename_bizno,
       outcome(format($$UPDATE pay_ledger SET biz_id = 'ORDER-X' WHERE bizno = %L RETURNING 1$$, :'paid')) AS rename_biz_id,
       outcome(format($$UPDATE pay_ledger SET response = '{"receipt": "forged"}' WHERE bizno = %L RETURNING 1$$, :'paid')) AS forge_response,
       outcome(format($$UPDATE pay_ledger SET attempt = 0 WHERE bizno = %L RETURNING 1$$, :'paid')) AS attempt_zero,
       outcome(format($$UPDATE pay_ledger SET channel_ref = NULL WHERE bizno = %L RETURNING 1$$, :'paid')) AS no_reference;
RESET session_replication_role;
SELECT action, attempt, channel_ref, response FROM pay_claim(:'paid', 10, 'EUR');
SELECT bizno = :'paid' AS same_bizno, action FROM pay_open_claim('RM', 'ORDER-1', 10, 'EUR');

-- What a replica's apply does on a publisher's settlement stays legal:
-- entering PROCESSING adds one attempt, a success comes with its reference,
-- the publisher's clock is kept.
SELECT payment_in('RM-APPLY', 'INIT');
SET session_replication_role = replica;
UPDATE pay_ledger SET status = 'PROCESSING', attempt = 1, processing_since = '2026-01-01 10:00+00',
                      updated_at = '2026-01-01 10:00+00'
WHERE bizno = 'RM-APPLY';
SELECT outcome($$UPDATE pay_ledger SET status = 'SUCCESS' WHERE bizno = 'RM-APPLY' RETURNING 1$$) AS success_without_reference,
       outcome($$UPDATE pay_ledger SET attempt = 3 WHERE bizno = 'RM-APPLY' RETURNING 1$$) AS attempt_jumps;
UPDATE pay_ledger SET status = 'SUCCESS', channel_ref = 'BANK-APPLY', updated_at = '2026-01-01 10:01+00'
WHERE bizno = 'RM-APPLY';
RESET session_replication_role;
SELECT status, attempt, channel_ref, updated_at FROM pay_ledger WHERE bizno = 'RM-APPLY';

-- 3. An archived payment, its key and its business action: a new row of
-- either is refused in every mode, however it is inserted.
SELECT pay_open('RM', 'ORDER-ARCHIVED', 10, 'EUR') AS archived \gset
SELECT action FROM pay_claim(:'archived', 10, 'EUR');
SELECT pay_succeed(:'archived', 'BANK-RM-2', 1) IS NOT NULL AS settled;
SELECT payment_in('rm-archived-key', 'SUCCESS');
SET session_replication_role = replica;
UPDATE pay_ledger SET updated_at = '2025-01-10 12:00+00' WHERE bizno IN (:'archived', 'rm-archived-key');
RESET session_replication_role;
SELECT pay_archive('2025-02-01') AS archived_payments;
SELECT pay_bizno('RM', 'ORDER-ARCHIVED') AS same_action \gset
SELECT :'same_action' <> :'archived' AS another_bizno;

-- Each insert in its mode, rolled back when it is taken.
CREATE FUNCTION insert_outcome(mode text, key text) RETURNS text
LANGUAGE plpgsql AS $f$
DECLARE
    state text;
    constraint_name text;
BEGIN
    BEGIN
        IF mode = 'replica' THEN
            SET LOCAL session_replication_role = replica;
        ELSIF mode = 'restoring' THEN
            SET LOCAL row_security = off;
            SET LOCAL check_function_bodies = false;
        END IF;
        INSERT INTO pay_ledger (bizno, status, amount, currency) VALUES (key, 'INIT', 10, 'EUR');
        RAISE EXCEPTION USING ERRCODE = 'P0003';
    EXCEPTION
        WHEN SQLSTATE 'P0003' THEN
            RETURN 'inserted';
        WHEN OTHERS THEN
            GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, constraint_name = CONSTRAINT_NAME;
            RETURN 'refused ' || state || coalesce(' ' || nullif(constraint_name, ''), '');
    END;
END
$f$;
SELECT mode, insert_outcome(mode, 'rm-archived-key') AS archived_key,
       insert_outcome(mode, :'archived') AS archived_bizno,
       insert_outcome(mode, :'same_action') AS archived_action
FROM unnest(ARRAY['origin', 'replica', 'restoring']) AS mode;

-- The way a restore brings rows, COPY, in the state a restore runs in; a
-- late retry of the payment is then answered from the archive.
SET row_security = off;
SET check_function_bodies = false;
COPY pay_ledger (bizno, status, amount, currency) FROM stdin;
rm-archived-key	INIT	10	EUR
\.
RESET row_security;
RESET check_function_bodies;
SELECT count(*) AS archived_rows_in_ledger FROM pay_ledger WHERE bizno IN ('rm-archived-key', :'archived', :'same_action');
SELECT outcome($$SELECT action FROM pay_claim('rm-archived-key', 10, 'EUR')$$) AS late_retry;

-- A restore's rows of payments not archived still come as they were.
SET row_security = off;
SET check_function_bodies = false;
INSERT INTO pay_ledger (bizno, status, amount, currency, attempt, channel_ref, created_at, updated_at)
VALUES ('RM-RESTORED', 'SUCCESS', 5, 'EUR', 2, 'BANK-9', '2026-01-01 10:00+00', '2026-01-01 10:05+00');
RESET row_security;
RESET check_function_bodies;
SELECT status, attempt, created_at, updated_at FROM pay_ledger WHERE bizno = 'RM-RESTORED';

DROP FUNCTION write_outcome(text, text, name, text), other_value(name, regtype), insert_outcome(text, text);
