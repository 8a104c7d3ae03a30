-- Fuzzing at the SQL level: thousands of random and mutated inputs into
-- every function of the extension.  No input may raise XX000 or another
-- SQLSTATE outside the documented ones, lose the connection, or leave the
-- ledger out of step with its journal.

-- Claims here run inside transaction blocks or subtransactions on purpose
-- (rolled back, or caught); the refusal of that is claim_durable's test.
SET idempotent_pay.claim_in_transaction = allow;

SELECT setseed(0.20261130);

-- A random input of some troublesome class.
CREATE FUNCTION fuzz_text() RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    valid text := pay_bizno('FZ', 'order-' || (random() * 1000)::int);
    position int := 1 + (random() * (length(valid) - 2))::int;
    alphabet text := '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz-.:_';
BEGIN
    CASE (random() * 13)::int
        WHEN 0 THEN RETURN NULL;
        WHEN 1 THEN RETURN '';
        WHEN 2 THEN RETURN repeat('x', (random() * 100000)::int);
        WHEN 3 THEN RETURN 'zahlung-ü-€-😀';
        WHEN 4 THEN RETURN E'quote''s "double" \\back';
        WHEN 5 THEN RETURN 'ctl' || chr(1 + (random() * 30)::int) || 'x';
        WHEN 6 THEN RETURN valid;
        WHEN 7 THEN RETURN overlay(valid PLACING substr(alphabet, 1 + (random() * 65)::int, 1)
                                   FROM position FOR 1);
        WHEN 8 THEN RETURN overlay(valid PLACING substr(valid, position + 1, 1) || substr(valid, position, 1)
                                   FROM position FOR 2);
        WHEN 9 THEN RETURN left(valid, position);
        WHEN 10 THEN RETURN valid || valid;
        WHEN 11 THEN RETURN repeat(substr(alphabet, 1 + (random() * 65)::int, 1), 1 + (random() * 130)::int);
        ELSE RETURN 'FZ-key-' || (random() * 50)::int;
    END CASE;
END
$$;

CREATE FUNCTION fuzz_numeric() RETURNS text LANGUAGE sql AS $$
    SELECT (ARRAY['NULL', '0', '-1', '0.0000000000000000001', '1e300', '''NaN''', '''Infinity''',
                  '''-Infinity''', '12.34', '99999999999999999999999999.99'])[1 + (random() * 9)::int]
$$;

CREATE FUNCTION fuzz_int() RETURNS text LANGUAGE sql AS $$
    SELECT (ARRAY['NULL', '-1', '0', '1', '2', '2147483647', '-2147483648'])[1 + (random() * 6)::int]
$$;

CREATE FUNCTION fuzz_status() RETURNS text LANGUAGE sql AS $$
    SELECT (ARRAY['NULL', '''INIT''', '''PROCESSING''', '''SUCCESS''', '''FAILED'''])[1 + (random() * 4)::int]
$$;

CREATE FUNCTION fuzz_call() RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    CASE (random() * 17)::int
        WHEN 0 THEN RETURN format('SELECT pay_open(%L, %L, %s, %L)', fuzz_text(), fuzz_text(), fuzz_numeric(), fuzz_text());
        WHEN 1 THEN RETURN format('SELECT pay_open(''FZ'', %L, %s, ''EUR'')', fuzz_text(), fuzz_numeric());
        WHEN 2 THEN RETURN format('SELECT pay_begin(%L, %s, %L)', fuzz_text(), fuzz_numeric(), fuzz_text());
        WHEN 3 THEN RETURN format('SELECT pay_begin(%L)', fuzz_text());
        WHEN 4 THEN RETURN format('SELECT pay_succeed(%L, %L, %s)', fuzz_text(), fuzz_text(), fuzz_int());
        WHEN 5 THEN RETURN format('SELECT pay_fail(%L, %L, %s)', fuzz_text(), fuzz_text(), fuzz_int());
        WHEN 6 THEN RETURN format('SELECT pay_reset(%L, %L)', fuzz_text(), fuzz_text());
        WHEN 7 THEN RETURN format('SELECT pay_transition(%L, %s, %L)', fuzz_text(), fuzz_status(), fuzz_text());
        WHEN 8 THEN RETURN format('SELECT pay_get(%L)', fuzz_text());
        WHEN 9 THEN RETURN format('SELECT count(*) FROM pay_stuck(%L::interval, %s)',
                                  (ARRAY[NULL, '0 seconds', '-1 day', '1000 years'])[1 + (random() * 3)::int], fuzz_int());
        WHEN 10 THEN RETURN format('SELECT pay_bizno(%L, %L)', fuzz_text(), fuzz_text());
        WHEN 11 THEN RETURN format('SELECT pay_bizno_valid(%L), pay_allowed(%s, %s)', fuzz_text(), fuzz_status(), fuzz_status());
        WHEN 12 THEN RETURN format('SELECT pay_claim(%L, %s, %L)', fuzz_text(), fuzz_numeric(), fuzz_text());
        WHEN 13 THEN RETURN format('SELECT count(*) FROM pay_find(%L, %L)', fuzz_text(), fuzz_text());
        WHEN 14 THEN RETURN format('SELECT pay_confirm_second_charge(%L, %L)', fuzz_text(), fuzz_text());
        WHEN 15 THEN RETURN format('SELECT pay_open_claim(''FZ'', %L, %s, %L)', fuzz_text(), fuzz_numeric(), fuzz_text());
        ELSE RETURN format('SELECT pay_bizno_parse(%L)', fuzz_text());
    END CASE;
END
$$;

CREATE TABLE fuzz_outcomes (sqlstate text, statement text);

DO $$
DECLARE
    statement text;
BEGIN
    FOR i IN 1 .. 4000 LOOP
        statement := fuzz_call();
        BEGIN
            EXECUTE statement;
            INSERT INTO fuzz_outcomes VALUES ('00000', NULL);
        EXCEPTION WHEN OTHERS THEN
            INSERT INTO fuzz_outcomes VALUES (SQLSTATE, left(statement, 200));
        END;
    END LOOP;
END
$$;

-- Many calls succeed, many are refused, and every refusal is a documented one
-- (since 1.3 also 22001: a reason, note or reference longer than its bound).
SELECT count(*) AS calls,
       count(*) FILTER (WHERE sqlstate = '00000') > 400 AS many_succeeded,
       count(*) FILTER (WHERE sqlstate <> '00000') > 400 AS many_refused,
       count(*) FILTER (WHERE sqlstate = 'XX000') AS internal_errors
FROM fuzz_outcomes;
SELECT sqlstate, statement FROM fuzz_outcomes
WHERE sqlstate NOT IN ('00000', '22004', '22023', '22P02', '23505', '23514', '55000', 'P0002',
                       '22001', '22003', '2201W', '22007', '22008', '22015', '54000')
LIMIT 10;

-- The connection is alive and the ledger agrees with its journal.
SELECT * FROM pay_verify();
