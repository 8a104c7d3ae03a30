-- pay_get and pay_find: "no row" means no payment has the key or the
-- business action, never "not paid".  A caller that checks before it pays
-- gets an archived payment's row from the archive while its month is kept
-- (the columns a live payment has), 55000 pay_archived once the month is
-- dropped, 22P02 for a bizNo that fails its check; no row for a key that
-- was never paid.  The same for the application's role and the operators'.
-- Then an installed 1.3 keeps 1.3's answers, and its update to 1.4 gives
-- these.

-- The answer of a lookup: per row, status, amount, currency, attempt and
-- reference (a generated bizNo's time and uniqueness left out), or "no
-- row", or the SQLSTATE and constraint of the error.
CREATE FUNCTION lookup(call text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    found text;
    state text;
    constraint_name text;
BEGIN
    EXECUTE format($q$
        SELECT string_agg(concat_ws(' ', regexp_replace(r.bizno, '-[0-9]{17}-[0-9]{4}-[0-9A-Z]{14}$', '-…'),
                                    r.status, r.amount, r.currency, r.attempt, coalesce(r.channel_ref, '-'),
                                    coalesce(regexp_replace(r.parent, '-[0-9]{17}-[0-9]{4}-[0-9A-Z]{14}$', '-…'), '-')),
                          '; ')
        FROM (%s) AS r$q$, call) INTO found;
    RETURN coalesce(found, 'no row');
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, constraint_name = CONSTRAINT_NAME;
    RETURN state || coalesce(' ' || nullif(constraint_name, ''), '');
END
$$;

-- Payments in every state an archive takes, a refund, and two it leaves,
-- last changed in May 2024 (set with the ledger's bookkeeping off, as a
-- replica would write it); one of today.
SELECT payment_in('LK-SUCCESS', 'SUCCESS'), payment_in('LK-FAILED', 'FAILED'),
       payment_in('LK-PROCESSING', 'PROCESSING');
SELECT attempt FROM pay_claim('LK-RETRIED', 30, 'EUR');
SELECT pay_fail('LK-RETRIED', 'timeout', 1), pay_reset('LK-RETRIED', 'retry');
SELECT attempt FROM pay_claim('LK-RETRIED', 30, 'EUR');
SELECT pay_succeed('LK-RETRIED', 'BANK-RETRIED', 2);
SELECT pay_open('LKSHOP', 'ORDER-INIT', 7, 'EUR') AS order_init \gset
SELECT pay_open('LKSHOP', 'ORDER-PAID', 12.50, 'EUR') AS order_paid \gset
SELECT (pay_claim(:'order_paid', 12.50, 'EUR')).action, pay_succeed(:'order_paid', 'BANK-ORDER', 1);
SELECT pay_refund_open(:'order_paid', 'R1', 4) AS refund \gset
SELECT (pay_claim(:'refund', 4, 'EUR')).action, pay_succeed(:'refund', 'BANK-R1', 1);
SELECT payment_in('LK-LIVE', 'SUCCESS');
SET session_replication_role = replica;
UPDATE pay_ledger SET updated_at = '2024-05-10 12:00+00'
WHERE bizno IN ('LK-SUCCESS', 'LK-FAILED', 'LK-PROCESSING', 'LK-RETRIED', :'order_init', :'order_paid', :'refund');
RESET session_replication_role;

-- Keys mistyped: the paid order's bizNo with two neighbouring characters of
-- its business action swapped, and with its check character replaced by
-- one a bizNo is never issued with; a bizNo issued for a business action
-- never paid; a key of another system never paid.
SELECT regexp_replace(:'order_paid', 'ORDER-PAID', 'ORDER-PIAD') AS swapped,
       left(:'order_paid', -1) || 'a' AS unissued_check,
       pay_bizno('LKSHOP', 'ORDER-NEVER') AS never_paid \gset
SELECT outcome(format('SELECT pay_bizno_valid(%L)', :'swapped')) AS swapped_valid,
       outcome(format('SELECT pay_bizno_valid(%L)', :'unissued_check')) AS unissued_valid,
       outcome(format('SELECT pay_bizno_valid(%L)', :'never_paid')) AS never_paid_valid;

CREATE ROLE regress_lookup_app;
CREATE ROLE regress_lookup_operator;
SELECT pay_grant('regress_lookup_app'), pay_grant_operator('regress_lookup_operator');
SET ROLE regress_lookup_operator;
SELECT pay_archive('2024-06-01') AS archived;
RESET ROLE;
SELECT * FROM (
    SELECT CASE bizno WHEN :'order_init' THEN 'ORDER-INIT' WHEN :'order_paid' THEN 'ORDER-PAID'
                      WHEN :'refund' THEN 'its refund' ELSE bizno END AS payment,
           status, to_char(month, 'YYYY-MM') AS month
    FROM pay_ledger_archive
    WHERE bizno IN ('LK-SUCCESS', 'LK-FAILED', 'LK-RETRIED', :'order_init', :'order_paid', :'refund')) AS a
ORDER BY payment COLLATE "C";

-- Every lookup, as the application, as the operators and as the owner.
CREATE TABLE lookup_calls (n serial, call text, shown text);
INSERT INTO lookup_calls (call, shown) VALUES
    ('SELECT * FROM pay_get(''LK-SUCCESS'')', NULL),
    ('SELECT * FROM pay_get(''LK-FAILED'')', NULL),
    ('SELECT * FROM pay_get(''LK-RETRIED'')', NULL),
    (format('SELECT * FROM pay_get(%L)', :'order_init'), 'pay_get(<ORDER-INIT''s bizNo>)'),
    (format('SELECT * FROM pay_get(%L)', :'order_paid'), 'pay_get(<ORDER-PAID''s bizNo>)'),
    (format('SELECT * FROM pay_get(%L)', :'refund'), 'pay_get(<its refund''s bizNo>)'),
    ('SELECT * FROM pay_find(''LKSHOP'', ''ORDER-INIT'')', NULL),
    ('SELECT * FROM pay_find(''LKSHOP'', ''ORDER-PAID'')', NULL),
    ('SELECT * FROM pay_get(pay_bizno(''LKSHOP'', ''ORDER-PAID''))', NULL),
    ('SELECT * FROM pay_get(''LK-PROCESSING'')', NULL),
    ('SELECT * FROM pay_get(''LK-LIVE'')', NULL),
    (format('SELECT * FROM pay_get(%L)', :'swapped'), 'pay_get(<ORDER-PAID''s bizNo, two characters swapped>)'),
    (format('SELECT * FROM pay_get(%L)', :'unissued_check'), 'pay_get(<ORDER-PAID''s bizNo, check character ''a''>)'),
    (format('SELECT * FROM pay_get(%L)', :'never_paid'), 'pay_get(<a bizNo of ORDER-NEVER>)'),
    ('SELECT * FROM pay_find(''LKSHOP'', ''ORDER-NEVER'')', NULL),
    ('SELECT * FROM pay_get(''LK-NEVER'')', NULL),
    ('SELECT * FROM pay_get(NULL)', NULL);
CREATE FUNCTION lookup_calls_as(role name) RETURNS TABLE (n integer, answer text)
LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('SET LOCAL ROLE %I', role);
    RETURN QUERY SELECT c.n, lookup(c.call) FROM lookup_calls AS c;
    RESET ROLE;
END
$$;
CREATE VIEW lookup_answers AS
SELECT coalesce(c.shown, regexp_replace(c.call, '^SELECT \* FROM ', '')) AS call,
       a.answer AS application,
       CASE WHEN o.answer = a.answer THEN 'same' ELSE o.answer END AS operator,
       CASE WHEN s.answer = a.answer THEN 'same' ELSE s.answer END AS owner
FROM lookup_calls AS c
JOIN lookup_calls_as('regress_lookup_app') AS a ON a.n = c.n
JOIN lookup_calls_as('regress_lookup_operator') AS o ON o.n = c.n
JOIN lookup_calls_as(current_user) AS s ON s.n = c.n
ORDER BY c.n;
GRANT SELECT ON lookup_calls TO regress_lookup_app, regress_lookup_operator;

-- 1. The month kept: an archived payment's row, as the ledger had it; a
-- refund by its bizNo; a business action by pay_find.  A new bizNo of an
-- archived business action is refused, as its claim is; a mistyped bizNo
-- is 22P02; what was never paid is no row.
SELECT * FROM lookup_answers;
-- the row is the ledger's as it was, column for column (the card flow's
-- kind, expires_in and expires_at, which the archive does not keep, NULL)
SELECT (SELECT g FROM pay_get(:'order_paid') AS g)::text
     = (SELECT ROW(a.bizno, a.prefix, a.biz_id, a.status, a.amount, a.currency, a.attempt, a.channel_ref,
                   a.last_error, a.created_at, a.updated_at, a.processing_since, a.note, a.parent,
                   a.refund_key, a.response, NULL, NULL, NULL)::pay_ledger::text
        FROM pay_ledger_archive AS a WHERE a.bizno = :'order_paid') AS row_as_archived;
-- how a caller tells the archive's row from the ledger's (doc/guide.md):
-- in the same statement, under the same snapshot, the ledger has no row
SET ROLE regress_lookup_app;
SELECT k.key, g.status, g.channel_ref,
       NOT EXISTS (SELECT FROM pay_ledger AS l WHERE l.bizno = g.bizno) AS archived
FROM unnest(ARRAY['LK-SUCCESS', 'LK-LIVE']) AS k(key), LATERAL pay_get(k.key) AS g
ORDER BY k.key COLLATE "C";
RESET ROLE;
-- the refusals' messages and hints
SELECT regexp_replace(refusal_message(format('SELECT * FROM pay_get(%L)', :'swapped')),
                      'LKSHOP-ORDER-PIAD-[0-9A-Z-]+', '<mistyped>') AS mistyped;
SELECT regexp_replace(refusal_message($$SELECT * FROM pay_get(pay_bizno('LKSHOP', 'ORDER-PAID'))$$),
                      'LKSHOP-ORDER-PAID-[0-9A-Z-]+', '<a bizNo>', 'g') AS another_bizno;

-- 2. The month dropped: what was archived is 55000 pay_archived, however it
-- is looked up; the rest answers as before.
DROP TABLE pay_ledger_archive_2024_05, pay_journal_archive_2024_05;
SELECT * FROM lookup_answers;
SELECT refusal_message('SELECT * FROM pay_get(''LK-SUCCESS'')') AS dropped;
SELECT refusal_message('SELECT * FROM pay_find(''LKSHOP'', ''ORDER-PAID'')') AS dropped_order;

-- 3. The archive's tables stay the owner's: the functions read them as
-- their owner, the roles themselves cannot.
SET ROLE regress_lookup_app;
SELECT outcome('SELECT count(*) FROM pay_ledger_archive') AS application_reads_archive,
       outcome('SELECT count(*) FROM pay_archive_keys') AS application_reads_hashes;
RESET ROLE;
SET ROLE regress_lookup_operator;
SELECT outcome('SELECT count(*) FROM pay_ledger_archive') AS operator_reads_archive;
RESET ROLE;

DROP VIEW lookup_answers;
DROP FUNCTION lookup_calls_as(name);
DROP TABLE lookup_calls;
DROP FUNCTION lookup(text);
DROP OWNED BY regress_lookup_app, regress_lookup_operator;
DROP ROLE regress_lookup_app, regress_lookup_operator;

-- 4. 1.3 installed, with this library: pay_get and pay_find are 1.3's SQL
-- and answer as 1.3 did -- no row for an archived payment and for a
-- mistyped bizNo; updated to 1.4, they answer as above, to the roles
-- granted them under 1.3.
SELECT current_database() AS regression_database \gset
CREATE DATABASE lookup13;
\c lookup13
SET client_min_messages = warning;
CREATE EXTENSION idempotent_pay VERSION '1.3';
CREATE FUNCTION lookup(call text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    found text;
    state text;
    constraint_name text;
BEGIN
    EXECUTE format('SELECT string_agg(concat_ws('' '', r.status, r.attempt), ''; '') FROM (%s) AS r', call)
    INTO found;
    RETURN coalesce(found, 'no row');
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, constraint_name = CONSTRAINT_NAME;
    RETURN state || coalesce(' ' || nullif(constraint_name, ''), '');
END
$$;
CREATE ROLE regress_lookup13_app;
SELECT pay_grant('regress_lookup13_app');
SELECT pay_open('V13', 'ORDER-1', 10, 'EUR') AS v13_order \gset
SELECT (pay_claim(:'v13_order', 10, 'EUR')).action, pay_succeed(:'v13_order', 'BANK-V13', 1);
SET session_replication_role = replica;
UPDATE pay_ledger SET updated_at = '2024-05-10 12:00+00';
RESET session_replication_role;
SELECT pay_archive('2024-06-01') AS archived;
CREATE VIEW answers AS
SELECT lookup(format('SELECT * FROM pay_get(%L)', :'v13_order')) AS get_archived,
       lookup('SELECT * FROM pay_find(''V13'', ''ORDER-1'')') AS find_archived,
       lookup(format('SELECT * FROM pay_get(%L)', left(:'v13_order', -1) || 'a')) AS get_mistyped;
GRANT SELECT ON answers TO regress_lookup13_app;
SET ROLE regress_lookup13_app;
SELECT '1.3' AS version, * FROM answers;
RESET ROLE;
ALTER EXTENSION idempotent_pay UPDATE TO '1.4';
SET ROLE regress_lookup13_app;
SELECT '1.4' AS version, * FROM answers;
RESET ROLE;
\c :regression_database
DROP DATABASE lookup13;
DROP ROLE regress_lookup13_app;
