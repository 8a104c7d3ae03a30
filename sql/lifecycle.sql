-- The ledger across the database's life: DROP refused while it holds
-- payments, the deliberate way to remove it, guards that stay ALWAYS, and a
-- restore's writes taken as they come.

SELECT current_database() AS regression_database \gset
CREATE DATABASE regress_lifecycle;
-- its payments use keys of their own ('L-1'), as setup.sql explains
ALTER DATABASE regress_lifecycle SET idempotent_pay.foreign_keys = accept;
\c regress_lifecycle
CREATE ROLE regress_lifecycle_dba SUPERUSER;
SET ROLE regress_lifecycle_dba;
CREATE EXTENSION idempotent_pay;
RESET ROLE;
SELECT pay_begin('L-1', 10, 'EUR'), pay_succeed('L-1', 'BANK-1', 1);
SELECT pay_begin('L-2', 10, 'EUR');

-- DROP EXTENSION, with or without CASCADE, and DROP SCHEMA ... CASCADE of
-- its schema are refused (2BP01), counting the payments.
DROP EXTENSION idempotent_pay;
\echo :LAST_ERROR_SQLSTATE
DROP EXTENSION idempotent_pay CASCADE;
DROP SCHEMA public CASCADE;
\echo :LAST_ERROR_SQLSTATE
DROP EXTENSION IF EXISTS plpgsql, idempotent_pay CASCADE;
DROP OWNED BY regress_lifecycle_dba;
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) AS payments_kept FROM pay_ledger;
DROP SCHEMA IF EXISTS no_such_schema CASCADE;
SELECT pay_refuse_drop();

-- A guard re-enabled by ALTER TABLE ... ENABLE TRIGGER [ALL] -- the end of
-- pg_restore --disable-triggers, in maintenance -- fires ALWAYS again, also
-- on a table its (non-superuser) owner guards.  Outside maintenance the
-- ledger's triggers are not switched off at all.
\set VERBOSITY terse
ALTER TABLE pay_ledger DISABLE TRIGGER ALL;
ALTER TABLE pay_ledger ENABLE REPLICA TRIGGER pay_ledger_guard;
\set VERBOSITY default
SET idempotent_pay.maintenance = on;
ALTER TABLE pay_ledger DISABLE TRIGGER ALL;
RESET idempotent_pay.maintenance;
ALTER TABLE pay_ledger ENABLE TRIGGER ALL;
CREATE ROLE regress_lifecycle_owner;
CREATE TABLE orders (id integer PRIMARY KEY, status text NOT NULL);
SELECT pay_protect('orders');
ALTER TABLE orders OWNER TO regress_lifecycle_owner;
SET ROLE regress_lifecycle_owner;
ALTER TABLE orders ENABLE TRIGGER pay_guard;
ALTER TABLE orders ADD COLUMN note text;
RESET ROLE;
SELECT table_name, trigger_name, enabled FROM pay_guards ORDER BY 1, 2;
-- The event trigger behind it fires on every ALTER TABLE in the database:
-- a role that may not even use the extension's schema still alters its own
-- tables.
CREATE SCHEMA shop AUTHORIZATION regress_lifecycle_owner;
REVOKE USAGE ON SCHEMA public FROM PUBLIC;
SET ROLE regress_lifecycle_owner;
CREATE TABLE shop.items (id integer);
ALTER TABLE shop.items ADD COLUMN name text;
RESET ROLE;
GRANT USAGE ON SCHEMA public TO PUBLIC;
-- Disabling stays a deliberate superuser act, and is not undone.
ALTER TABLE orders DISABLE TRIGGER pay_guard;
SELECT enabled FROM pay_guards WHERE table_name = 'orders'::regclass AND trigger_name = 'pay_guard';
ALTER TABLE orders ENABLE ALWAYS TRIGGER pay_guard;

-- A restore's INSERT (a superuser, row_security off, check_function_bodies
-- off: what pg_dump's scripts and pg_restore set) is taken as it comes:
-- any state, its history untouched, no journal row.
SET row_security = off;
SET check_function_bodies = false;
INSERT INTO pay_ledger (bizno, prefix, biz_id, status, amount, currency, attempt, channel_ref,
                        created_at, updated_at, processing_since)
VALUES ('L-RESTORED', NULL, NULL, 'SUCCESS', 5, 'EUR', 2, 'BANK-9',
        '2026-01-01 10:00+00', '2026-01-01 10:05+00', '2026-01-01 10:04+00');
INSERT INTO orders (id, status) VALUES (1, 'SUCCESS');
-- The API is never taken for a restore: its payment is journaled.
SELECT pay_begin('L-API', 1, 'EUR');
RESET row_security;
RESET check_function_bodies;
SELECT bizno, status, attempt, created_at, updated_at, processing_since FROM pay_ledger
WHERE bizno = 'L-RESTORED';
SELECT bizno, status, attempt, created_at > '2026-01-01 10:00+00' AS stamped_by_the_ledger FROM pay_ledger
WHERE bizno = 'L-API';
SELECT bizno, count(*) AS journal_rows FROM pay_journal
WHERE bizno IN ('L-RESTORED', 'L-API') GROUP BY bizno ORDER BY bizno;
-- Outside that state the same INSERT is refused.
INSERT INTO pay_ledger (bizno, status) VALUES ('L-PLANTED', 'SUCCESS');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO orders (id, status) VALUES (2, 'SUCCESS');
\echo :LAST_ERROR_SQLSTATE
-- A real restore brings the journal too; this row came alone, and
-- pay_verify says so.
SELECT bizno, problem FROM pay_verify();

-- A payment that can never be deleted, gone from the ledger behind the
-- guard's back: its journal still says SUCCESS, and pay_verify says so.
SET idempotent_pay.maintenance = on;
ALTER TABLE pay_ledger DISABLE TRIGGER pay_ledger_guard;
DELETE FROM pay_ledger WHERE bizno = 'L-1';
-- the guard switched off shows too, while it is
SELECT problem FROM pay_verify() WHERE bizno IS NULL;
ALTER TABLE pay_ledger ENABLE ALWAYS TRIGGER pay_ledger_guard;
RESET idempotent_pay.maintenance;
SELECT bizno, problem FROM pay_verify() ORDER BY bizno;

-- The deliberate way to remove the extension (doc/operations.md): archive, empty
-- both tables as a superuser with their TRUNCATE guards off, then drop.
\copy (SELECT count(*) FROM pay_ledger) TO stdout
\copy (SELECT count(*) FROM pay_journal) TO stdout
BEGIN;
SET LOCAL idempotent_pay.maintenance = on;
ALTER TABLE pay_ledger DISABLE TRIGGER pay_ledger_guard_truncate;
ALTER TABLE pay_journal DISABLE TRIGGER pay_journal_guard_truncate;
TRUNCATE pay_ledger, pay_journal;
DROP EXTENSION idempotent_pay CASCADE;
COMMIT;
SELECT count(*) AS extensions_left FROM pg_extension WHERE extname = 'idempotent_pay';

\c :regression_database
DROP DATABASE regress_lifecycle;
DROP ROLE regress_lifecycle_owner, regress_lifecycle_dba;
