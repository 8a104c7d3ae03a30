-- The upgrade path: install 1.0, pay with it (with the library of today),
-- ALTER EXTENSION ... UPDATE, and find the old payments, the guards and the
-- new functions working; the same from 1.1, 1.2 and 1.3.  Then compare,
-- object by object, a fresh install of the default version -- which runs
-- the complete script idempotent_pay--1.4.sql -- with the extension the
-- update scripts make: once updated from 1.0 with nothing else done, and
-- once for each of the four installations used above.

-- The extension as rows (object, aspect, value), one JSON array: every
-- member (pg_depend) and, by kind, what defines it -- a function's
-- definition line by line (signature, result, language, volatility,
-- strictness, SECURITY DEFINER, parallel safety, cost, rows, SET clauses,
-- body or C symbol), a type's labels, base type or attributes, a domain's
-- constraints, a table's or view's columns in their order with type,
-- NOT NULL, default, collation and storage, its options, constraints,
-- indexes, triggers (with WHEN clause and how they fire), rules and
-- policies, a view's definition, a sequence's parameters and owning column,
-- an event trigger's event, tags and function; privileges, initial
-- privileges (pg_init_privs, what pg_dump takes for the extension's own),
-- comments (also on columns), and the tables pg_dump dumps the rows of.
-- Privileges are compared as they are in effect: a grant revoked again (a
-- pay_grant undone by DROP OWNED BY) leaves an ACL spelled out where a
-- fresh install has the default, the same privileges.
SELECT current_database() AS regression_database \gset
SELECT $query$
    WITH member AS (
        SELECT d.classid, d.objid, pg_describe_object(d.classid, d.objid, 0) AS object
        FROM pg_depend AS d
        JOIN pg_extension AS e ON e.oid = d.refobjid
        WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e' AND e.extname = 'idempotent_pay'
          -- PostgreSQL 17 and 18 (not 15) also record a type's array type and
          -- a table's, view's or sequence's row type as members: each is
          -- described with what it belongs to, so left out on every major
          AND NOT EXISTS (SELECT FROM pg_type AS t
                          WHERE d.classid = 'pg_type'::regclass AND t.oid = d.objid
                            AND (EXISTS (SELECT FROM pg_type AS elem WHERE elem.typarray = t.oid)
                                 OR EXISTS (SELECT FROM pg_class AS c
                                            WHERE c.oid = t.typrelid AND c.relkind <> 'c')))
    ), relation AS (
        SELECT m.object, c.*
        FROM member AS m JOIN pg_class AS c ON c.oid = m.objid
        WHERE m.classid = 'pg_class'::regclass
    ), typ AS (
        SELECT m.object, t.*
        FROM member AS m JOIN pg_type AS t ON t.oid = m.objid
        WHERE m.classid = 'pg_type'::regclass
    ), attribute AS (
        SELECT o.object, a.attname,
               row_number() OVER (PARTITION BY a.attrelid ORDER BY a.attnum) AS position,
               format_type(a.atttypid, a.atttypmod) ||
               CASE WHEN a.attnotnull THEN ' NOT NULL' ELSE '' END ||
               coalesce(' DEFAULT ' || pg_get_expr(ad.adbin, ad.adrelid), '') ||
               CASE WHEN a.attcollation <> t.typcollation THEN ' COLLATE ' || a.attcollation::regcollation ELSE '' END ||
               CASE WHEN a.attidentity <> '' THEN ' identity ' || a.attidentity::text ELSE '' END ||
               CASE WHEN a.attgenerated <> '' THEN ' generated ' || a.attgenerated::text ELSE '' END ||
               ' storage ' || a.attstorage::text ||
               CASE WHEN a.attcompression <> '' THEN ' compression ' || a.attcompression::text ELSE '' END ||
               CASE WHEN a.attstattarget <> -1 THEN ' statistics ' || a.attstattarget ELSE '' END ||
               coalesce(' privileges ' || a.attacl::text, '') AS definition
        FROM (SELECT object, oid AS relid FROM relation
              UNION ALL
              SELECT object, typrelid FROM typ WHERE typrelid <> 0) AS o
        JOIN pg_attribute AS a ON a.attrelid = o.relid AND a.attnum > 0 AND NOT a.attisdropped
        JOIN pg_type AS t ON t.oid = a.atttypid
        LEFT JOIN pg_attrdef AS ad ON ad.adrelid = a.attrelid AND ad.adnum = a.attnum
    ), aspect (object, aspect, value) AS (
        SELECT m.object, 'member', (pg_identify_object(m.classid, m.objid, 0)).type
        FROM member AS m
        UNION ALL
        SELECT m.object,
               'comment' || CASE WHEN c.objsubid <> 0
                                 THEN ' on ' || pg_describe_object(c.classoid, c.objoid, c.objsubid) ELSE '' END,
               c.description
        FROM member AS m
        JOIN pg_description AS c ON c.classoid = m.classid AND c.objoid = m.objid
        UNION ALL
        SELECT m.object,
               'initial privileges' || CASE WHEN i.objsubid <> 0
                                            THEN ' of ' || pg_describe_object(i.classoid, i.objoid, i.objsubid) ELSE '' END,
               i.privtype::text || ' ' || i.initprivs::text
        FROM member AS m
        JOIN pg_init_privs AS i ON i.classoid = m.classid AND i.objoid = m.objid
        -- functions
        UNION ALL
        SELECT m.object, 'definition line ' || to_char(l.n, 'FM000'), l.line
        FROM member AS m,
             regexp_split_to_table(pg_get_functiondef(m.objid), E'\n') WITH ORDINALITY AS l(line, n)
        WHERE m.classid = 'pg_proc'::regclass
        UNION ALL
        SELECT m.object, 'privileges', coalesce(p.proacl, acldefault('f', p.proowner))::text
        FROM member AS m JOIN pg_proc AS p ON p.oid = m.objid
        WHERE m.classid = 'pg_proc'::regclass
        -- types and domains
        UNION ALL
        SELECT t.object, 'type',
               CASE t.typtype
                   WHEN 'e' THEN 'enum ' || (SELECT string_agg(e.enumlabel, ', ' ORDER BY e.enumsortorder)
                                             FROM pg_enum AS e WHERE e.enumtypid = t.oid)
                   WHEN 'd' THEN 'domain over ' || format_type(t.typbasetype, t.typtypmod) ||
                                 CASE WHEN t.typnotnull THEN ' NOT NULL' ELSE '' END ||
                                 coalesce(' DEFAULT ' || t.typdefault, '')
                   WHEN 'c' THEN 'composite'
                   ELSE t.typtype::text
               END || ' privileges ' || coalesce(t.typacl, acldefault('T', t.typowner))::text
        FROM typ AS t
        UNION ALL
        SELECT t.object, 'constraint ' || c.conname, pg_get_constraintdef(c.oid)
        FROM typ AS t JOIN pg_constraint AS c ON c.contypid = t.oid
        -- NOT NULL is the type's above (17 records a domain's as a constraint too)
        WHERE c.contype <> 'n'
        -- tables, views, sequences and their parts
        UNION ALL
        SELECT r.object, 'relation',
               r.relkind::text || ' persistence ' || r.relpersistence::text ||
               ' options ' || coalesce(r.reloptions::text, '{}') ||
               ' row security ' || r.relrowsecurity || '/' || r.relforcerowsecurity ||
               ' replica identity ' || r.relreplident::text ||
               ' privileges ' || coalesce(r.relacl, acldefault(CASE r.relkind WHEN 'S' THEN 's' ELSE 'r' END::"char",
                                                               r.relowner))::text
        FROM relation AS r
        UNION ALL
        SELECT a.object, 'column ' || a.attname, a.position || ': ' || a.definition
        FROM attribute AS a
        UNION ALL
        SELECT r.object, 'constraint ' || c.conname, pg_get_constraintdef(c.oid)
        FROM relation AS r JOIN pg_constraint AS c ON c.conrelid = r.oid
        -- NOT NULL is the column's (18 records it as a constraint too)
        WHERE c.contype <> 'n'
        UNION ALL
        SELECT r.object, 'index ' || i.indexrelid::regclass,
               pg_get_indexdef(i.indexrelid) ||
               CASE WHEN i.indisclustered THEN ' clustered' ELSE '' END ||
               CASE WHEN i.indisreplident THEN ' replica identity' ELSE '' END
        FROM relation AS r JOIN pg_index AS i ON i.indrelid = r.oid
        UNION ALL
        SELECT r.object, 'trigger ' || t.tgname, pg_get_triggerdef(t.oid) || ' enabled ' || t.tgenabled::text
        FROM relation AS r JOIN pg_trigger AS t ON t.tgrelid = r.oid
        UNION ALL
        SELECT r.object, 'rule ' || w.rulename, pg_get_ruledef(w.oid)
        FROM relation AS r JOIN pg_rewrite AS w ON w.ev_class = r.oid
        WHERE w.rulename <> '_RETURN'
        UNION ALL
        SELECT r.object, 'policy ' || p.polname,
               p.polcmd::text || ' ' || p.polpermissive || ' ' || p.polroles::regrole[]::text ||
               coalesce(' USING ' || pg_get_expr(p.polqual, p.polrelid), '') ||
               coalesce(' WITH CHECK ' || pg_get_expr(p.polwithcheck, p.polrelid), '')
        FROM relation AS r JOIN pg_policy AS p ON p.polrelid = r.oid
        UNION ALL
        SELECT r.object, 'view definition line ' || to_char(l.n, 'FM000'), l.line
        FROM relation AS r,
             regexp_split_to_table(pg_get_viewdef(r.oid, true), E'\n') WITH ORDINALITY AS l(line, n)
        WHERE r.relkind IN ('v', 'm')
        UNION ALL
        SELECT r.object, 'sequence',
               format('%s start %s increment %s min %s max %s cache %s%s', s.seqtypid::regtype, s.seqstart,
                      s.seqincrement, s.seqmin, s.seqmax, s.seqcache, CASE WHEN s.seqcycle THEN ' cycle' ELSE '' END)
        FROM relation AS r JOIN pg_sequence AS s ON s.seqrelid = r.oid
        UNION ALL
        SELECT r.object, 'owned by', pg_describe_object(d.refclassid, d.refobjid, d.refobjsubid)
        FROM relation AS r
        JOIN pg_depend AS d ON d.classid = 'pg_class'::regclass AND d.objid = r.oid AND d.deptype = 'a'
        WHERE r.relkind = 'S'
        -- event triggers
        UNION ALL
        SELECT m.object, 'event trigger',
               t.evtevent || ' ' || coalesce(t.evttags::text, '') || ' ' || t.evtfoid::regprocedure ||
               ' enabled ' || t.evtenabled::text
        FROM member AS m JOIN pg_event_trigger AS t ON t.oid = m.objid
        WHERE m.classid = 'pg_event_trigger'::regclass
        -- the extension itself, and the tables pg_dump dumps the rows of
        UNION ALL
        SELECT 'extension ' || e.extname,
               'version, schema, relocatable',
               e.extversion || ' ' || e.extnamespace::regnamespace || ' ' || e.extrelocatable
        FROM pg_extension AS e WHERE e.extname = 'idempotent_pay'
        UNION ALL
        SELECT pg_describe_object('pg_class'::regclass, c.config, 0), 'pg_dump dumps its rows',
               c.n || ' of ' || cardinality(e.extconfig) || ', condition ' || quote_literal(e.extcondition[c.n])
        FROM pg_extension AS e, unnest(e.extconfig) WITH ORDINALITY AS c(config, n)
        WHERE e.extname = 'idempotent_pay'
    )
    SELECT jsonb_agg(jsonb_build_array(object, aspect, coalesce(value, '(null)'))) AS members,
           count(DISTINCT object) AS objects, count(*) AS aspects
    FROM aspect
$query$ AS describe_extension \gset

CREATE DATABASE regress_chain;
CREATE DATABASE regress_upgraded;
CREATE DATABASE regress_from_1_1;
CREATE DATABASE regress_from_1_2;
CREATE DATABASE regress_from_1_3;
CREATE DATABASE regress_fresh;
-- the payments of 1.0 use keys of their own ('UP-1'), as setup.sql explains
ALTER DATABASE regress_upgraded SET idempotent_pay.foreign_keys = accept;

-- 1.0 updated to the default version with nothing else done: what the
-- update scripts alone make.
\c regress_chain
CREATE EXTENSION idempotent_pay VERSION '1.0';
ALTER EXTENSION idempotent_pay UPDATE;
SELECT extversion,
       'pay_status'::regtype::oid < 'pay_bizno(text, text)'::regprocedure::oid AS ran_complete_script
FROM pg_extension WHERE extname = 'idempotent_pay';
:describe_extension \gset chain_

\c regress_upgraded
CREATE EXTENSION idempotent_pay VERSION '1.0';
SELECT extversion FROM pg_extension WHERE extname = 'idempotent_pay';
SELECT pay_begin('UP-1', 10, 'EUR'), pay_succeed('UP-1', 'BANK-1');
SELECT pay_begin('UP-2', 20, 'EUR');
SELECT pay_begin('UP-3'), pay_fail('UP-3', 'declined');
CREATE TABLE orders (id integer PRIMARY KEY, status text NOT NULL);
INSERT INTO orders VALUES (1, 'SUCCESS'), (2, 'PROCESSING');
SELECT pay_protect('orders');
SELECT to_regprocedure('pay_reconcile(regclass, boolean, timestamptz)') IS NULL AS no_reconcile_in_1_0;
CREATE ROLE regress_upgrade_app;
SELECT pay_grant('regress_upgrade_app');
-- The 1.0 ledger has no note column: the failure's reason still reaches the journal.
SELECT to_status, note FROM pay_journal WHERE bizno = 'UP-3' ORDER BY seq;

ALTER EXTENSION idempotent_pay UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'idempotent_pay';

-- A role granted before the update may still call every API function
-- (pay_get was made anew), and reads no row for an unknown bizNo.
SELECT has_function_privilege('regress_upgrade_app', 'pay_get(text)', 'EXECUTE') AS get_still_granted,
       has_function_privilege('regress_upgrade_app', 'pay_succeed(text, text, bigint, jsonb)', 'EXECUTE')
           AND has_function_privilege('regress_upgrade_app', 'pay_claim(text, numeric, text)', 'EXECUTE')
           AS succeed_and_claim_granted,
       has_function_privilege('regress_upgrade_app', 'pay_refund_open(text, text, numeric, text)', 'EXECUTE')
           AS refund_granted;
SELECT count(*) AS unknown_rows FROM pay_get('UP-UNKNOWN');
-- 1.0's pay_begin recorded a new payment without an amount (UP-3 above);
-- since the update it binds pay_begin_1_3, which refuses that.
SELECT pay_begin('UP-NO-AMOUNT');
\echo :LAST_ERROR_SQLSTATE
DROP OWNED BY regress_upgrade_app;
-- The old payments answer as before.
SELECT bizno, status, attempt, amount FROM pay_ledger ORDER BY bizno;
SELECT pay_begin('UP-1') AS up_1, pay_begin('UP-2') AS up_2;
-- UP-3, failed without an amount under 1.0, is retried: since 1.3 a payment
-- enters PROCESSING only with its amount and currency (23502), so the
-- retry gives them.
SELECT pay_begin('UP-3') AS up_3;
\echo :LAST_ERROR_SQLSTATE
SELECT pay_begin('UP-3', 30, 'EUR') AS up_3_with_amount;
-- The guards hold, on the ledger and on the user's table.
UPDATE pay_ledger SET status = 'INIT' WHERE bizno = 'UP-1';
UPDATE orders SET status = 'INIT' WHERE id = 1;
UPDATE orders SET status = 'SUCCESS' WHERE id = 2;
-- The new functions work on the old data.
SELECT status, payments, resets FROM pay_stats;
CREATE TABLE statement (bizno text, amount numeric, currency text, status text, channel_ref text);
INSERT INTO statement VALUES ('UP-1', 10, 'EUR', 'SUCCESS', 'BANK-1'), ('UP-2', 20, 'EUR', 'SUCCESS', 'BANK-2');
SELECT kind, bizno, detail FROM pay_reconcile('statement', settle => true);
SELECT * FROM pay_verify();
:describe_extension \gset upgraded_

\c regress_from_1_1
CREATE EXTENSION idempotent_pay VERSION '1.1';
SELECT pay_begin('UP-4', 10, 'EUR'), pay_fail('UP-4', 'declined');
SELECT pay_reset('UP-4', 'operator: retry'), pay_begin('UP-4'), pay_succeed('UP-4', 'BANK-4');
SELECT pay_grant('regress_upgrade_app');
-- 1.1's CHECK lets NaN in: the update goes through, holds new writes to the
-- rule at once, and reports the old row, which a DBA then sets right.
INSERT INTO pay_ledger (bizno, status, amount) VALUES ('UP-NAN', 'INIT', 'NaN');
ALTER EXTENSION idempotent_pay UPDATE;
DELETE FROM pay_ledger WHERE bizno = 'UP-NAN';
ALTER DOMAIN pay_amount VALIDATE CONSTRAINT pay_amount_check;
ALTER DOMAIN pay_currency VALIDATE CONSTRAINT pay_currency_check;
SELECT extversion FROM pg_extension WHERE extname = 'idempotent_pay';
SELECT to_status, note FROM pay_journal WHERE bizno = 'UP-4' ORDER BY seq;
SELECT pay_begin('UP-4') AS up_4;
INSERT INTO pay_ledger (bizno, status, amount) VALUES ('UP-NAN', 'INIT', 'NaN');
\echo :LAST_ERROR_SQLSTATE
-- A payment made under 1.1 is refunded after the update, within what 1.1
-- journaled as captured, by a role pay_grant'ed under 1.1.
SELECT column_name FROM information_schema.columns
WHERE table_name = 'pay_ledger' AND column_name IN ('parent', 'refund_key') ORDER BY 1;
SET ROLE regress_upgrade_app;
SELECT pay_refund_open('UP-4', 'UP-4-R1', 6) AS up_4_refund \gset
SELECT action, status FROM pay_claim(:'up_4_refund');
SELECT pay_succeed(:'up_4_refund', 'BANK-4-REFUND', 1);
\set VERBOSITY sqlstate
SELECT action FROM pay_claim(pay_refund_open('UP-4', 'UP-4-R2', 5));
\set VERBOSITY default
RESET ROLE;
SELECT * FROM pay_refund_balance('UP-4');
SELECT * FROM pay_verify();
DROP OWNED BY regress_upgrade_app;
:describe_extension \gset from_1_1_

-- 1.2 -> 1.3: payments made the 1.2 way (a settlement without its attempt,
-- a payment opened without a currency, one in flight across the update)
-- are found and settled under 1.3's rules.
\c regress_from_1_2
CREATE EXTENSION idempotent_pay VERSION '1.2';
SELECT pay_begin('UP-5', 15, 'EUR') AS up_5, pay_succeed('UP-5', 'BANK-5') AS settled_without_attempt;
SELECT pay_begin('UP-6', 20, 'EUR') AS in_flight;
SELECT pay_open('UP', 'ORDER-7', 25) IS NOT NULL AS opened_without_currency;
-- 1.2 journals a second charge in a note, counted as captured at once
SELECT pay_begin('UP-8', 30, 'EUR'), pay_succeed('UP-8', 'BANK-8');
SELECT pay_succeed('UP-8', 'BANK-8b for a payment settled as x') AS second_charge_1_2;
SELECT captured FROM pay_refund_balance('UP-8');
SELECT pay_grant('regress_upgrade_app');
ALTER EXTENSION idempotent_pay UPDATE;
-- ... which the update turns into the row's columns, as confirmed: still
-- captured, and its reference whole
SELECT channel_ref, second_charge FROM pay_journal WHERE bizno = 'UP-8' AND second_charge IS NOT NULL;
SELECT channel_ref, confirmed FROM pay_second_charges() WHERE bizno = 'UP-8';
SELECT captured FROM pay_refund_balance('UP-8');
SELECT extversion FROM pg_extension WHERE extname = 'idempotent_pay';
SELECT bizno, status, attempt, amount, currency, channel_ref FROM pay_ledger WHERE bizno LIKE 'UP-_' ORDER BY bizno;
SELECT status, amount, currency FROM pay_find('UP', 'ORDER-7');
SELECT pay_claim('UP-5') AS replayed;
-- The payment in flight settles under its attempt, with its reference.
SELECT pay_succeed('UP-6', 'BANK-6');
\echo :LAST_ERROR_SQLSTATE
SELECT pay_succeed('UP-6', 'BANK-6', 1) AS settled;
-- The opened one is charged once it has a currency.
\set VERBOSITY sqlstate
SELECT pay_begin(bizno) AS without_currency FROM pay_find('UP', 'ORDER-7');
\set VERBOSITY default
SELECT pay_begin(bizno, 25, 'EUR') AS with_currency FROM pay_find('UP', 'ORDER-7');
-- A second charge of the payment settled under 1.2 is reported, not captured.
SELECT pay_succeed('UP-5', 'BANK-5b', 1) AS second_charge;
SELECT channel_ref, confirmed FROM pay_second_charges() WHERE bizno = 'UP-5';
SELECT captured FROM pay_refund_balance('UP-5');
SELECT unconfirmed_second_charges FROM pay_stats WHERE status = 'SUCCESS';
SELECT pay_confirm_second_charge('UP-5', 'BANK-5b');
SELECT captured FROM pay_refund_balance('UP-5');
-- The 1.2 application role lost the repairs and gained pay_find.
SELECT f.function, has_function_privilege('regress_upgrade_app', f.function, 'EXECUTE') AS may
FROM (VALUES ('pay_claim(text,numeric,text)'), ('pay_succeed(text,text,bigint,jsonb)'), ('pay_find(text,text)'),
             ('pay_reset(text,text)'), ('pay_transition(text,pay_status,text)')) AS f(function)
ORDER BY 1;
SELECT * FROM pay_verify();
DROP OWNED BY regress_upgrade_app;
:describe_extension \gset from_1_2_

-- 1.3 -> 1.4: payments made under 1.3, and an operator's and an
-- application's grants, carried over.
\c regress_from_1_3
CREATE EXTENSION idempotent_pay VERSION '1.3';
SELECT (pay_claim('UP-9', 40, 'EUR')).action AS up_9,
       pay_succeed('UP-9', 'BANK-9', 1) AS settled;
SELECT (pay_claim('UP-10', 45, 'EUR')).action AS in_flight;
-- a month archived under 1.3, whose partitions 1.3 made without a TRUNCATE
-- guard; and 1.3's SQL keeps 1.3's answers with this library: a
-- superuser's journal row is appended, a month's partition emptied
SELECT (pay_claim('UP-11', 50, 'EUR')).action AS old, pay_succeed('UP-11', 'BANK-11', 1) AS settled;
SET session_replication_role = replica;
UPDATE pay_ledger SET updated_at = '2023-06-10 12:00+00' WHERE bizno = 'UP-11';
RESET session_replication_role;
SELECT pay_stats_refresh() IS NOT NULL AS folded, pay_archive('2023-07-01') AS archived_under_1_3;
BEGIN;
INSERT INTO pay_journal (bizno, attempt, from_status, to_status) VALUES ('UP-9', 1, 'SUCCESS', 'SUCCESS')
RETURNING to_status AS appended_under_1_3;
TRUNCATE pay_ledger_archive_2023_06;
ROLLBACK;
CREATE ROLE regress_upgrade_ops;
SELECT pay_grant('regress_upgrade_app'), pay_grant_operator('regress_upgrade_ops');
-- and a monitoring role as 1.3's doc/monitoring.md made it
CREATE ROLE regress_upgrade_monitor;
GRANT SELECT ON pay_stats, pay_stats_transitions TO regress_upgrade_monitor;
GRANT EXECUTE ON FUNCTION pay_stats_read(), pay_stats_transitions_read() TO regress_upgrade_monitor;
SELECT counted_from AS counted_from_1_3 FROM pay_stats_state \gset
ALTER EXTENSION idempotent_pay UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'idempotent_pay';
-- the counts 1.3 kept are kept (all of payments, of no kind of the card
-- flow), not counted again
SELECT counted_from = :counted_from_1_3 AS counts_kept,
       (SELECT count(*) FROM pay_stats_counts WHERE kind IS NOT NULL) AS counts_of_a_kind
FROM pay_stats_state;
-- the roles 1.3 granted hold 1.4's new functions: the application the
-- batches and the card flow's calls, the operator the card flow's balance
-- and figures, and the operator and the monitoring role what they read of
-- pay_stats, made again, with the card flow's figures
SELECT f AS function,
       has_function_privilege('regress_upgrade_app', f, 'EXECUTE') AS application,
       has_function_privilege('regress_upgrade_ops', f, 'EXECUTE') AS operator,
       has_function_privilege('regress_upgrade_monitor', f, 'EXECUTE') AS monitor
FROM unnest(ARRAY['pay_open_claim_many(text, text[], numeric[], text)',
                  'pay_settle_many(text[], bigint[], pay_status[], text[], text[])',
                  'pay_open_authorization(text, text, numeric, text, interval)',
                  'pay_capture_open(text, text, numeric, boolean)',
                  'pay_void_open(text, text)',
                  'pay_increment_open(text, text, numeric)',
                  'pay_authorization_balance(text)',
                  'pay_stats_read()', 'pay_stats_amounts_read()', 'pay_stats_holds()']) AS f ORDER BY 1;
SELECT v AS view, has_table_privilege('regress_upgrade_app', v, 'SELECT') AS application,
       has_table_privilege('regress_upgrade_ops', v, 'SELECT') AS operator,
       has_table_privilege('regress_upgrade_monitor', v, 'SELECT') AS monitor
FROM unnest(ARRAY['pay_stats', 'pay_stats_amounts']) AS v ORDER BY 1;
SELECT bizno, status, attempt, amount, currency, channel_ref FROM pay_ledger WHERE bizno LIKE 'UP-%' ORDER BY bizno;
SELECT (pay_claim('UP-9')).action AS replayed;
SELECT pay_succeed('UP-10', 'BANK-10', 1) AS settled_across_the_update;
-- the card flow, counted on top of 1.3's counts
SELECT pay_open_authorization('UPCARD', 'order-1', 20, 'EUR') AS up_auth \gset
SELECT (pay_claim(:'up_auth')).action AS up_auth_claimed, pay_succeed(:'up_auth', 'BANK-UP-HOLD', 1) AS held;
SELECT pay_capture_open(:'up_auth', 'ship', 5, false) AS up_capture \gset
SELECT (pay_claim(:'up_capture')).action AS up_capture_claimed, pay_succeed(:'up_capture', 'BANK-UP-CAP', 1) AS captured;
SELECT status, payments, refunds, authorizations, captures, voids, increments FROM pay_stats ORDER BY status;
SELECT * FROM pay_stats_amounts;
SELECT * FROM pay_stats_holds();
-- the entry into SUCCESS names its answer from 1.4 on; one journaled
-- before names none, and pay_verify compares none of it
SELECT bizno, channel_ref, response_digest FROM pay_journal
WHERE bizno LIKE 'UP-%' AND to_status = 'SUCCESS' ORDER BY bizno;
-- the update gave the month made under 1.3 its TRUNCATE guards
SELECT c.relname, t.tgname, t.tgenabled FROM pg_trigger AS t JOIN pg_class AS c ON c.oid = t.tgrelid
WHERE c.relname LIKE 'pay_%_archive_2023_06' AND t.tgtype & 32 <> 0 ORDER BY 1;
\set VERBOSITY terse
TRUNCATE pay_ledger_archive_2023_06;
INSERT INTO pay_journal (bizno, attempt, from_status, to_status) VALUES ('UP-9', 1, 'SUCCESS', 'SUCCESS');
\set VERBOSITY default
SELECT * FROM pay_verify();
DROP OWNED BY regress_upgrade_app;
DROP OWNED BY regress_upgrade_ops;
DROP ROLE regress_upgrade_ops;
DROP OWNED BY regress_upgrade_monitor;
DROP ROLE regress_upgrade_monitor;
:describe_extension \gset from_1_3_

-- A fresh install runs the complete script, not 1.0 and the updates: its
-- first object is the type pay_status, where 1.0's is pay_bizno.
\c regress_fresh
CREATE EXTENSION idempotent_pay;
SELECT extversion,
       'pay_status'::regtype::oid < 'pay_bizno(text, text)'::regprocedure::oid AS ran_complete_script
FROM pg_extension WHERE extname = 'idempotent_pay';
:describe_extension \gset fresh_

-- What was compared, and every difference: none.  A difference is a row
-- naming the installation, the object and the aspect, with the value of
-- each side (NULL where one side has no such aspect, e.g. a missing object
-- or column).  The installations used above had a role granted before
-- their update, which the update scripts grant the functions they add or
-- make anew; PostgreSQL records such grants among the extension's initial
-- privileges (pg_init_privs), and the last update script takes every role
-- out of them again, so that pg_dump dumps the roles' grants: the initial
-- privileges of every installation are a fresh install's.
CREATE TEMPORARY TABLE described (install text, ord integer, object text, aspect text, value text);
INSERT INTO described
SELECT i.install, i.ord, e ->> 0, e ->> 1, e ->> 2
FROM (VALUES ('fresh', 0, :'fresh_members'::jsonb),
             ('updated from 1.0 alone', 1, :'chain_members'::jsonb),
             ('used 1.0, updated', 2, :'upgraded_members'::jsonb),
             ('used 1.1, updated', 3, :'from_1_1_members'::jsonb),
             ('used 1.2, updated', 4, :'from_1_2_members'::jsonb),
             ('used 1.3, updated', 5, :'from_1_3_members'::jsonb)) AS i(install, ord, members),
     jsonb_array_elements(i.members) AS e;
SELECT install, count(DISTINCT object) AS objects, count(*) AS aspects
FROM described GROUP BY install, ord ORDER BY ord;
SELECT i.install, d.object, d.aspect, d.updated, d.fresh
FROM (SELECT DISTINCT install, ord FROM described WHERE install <> 'fresh') AS i
CROSS JOIN LATERAL (
    SELECT object, aspect, u.value AS updated, f.value AS fresh
    FROM (SELECT object, aspect, value FROM described WHERE install = i.install) AS u
    FULL JOIN (SELECT object, aspect, value FROM described WHERE install = 'fresh') AS f USING (object, aspect)
    WHERE u.value IS DISTINCT FROM f.value
) AS d
ORDER BY i.ord, d.object, d.aspect;

\c :regression_database
DROP DATABASE regress_chain;
DROP DATABASE regress_upgraded;
DROP DATABASE regress_from_1_1;
DROP DATABASE regress_from_1_2;
DROP DATABASE regress_from_1_3;
DROP DATABASE regress_fresh;
DROP ROLE regress_upgrade_app;
