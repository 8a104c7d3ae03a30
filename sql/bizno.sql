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

-- A check character outside 0-9A-Z is never right, even where it makes the
-- weighted sum vanish: the generator steps past every uniqueness part whose
-- check character would be one, so no bizNo ends in one.  check_sum is the
-- weighted sum modulo 67 of the key alphabet's values, computed here apart
-- from the C it checks.
CREATE FUNCTION pg_temp.check_sum(k text) RETURNS integer
LANGUAGE sql IMMUTABLE AS $$
    SELECT (sum(((i - 1) % 66 + 1) *
                (strpos('0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz-.:_',
                        substr(k, i, 1)) - 1)) % 67)::integer
    FROM generate_series(1, length(k)) AS i
$$;
-- SHOP-1-20261203174955808-0000-0066E619TAXXSA, issued by pay_bizno('SHOP',
-- '1'), and five keys made from it by replacing its last three characters so
-- that the sum vanishes with a check character of a-z or -.:_ each.
CREATE TEMP TABLE fitted_outside (k text);
INSERT INTO fitted_outside VALUES
    ('SHOP-1-20261203174955808-0000-0066E619TAX2Ra'),
    ('SHOP-1-20261203174955808-0000-0066E619TAX3F-'),
    ('SHOP-1-20261203174955808-0000-0066E619TAX06.'),
    ('SHOP-1-20261203174955808-0000-0066E619TAX0J:'),
    ('SHOP-1-20261203174955808-0000-0066E619TAX0W_');
SELECT k, pg_temp.check_sum(k) AS sum, pay_bizno_valid(k) AS valid
FROM (SELECT 'SHOP-1-20261203174955808-0000-0066E619TAXXSA' AS k
      UNION ALL SELECT k FROM fitted_outside) AS keys;
-- pay_bizno_parse refuses them with 22P02, naming no check character: none of
-- 0-9A-Z fits the other characters.
SELECT * FROM pay_bizno_parse('SHOP-1-20261203174955808-0000-0066E619TAX2Ra');
\echo :LAST_ERROR_SQLSTATE
-- And so does every way into the ledger, writing nothing: the API, a refund
-- naming one as its own key, a raw INSERT.
SELECT k,
       outcome(format('SELECT pay_bizno_parse(%L)', k)) AS parse,
       outcome(format('SELECT pay_claim(%L, 10, ''EUR'')', k)) AS claim,
       outcome(format('SELECT pay_begin(%L, 10, ''EUR'')', k)) AS begin,
       outcome(format('SELECT pay_refund_open(''SHOP-ANY'', %L, 1)', k)) AS refund,
       outcome(format($$INSERT INTO pay_ledger (bizno, status, amount, currency)
                        VALUES (%L, 'INIT', 10, 'EUR') RETURNING bizno$$, k)) AS raw_insert
FROM fitted_outside;
SELECT count(*) AS recorded FROM pay_ledger WHERE bizno IN (SELECT k FROM fitted_outside);

-- Every printable ASCII character at the check position is accepted exactly
-- when it is one of 0-9A-Z and makes the sum vanish.  The bodies are those
-- of bizNos issued by pay_bizno (the longest among them, whose weights wrap
-- past 66) with each of the 32 values of the uniqueness part's last digit:
-- for some of them only a check character outside 0-9A-Z fits (and for one
-- in 67 none of the key alphabet, whose 66 values leave one residue out).
CREATE TEMP TABLE issued (k text);
INSERT INTO issued VALUES
    ('SHOP-1-20261203174955808-0000-0066E619TAXXSA'),
    ('PAY-ORD001-20261130065033976-0000-366VRA691WVWE0'),
    ('REFUND-order-7:2024.x_y-20261203175053013-0000-0066XMKZP3EM0I'),
    ('A1-x-20261203175053013-0000-0066XMKZP3EM21'),
    ('P9-a.b-a.b-a.b-a.b-a.b-a.b-a.b-a.b-a.b-a.b--20261203175053013-0000-0066XMKZP3EM97'),
    ('ZZZZZZZZZZZZZZZZ-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx-20261203175053013-0000-0066XMKZP3EM4B');
SELECT count(*) AS issued_valid FROM issued WHERE pay_bizno_valid(k) AND pg_temp.check_sum(k) = 0;
WITH bodies AS (
    SELECT DISTINCT left(k, -2) || d AS body
    FROM issued, regexp_split_to_table('0123456789ABCDEFGHJKMNPQRSTVWXYZ', '') AS d
), mutants AS (
    SELECT b.body, chr(a) AS c, b.body || chr(a) AS m,
           coalesce((s.sum + ((length(b.body) % 66) + 1) *
                     (nullif(strpos('0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz-.:_',
                                    chr(a)), 0) - 1)) % 67 = 0, false) AS fits
    FROM bodies AS b, LATERAL (SELECT pg_temp.check_sum(b.body) AS sum) AS s,
         generate_series(32, 126) AS a
)
SELECT count(DISTINCT body) AS bodies,
       count(*) AS mutants,
       count(*) FILTER (WHERE fits AND c ~ '^[0-9A-Z]$') AS fitted_inside,
       count(*) FILTER (WHERE fits AND c !~ '^[0-9A-Z]$') AS fitted_outside,
       count(*) FILTER (WHERE pay_bizno_valid(m)) AS accepted,
       count(*) FILTER (WHERE pay_bizno_valid(m) <> (fits AND c ~ '^[0-9A-Z]$')) AS wrong_answers
FROM mutants;

-- The bizNos of 1.4 are marked (their uniqueness part starts with one of
-- G-Z) and make their plain sum vanish too: no character dropped from or
-- added anywhere to one of them passes, doubled ones among them.
CREATE TEMP TABLE marked AS SELECT pay_bizno('PAY', 'ORD-' || g) AS k FROM generate_series(1, 20) AS g;
SELECT bool_and(substr(k, length(k) - 13, 1) ~ '^[GHJKMNPQRSTVWXYZ]$') AS all_marked,
       bool_and(pay_bizno_valid(k)) AS all_valid
FROM marked;
SELECT count(*) AS edits, count(*) FILTER (WHERE pay_bizno_valid(e)) AS accepted
FROM marked,
     LATERAL (SELECT left(k, i - 1) || substr(k, i + 1) FROM generate_series(1, length(k)) AS i
              UNION ALL
              SELECT left(k, i) || c || substr(k, i + 1)
              FROM generate_series(0, length(k)) AS i,
                   regexp_split_to_table('0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz-.:_', '') AS c)
     AS t(e);
