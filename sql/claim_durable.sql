-- A claim is durable before it is acted on.  A PROCEED answered inside a
-- transaction block is not committed when the caller reads it: should the
-- transaction roll back after the bank call (an error, a crash, a lost
-- connection), the claim is lost with it, and the retry is answered PROCEED
-- under the same attempt again, which the bank charges again.  So pay_claim,
-- pay_open_claim and pay_begin refuse (25001 pay_claim_in_transaction) to
-- run inside a transaction block, whatever they would answer, unless
-- idempotent_pay.claim_in_transaction = allow.  This file runs without the
-- setting's opt-out but where it says so.

\set VERBOSITY default
SELECT action, attempt FROM pay_claim('CD-PAID', 10, 'EUR');
SHOW idempotent_pay.claim_in_transaction;
SELECT pay_succeed('CD-PAID', 'BANK-CD-1', 1);
SELECT action, attempt FROM pay_claim('CD-IN-FLIGHT', 10, 'EUR');
SELECT pay_open('CDSHOP', 'order-1', 10, 'EUR') AS order_bizno \gset

-- Inside BEGIN: a new payment, one in flight, one paid, an opened one --
-- refused whatever the answer would be, so that a caller meets it on the
-- first test; the message names the function and the risk.
BEGIN;
SELECT action, attempt FROM pay_claim('CD-NEW', 10, 'EUR');
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
BEGIN;
SELECT action FROM pay_claim('CD-PAID');
ROLLBACK;
BEGIN;
SELECT action FROM pay_claim('CD-IN-FLIGHT');
ROLLBACK;
BEGIN;
SELECT pay_begin(:'order_bizno');
ROLLBACK;
BEGIN;
SELECT action FROM pay_open_claim('CDSHOP', 'order-2', 10, 'EUR');
ROLLBACK;
-- Nothing was written by the refused calls.
SELECT CASE WHEN bizno = :'order_bizno' THEN 'CD order-1' ELSE bizno END AS payment, status, attempt
FROM pay_ledger WHERE bizno LIKE 'CD-%' OR bizno = :'order_bizno' ORDER BY created_at, bizno;

-- Calls that never answer PROCEED run inside a transaction as before: a
-- reconciler settles in one (pay_stuck's locks last until it commits).
BEGIN;
SELECT bizno FROM pay_stuck('0 seconds') WHERE bizno = 'CD-IN-FLIGHT';
SELECT pay_succeed('CD-IN-FLIGHT', 'BANK-CD-2', 1);
SELECT pay_open('CDSHOP', 'order-1', 10, 'EUR') = :'order_bizno' AS same_bizno;
COMMIT;

-- Several statements of one query are one transaction block too, as are a
-- savepoint and a PL/pgSQL block with an EXCEPTION clause, whose handler
-- may roll the claim back while the statement goes on.
SELECT 1 AS first_statement \; SELECT action FROM pay_claim('CD-NEW', 10, 'EUR');
BEGIN;
SAVEPOINT s;
SELECT action FROM pay_claim('CD-NEW', 10, 'EUR');
ROLLBACK;
DO $$
BEGIN
    PERFORM pay_claim('CD-NEW', 10, 'EUR');
EXCEPTION WHEN serialization_failure THEN
    RAISE NOTICE 'retry';
END
$$;
SELECT count(*) AS recorded FROM pay_ledger WHERE bizno = 'CD-NEW';

-- In autocommit each claim is committed when it answers: the retry after
-- any failure of the caller is IN_PROGRESS, never charged again.  So is a
-- claim in a function or procedure called in autocommit, without an
-- EXCEPTION clause around it (the statement commits it).
SELECT action, attempt FROM pay_claim('CD-NEW', 10, 'EUR');
SELECT action, attempt FROM pay_claim('CD-NEW', 10, 'EUR');
SELECT action, attempt FROM pay_open_claim('CDSHOP', 'order-2', 10, 'EUR');
SELECT pay_begin(:'order_bizno');
CREATE FUNCTION cd_claim(key text) RETURNS pay_action
LANGUAGE plpgsql AS $$
BEGIN
    RETURN (pay_claim(key, 10, 'EUR')).action;
END
$$;
SELECT cd_claim('CD-FUNCTION') AS in_a_function;
CREATE PROCEDURE cd_claim_and_commit(key text)
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pay_claim(key, 10, 'EUR');
    COMMIT;
    PERFORM pay_claim(key || '-AFTER-COMMIT', 10, 'EUR');
END
$$;
CALL cd_claim_and_commit('CD-PROCEDURE');
SELECT bizno, status, attempt FROM pay_ledger WHERE bizno LIKE 'CD-PROCEDURE%' ORDER BY 1;

-- The opt-out, for code that commits the claim itself before it calls the
-- bank (a test harness, a claim committed with the caller's own rows): any
-- role may set it, for a transaction (SET LOCAL) or a session.  What it
-- lets happen: a claim rolled back is claimed again under the same attempt.
CREATE ROLE regress_cd_app;
SELECT pay_grant('regress_cd_app');
SET ROLE regress_cd_app;
BEGIN;
SET LOCAL idempotent_pay.claim_in_transaction = allow;
SELECT action, attempt FROM pay_claim('CD-ROLLED-BACK', 10, 'EUR');
ROLLBACK;
SHOW idempotent_pay.claim_in_transaction;
SET idempotent_pay.claim_in_transaction = allow;
BEGIN;
SELECT action, attempt FROM pay_claim('CD-ROLLED-BACK', 10, 'EUR');
COMMIT;
RESET idempotent_pay.claim_in_transaction;
SELECT action, attempt FROM pay_claim('CD-ROLLED-BACK', 10, 'EUR');
RESET ROLE;
SET idempotent_pay.claim_in_transaction = maybe;

SELECT bizno, problem FROM pay_verify() WHERE bizno LIKE 'CD-%' OR bizno = :'order_bizno';

-- An installation of 1.3 not yet updated keeps 1.3's rules with the new
-- library: it claims inside BEGIN; once updated to 1.4 it refuses.
SELECT current_database() AS regression_database \gset
CREATE DATABASE claim_durable13;
\c claim_durable13
SET client_min_messages = warning;
CREATE EXTENSION idempotent_pay VERSION '1.3';
BEGIN;
SELECT action, attempt FROM pay_claim('CD13-1', 10, 'EUR');
SELECT action FROM pay_open_claim('CD13', 'order-1', 10, 'EUR');
SELECT pay_begin('CD13-2', 10, 'EUR');
COMMIT;
ALTER EXTENSION idempotent_pay UPDATE TO '1.4';
BEGIN;
SELECT action FROM pay_claim('CD13-3', 10, 'EUR');
ROLLBACK;
\c :regression_database
DROP DATABASE claim_durable13;
DROP FUNCTION cd_claim(text);
DROP PROCEDURE cd_claim_and_commit(text);
DROP OWNED BY regress_cd_app;
DROP ROLE regress_cd_app;
