-- The upgrade path: install 1.0, pay with it (with the library of today),
-- ALTER EXTENSION ... UPDATE, and find the old payments, the guards and the
-- new functions working; the same from 1.1 and from 1.2; then compare the
-- upgraded extensions with a fresh install of the default version.

-- Every object of the extension with its definition, as one digest.
-- Privileges are compared as they are in effect: a grant revoked again (a
-- pay_grant undone by DROP OWNED BY) leaves an ACL spelled out where a
-- fresh install has the default, the same privileges.
SELECT current_database() AS regression_database \gset
SELECT $query$
    SELECT md5(string_agg(description, E'\n' ORDER BY description)) AS digest,
           count(*) AS objects
    FROM (
        SELECT pg_describe_object(d.classid, d.objid, 0) || ' ' ||
               CASE d.classid
                   WHEN 'pg_proc'::regclass THEN
                       pg_get_functiondef(d.objid) ||
                       coalesce((SELECT coalesce(proacl, acldefault('f', proowner))::text FROM pg_proc WHERE oid = d.objid), '')
                   WHEN 'pg_class'::regclass THEN
                       coalesce(pg_get_viewdef(d.objid), '') ||
                       coalesce((SELECT string_agg(a.attname || ' ' || format_type(a.atttypid, a.atttypmod) || ' ' ||
                                                   a.attnotnull || ' ' || coalesce(pg_get_expr(ad.adbin, ad.adrelid), ''),
                                                   ', ' ORDER BY a.attnum)
                                 FROM pg_attribute AS a
                                 LEFT JOIN pg_attrdef AS ad ON ad.adrelid = a.attrelid AND ad.adnum = a.attnum
                                 WHERE a.attrelid = d.objid AND a.attnum > 0 AND NOT a.attisdropped), '') ||
                       coalesce((SELECT coalesce(relacl, acldefault('r', relowner))::text FROM pg_class WHERE oid = d.objid), '') ||
                       coalesce((SELECT string_agg(pg_get_constraintdef(c.oid), ', ' ORDER BY c.conname)
                                 FROM pg_constraint AS c WHERE c.conrelid = d.objid), '') ||
                       coalesce((SELECT string_agg(pg_get_indexdef(i.indexrelid), ', ' ORDER BY i.indexrelid::regclass::text)
                                 FROM pg_index AS i WHERE i.indrelid = d.objid), '') ||
                       coalesce((SELECT string_agg(pg_get_triggerdef(t.oid) || ' ' || t.tgenabled::text, ', ' ORDER BY t.tgname)
                                 FROM pg_trigger AS t WHERE t.tgrelid = d.objid), '')
                   WHEN 'pg_type'::regclass THEN
                       coalesce((SELECT string_agg(enumlabel, ',' ORDER BY enumsortorder)
                                 FROM pg_enum WHERE enumtypid = d.objid), '')
                   ELSE ''
               END || ' ' || coalesce(obj_description(d.objid, (SELECT relname FROM pg_class WHERE oid = d.classid)), '')
               AS description
        FROM pg_depend AS d
        JOIN pg_extension AS e ON e.oid = d.refobjid
        WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e' AND e.extname = 'idempotent_pay'
    ) AS members
$query$ AS describe_extension \gset

CREATE DATABASE regress_upgraded;
CREATE DATABASE regress_from_1_1;
CREATE DATABASE regress_from_1_2;
CREATE DATABASE regress_fresh;

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
       has_function_privilege('regress_upgrade_app', 'pay_succeed(text, text, integer, jsonb)', 'EXECUTE')
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
SELECT pay_grant('regress_upgrade_app');
ALTER EXTENSION idempotent_pay UPDATE;
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
FROM (VALUES ('pay_claim(text,numeric,text)'), ('pay_succeed(text,text,integer,jsonb)'), ('pay_find(text,text)'),
             ('pay_reset(text,text)'), ('pay_transition(text,pay_status,text)')) AS f(function)
ORDER BY 1;
SELECT * FROM pay_verify();
DROP OWNED BY regress_upgrade_app;
:describe_extension \gset from_1_2_

\c regress_fresh
CREATE EXTENSION idempotent_pay;
SELECT extversion FROM pg_extension WHERE extname = 'idempotent_pay';
:describe_extension \gset fresh_

SELECT :upgraded_objects AS objects, :upgraded_objects = :fresh_objects AS same_count,
       :'upgraded_digest' = :'fresh_digest' AS same_definitions,
       :'from_1_1_digest' = :'fresh_digest' AS same_from_1_1,
       :'from_1_2_digest' = :'fresh_digest' AS same_from_1_2;

\c :regression_database
DROP DATABASE regress_upgraded;
DROP DATABASE regress_from_1_1;
DROP DATABASE regress_from_1_2;
DROP DATABASE regress_fresh;
DROP ROLE regress_upgrade_app;
