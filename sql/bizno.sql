-- bizNo: format, round trip, check character, bad input, node id.

-- The format: PREFIX-BIZID-YYYYMMDDHHMMSSmmm-NNNN-UUUUUUUUUUUUUC
SELECT pay_bizno('PAY', 'ORD001')
       ~ '^PAY-ORD001-[0-9]{17}-0000-[0-9A-HJKMNP-TV-Z]{13}[0-9A-Z]$' AS well_formed;

-- Round trip: parse gives back what went in, and the time of issue.
SELECT p.prefix, p.biz_id, p.node_id,
       p.issued_at BETWEEN clock_timestamp() - interval '1 minute'
                       AND clock_timestamp() AS issued_now
FROM pay_bizno_parse(pay_bizno('PAY', 'ORD001')) AS p;

-- biz_id may hold every allowed character, '-' included.
SELECT (pay_bizno_parse(pay_bizno('A1', 'order-7:2024.x_y'))).biz_id;

-- The longest prefix and biz_id make a bizNo of 119 characters.
SELECT length(b) AS len, pay_bizno_valid(b) AS valid
FROM pay_bizno(repeat('Z', 16), repeat('x', 64)) AS b;

-- A fixed bizNo parses the same everywhere (time is UTC).
SET TIME ZONE 'Asia/Shanghai';
SELECT * FROM pay_bizno_parse('PAY-ORD001-20261130065033976-0000-366VRA691WVWE0');
RESET TIME ZONE;

-- One session issues distinct ids whose time part never goes backwards.
WITH issued AS (
    SELECT n, pay_bizno('PAY', 'SAME') AS b
    FROM generate_series(1, 20000) AS n
)
SELECT count(DISTINCT b) AS distinct_ids,
       bool_and(pay_bizno_valid(b)) AS all_valid,
       bool_and(substr(b, 10, 17) >= coalesce(prev_time, '')) AS time_in_issue_order
FROM (SELECT b, lag(substr(b, 10, 17)) OVER (ORDER BY n) AS prev_time
      FROM issued) AS ordered;

-- The check character catches every single-character substitution and every
-- adjacent transposition, over the whole key alphabet, in 20 fresh bizNos.
CREATE TEMP TABLE sample AS
    SELECT pay_bizno('P' || g, 'id-' || g || '.x') AS b
    FROM generate_series(1, 20) AS g;
CREATE TEMP TABLE alphabet AS
    SELECT substr('0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz-.:_', i, 1) AS c
    FROM generate_series(1, 66) AS i;
WITH substitutions AS (
    SELECT overlay(b PLACING c FROM pos FOR 1) AS mutant
    FROM sample, generate_series(1, length(b)) AS pos, alphabet
    WHERE substr(b, pos, 1) <> c
), transpositions AS (
    SELECT overlay(b PLACING substr(b, pos + 1, 1) || substr(b, pos, 1) FROM pos FOR 2) AS mutant
    FROM sample, generate_series(1, length(b) - 1) AS pos
    WHERE substr(b, pos, 1) <> substr(b, pos + 1, 1)
)
SELECT (SELECT count(*) > 50000 FROM substitutions) AS many_substitutions,
       (SELECT count(*) FROM substitutions WHERE pay_bizno_valid(mutant)) AS substitutions_accepted,
       (SELECT count(*) > 500 FROM transpositions) AS many_transpositions,
       (SELECT count(*) FROM transpositions WHERE pay_bizno_valid(mutant)) AS transpositions_accepted;

-- pay_bizno_valid never raises.
SELECT left(v, 50) AS input, length(v) AS len, pay_bizno_valid(v)
FROM unnest(ARRAY['', 'PAY', 'é', repeat('A', 10000), E'PAY-\\x00', NULL,
                  'PAY-ORD001-20261130065033976-0000-366VRA691WVWE0',
                  'PAY-ORD001-20261130065033976-0000-366VRA691WVWE1',
                  'PAY-ORD001-20261131065033976-0000-366VRA691WVWE0']) AS v;

-- Bad prefix or biz_id: 22023, with what is allowed.
SELECT pay_bizno('pay', 'ORD001');
\echo :LAST_ERROR_SQLSTATE
SELECT pay_bizno('', 'ORD001');
\echo :LAST_ERROR_SQLSTATE
SELECT pay_bizno(repeat('A', 17), 'ORD001');
\echo :LAST_ERROR_SQLSTATE
SELECT pay_bizno('PAY-1', 'ORD001');
\echo :LAST_ERROR_SQLSTATE
SELECT pay_bizno('PAY', '');
\echo :LAST_ERROR_SQLSTATE
SELECT pay_bizno('PAY', repeat('x', 65));
\echo :LAST_ERROR_SQLSTATE
SELECT pay_bizno('PAY', 'order 1');
\echo :LAST_ERROR_SQLSTATE
SELECT pay_bizno('PAY', 'ordér');
\echo :LAST_ERROR_SQLSTATE

-- NULL where a value is required: 22004.
SELECT pay_bizno(NULL, 'ORD001');
\echo :LAST_ERROR_SQLSTATE
SELECT pay_bizno('PAY', NULL);
\echo :LAST_ERROR_SQLSTATE

-- Malformed input to parse: 22P02.
SELECT * FROM pay_bizno_parse('not-a-bizno');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM pay_bizno_parse('PAY-ORD001-20261131065033976-0000-366VRA691WVWE0');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM pay_bizno_parse('PAY-ORD001-20261130065033976-1024-366VRA691WVWE0');
\echo :LAST_ERROR_SQLSTATE
-- A bizNo that does not check out: 22P02.  The error names a check character
-- only if it is one of 0-9A-Z, the only ones issued, and says the check
-- character should be that one only if the check character as written is none
-- of them: otherwise any character may be the mistyped one.  Each case is one
-- error in PAY-ORD001-20261130065033976-0000-366VRA691WVWE0.
-- A wrong check character, 0 -> 1.
SELECT * FROM pay_bizno_parse('PAY-ORD001-20261130065033976-0000-366VRA691WVWE1');
\echo :LAST_ERROR_SQLSTATE
-- A check character never issued, 0 -> o.
SELECT * FROM pay_bizno_parse('PAY-ORD001-20261130065033976-0000-366VRA691WVWEo');
\echo :LAST_ERROR_SQLSTATE
-- A typo in the biz_id, O -> 0: no check character of 0-9A-Z fits.
SELECT * FROM pay_bizno_parse('PAY-0RD001-20261130065033976-0000-366VRA691WVWE0');
\echo :LAST_ERROR_SQLSTATE
-- A typo in the uniqueness part, E -> F.
SELECT * FROM pay_bizno_parse('PAY-ORD001-20261130065033976-0000-366VRA691WVWF0');
\echo :LAST_ERROR_SQLSTATE
-- Two neighbours swapped in the biz_id, 01 -> 10.
SELECT * FROM pay_bizno_parse('PAY-ORD010-20261130065033976-0000-366VRA691WVWE0');
\echo :LAST_ERROR_SQLSTATE
-- The check character swapped with its neighbour, E0 -> 0E.
SELECT * FROM pay_bizno_parse('PAY-ORD001-20261130065033976-0000-366VRA691WVW0E');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM pay_bizno_parse(NULL);

-- The node id: 0 to 1023, set in the server's configuration only (never per
-- session, not even by a superuser), written into every bizNo.
-- test/tap/001_bizno_concurrency.pl sets it in postgresql.conf.
SELECT (pay_bizno_parse(pay_bizno('PAY', 'ORD001'))).node_id =
       current_setting('idempotent_pay.node_id')::integer AS node_id_written;
SET idempotent_pay.node_id = 1023;
\echo :LAST_ERROR_SQLSTATE
ALTER DATABASE contrib_regression SET idempotent_pay.node_id = 1023;
\echo :LAST_ERROR_SQLSTATE
ALTER ROLE CURRENT_USER SET idempotent_pay.node_id = 1023;
\echo :LAST_ERROR_SQLSTATE
SELECT set_config('idempotent_pay.node_id', '1023', false);
\echo :LAST_ERROR_SQLSTATE
ALTER SYSTEM SET idempotent_pay.node_id = 1024;
\echo :LAST_ERROR_SQLSTATE
ALTER SYSTEM SET idempotent_pay.node_id = -1;
\echo :LAST_ERROR_SQLSTATE
SET idempotent_pay.no_such_setting = 1;
\echo :LAST_ERROR_SQLSTATE

CREATE ROLE regress_bizno_app;
SET ROLE regress_bizno_app;
SET idempotent_pay.node_id = 5;
\echo :LAST_ERROR_SQLSTATE
SELECT pay_bizno_valid(pay_bizno('PAY', 'ORD001')) AS app_can_issue;
RESET ROLE;
DROP ROLE regress_bizno_app;
