-- The security model, tried as an attacker would: an application role
-- given pay_grant, and a role that plants look-alike functions and operators.
\set SHOW_CONTEXT never

CREATE ROLE regress_app;
SELECT pay_grant('regress_app');
CREATE TABLE accounts (id integer PRIMARY KEY, status text NOT NULL, amount numeric);
INSERT INTO accounts VALUES (1, 'SUCCESS', 10), (2, 'INIT', 20);
SELECT pay_protect('accounts', 'status', '{amount}');
GRANT SELECT, INSERT, UPDATE, DELETE, TRUNCATE ON accounts TO regress_app;

SET ROLE regress_app;
-- It pays, and the journal names it.
SELECT pay_begin('SEC-1', 5, 'EUR'), pay_succeed('SEC-1', 'BANK-SEC-1', 1);
SELECT actor FROM pay_journal WHERE bizno = 'SEC-1' ORDER BY seq DESC LIMIT 1;
-- It may write its own table, within the rules.
UPDATE accounts SET status = 'PROCESSING' WHERE id = 2;
SELECT outcome($$UPDATE accounts SET status = 'INIT' WHERE id = 1 RETURNING status$$) AS illegal_step,
       outcome($$TRUNCATE accounts$$) AS truncate_table;
-- Everything else it is refused, 42501 each.
SELECT outcome($$UPDATE pay_ledger SET status = 'INIT' WHERE bizno = 'SEC-1' RETURNING status$$) AS write_ledger,
       outcome($$INSERT INTO pay_ledger (bizno) VALUES ('SEC-X') RETURNING bizno$$) AS insert_ledger,
       outcome($$DELETE FROM pay_ledger RETURNING bizno$$) AS delete_ledger,
       outcome($$INSERT INTO pay_journal (bizno, attempt, to_status) VALUES ('SEC-1', 1, 'FAILED') RETURNING seq$$) AS forge_journal,
       outcome($$UPDATE pay_journal SET note = 'x' RETURNING seq$$) AS rewrite_journal;
SELECT outcome($$ALTER TABLE accounts DISABLE TRIGGER pay_guard$$) AS disable_guard,
       outcome($$ALTER TABLE accounts DISABLE TRIGGER ALL$$) AS disable_all,
       outcome($$DROP TRIGGER pay_guard ON accounts$$) AS drop_guard,
       outcome($$ALTER TABLE pay_ledger DISABLE TRIGGER pay_ledger_guard$$) AS disable_ledger_guard,
       outcome($$SELECT pay_unprotect('accounts')$$) AS unprotect,
       outcome($$SELECT pay_protect('accounts', 'status')$$) AS reprotect;
SELECT outcome($$SET session_replication_role = replica$$) AS replica_role,
       outcome($$SET idempotent_pay.node_id = 7$$) AS node_id,
       outcome($$SET idempotent_pay.retry_failed = manual$$) AS retry_policy,
       outcome($$SELECT pay_grant('regress_app')$$) AS grant_itself,
       outcome($$SELECT pay_verify()$$) AS verify;
-- Since 1.3 the repairs are an operator's (pay_grant_operator), not an
-- application's.
SELECT outcome($$SELECT pay_reset('SEC-1', 'why')$$) AS reset,
       outcome($$SELECT pay_transition('SEC-1', 'FAILED')$$) AS transition,
       outcome($$SELECT pay_confirm_second_charge('SEC-1', 'BANK-X')$$) AS confirm_second_charge,
       outcome($$SELECT count(*) FROM pay_second_charges()$$) AS read_second_charges;
RESET ROLE;
SELECT status FROM accounts WHERE id = 1;
SELECT * FROM pay_guards WHERE table_name = 'accounts'::regclass AND enabled <> 'always';

-- A role owning a schema before pg_catalog on its search_path plants
-- look-alikes of now(), lower(), coalesce-like helpers and = for text.
CREATE ROLE regress_attacker;
SELECT pay_grant('regress_attacker');
CREATE SCHEMA evil AUTHORIZATION regress_attacker;
SET ROLE regress_attacker;
CREATE FUNCTION evil.now() RETURNS timestamptz LANGUAGE sql AS $$ SELECT '2000-01-01'::timestamptz $$;
CREATE FUNCTION evil.lower(text) RETURNS text LANGUAGE sql AS $$ SELECT 'hijacked' $$;
CREATE FUNCTION evil.text_eq_always(text, text) RETURNS boolean LANGUAGE sql AS $$ SELECT true $$;
CREATE OPERATOR evil.= (LEFTARG = text, RIGHTARG = text, FUNCTION = evil.text_eq_always);
CREATE FUNCTION evil.status_eq_always(anyenum, anyenum) RETURNS boolean LANGUAGE sql AS $$ SELECT true $$;
CREATE OPERATOR evil.= (LEFTARG = anyenum, RIGHTARG = anyenum, FUNCTION = evil.status_eq_always);
SET search_path = evil, pg_catalog, public;
SELECT 'a' = 'b' AS planted_equality_works;
-- With = always true, a hijacked lookup would find SEC-1 for every key.
SELECT pay_begin('HIJACK-1', 1, 'EUR') AS first_key, pay_begin('HIJACK-2', 1, 'EUR') AS second_key;
SELECT pay_succeed('HIJACK-1', 'BANK-HIJACK-1', 1);
SELECT pay_begin('HIJACK-2') AS second_key_again;
SELECT (pay_get('HIJACK-2')).status AS hijack_2_status, (pay_get('HIJACK-2')).bizno AS hijack_2_bizno;
SELECT count(*) AS stuck_rows_named_hijack_1 FROM pay_stuck('0 seconds', 1000) AS s
WHERE s.bizno OPERATOR(pg_catalog.=) 'HIJACK-1';
SELECT pg_catalog.count(*) AS journal_rows_from_2000 FROM pay_journal AS j
WHERE j.at OPERATOR(pg_catalog.<) '2020-01-01'::timestamptz;
SELECT pay_open('EVIL', 'ORDER-1', 1, 'EUR') OPERATOR(pg_catalog.=) pay_open('EVIL', 'ORDER-1', 1, 'EUR') AS same_bizno,
       pay_open('EVIL', 'ORDER-2', 1, 'EUR') OPERATOR(pg_catalog.<>) pay_open('EVIL', 'ORDER-1', 1, 'EUR') AS distinct_bizno;
RESET search_path;
RESET ROLE;
SELECT * FROM pay_verify();

-- Every function of the extension is meant for someone: an application
-- (pay_grant), finance and operations (pay_grant_operator), the DBA, the
-- trigger manager, pay_stats_refresh, which folds the journal into the
-- counts as the owner, or pay_archive, which moves rows into the archive as
-- the owner.  A function a later version adds without its grant is
-- listed here.
CREATE ROLE regress_finance;
SELECT pay_grant_operator('regress_finance');
SELECT p.proname AS granted_to_nobody
FROM pg_proc AS p
JOIN pg_depend AS d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
JOIN pg_extension AS e ON e.oid = d.refobjid AND e.extname = 'idempotent_pay'
WHERE p.prorettype NOT IN ('trigger'::regtype, 'event_trigger'::regtype)
  AND p.proname NOT IN ('pay_protect', 'pay_unprotect', 'pay_grant', 'pay_grant_operator',
                        'pay_stats_unfolded', 'pay_stats_second_charge',
                        'pay_stats_running_transactions', 'pay_stats_transactions_ended',
                        'pay_stats_counts_usable', 'pay_stats_usable_state', 'pay_stats_counted_snapshot',
                        'pay_archive_add_keys', 'pay_archive_partitions', 'pay_archive_unready',
                        'pay_archive_key_hash', 'pay_archive_key_pack', 'pay_archive_key_unpack')
  AND NOT has_function_privilege('regress_app', p.oid, 'EXECUTE')
  AND NOT has_function_privilege('regress_finance', p.oid, 'EXECUTE')
ORDER BY 1;
SET ROLE regress_finance;
SELECT count(*) AS finance_reads_stats FROM pay_stats;
SELECT outcome($$SELECT pay_begin('FIN-1', 1, 'EUR')$$) AS finance_cannot_pay;
RESET ROLE;

SET client_min_messages = warning;
DROP SCHEMA evil CASCADE;
DROP TABLE accounts;
DROP OWNED BY regress_app, regress_attacker, regress_finance;
DROP ROLE regress_app;
DROP ROLE regress_attacker;
DROP ROLE regress_finance;
