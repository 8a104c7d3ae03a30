-- The payment API contract, as a user checks it.
BEGIN;
SELECT plan(64);

-- Types
SELECT has_type('pay_status');
SELECT enum_has_labels('pay_status', ARRAY['INIT', 'PROCESSING', 'SUCCESS', 'FAILED']);
SELECT has_type('pay_action');
SELECT enum_has_labels('pay_action', ARRAY['PROCEED', 'ALREADY_SUCCEEDED', 'IN_PROGRESS', 'NEEDS_RESET']);
SELECT has_type('pay_settlement');
SELECT enum_has_labels('pay_settlement', ARRAY['SUCCESS', 'SECOND_CHARGE']);

-- Tables
SELECT has_table('pay_ledger');
SELECT columns_are('pay_ledger', ARRAY['bizno', 'prefix', 'biz_id', 'status', 'amount', 'currency',
    'attempt', 'channel_ref', 'last_error', 'created_at', 'updated_at', 'processing_since', 'note',
    'response', 'parent', 'refund_key', 'kind', 'expires_in', 'expires_at']);
SELECT col_is_pk('pay_ledger', 'bizno');
SELECT index_is_unique('pay_ledger', 'pay_ledger_prefix_biz_id_key');
SELECT has_table('pay_journal');
SELECT columns_are('pay_journal', ARRAY['seq', 'bizno', 'attempt', 'from_status', 'to_status',
    'amount', 'at', 'txid', 'actor', 'note', 'currency', 'channel_ref', 'second_charge', 'response_digest']);
SELECT trigger_is('pay_ledger', 'pay_ledger_guard', 'pay_guard');
SELECT trigger_is('pay_journal', 'pay_journal_guard', 'pay_guard');
SELECT is((SELECT string_agg(tgrelid::regclass || '.' || tgname || ':' || tgenabled::text, ','
                             ORDER BY tgrelid::regclass::text, tgname) FROM pg_trigger
           WHERE tgname LIKE 'pay_%guard%' OR tgname LIKE 'pay_%archive_moved'),
          'pay_archive_counts.pay_archive_counts_guard_truncate:A,'
          'pay_archive_keys.pay_archive_keys_guard_truncate:A,'
          'pay_archive_months.pay_archive_months_guard_truncate:A,'
          'pay_archive_runs.pay_archive_runs_guard:A,pay_archive_runs.pay_archive_runs_guard_truncate:A,'
          'pay_journal.pay_journal_guard:A,pay_journal.pay_journal_guard_truncate:A,'
          'pay_journal_archive.pay_journal_archive_guard:A,pay_journal_archive.pay_journal_archive_guard_truncate:A,'
          'pay_journal_archive.pay_journal_archive_moved:A,'
          'pay_journal_archive_default.pay_journal_archive_guard:A,'
          'pay_journal_archive_default.pay_journal_archive_guard_truncate:A,'
          'pay_journal_archive_default.pay_journal_archive_moved:A,'
          'pay_ledger.pay_ledger_guard:A,pay_ledger.pay_ledger_guard_truncate:A,'
          'pay_ledger_archive.pay_ledger_archive_guard:A,pay_ledger_archive.pay_ledger_archive_guard_truncate:A,'
          'pay_ledger_archive.pay_ledger_archive_moved:A,'
          'pay_ledger_archive_default.pay_ledger_archive_guard:A,'
          'pay_ledger_archive_default.pay_ledger_archive_guard_truncate:A,'
          'pay_ledger_archive_default.pay_ledger_archive_moved:A,'
          'pay_maintenance_log.pay_maintenance_log_guard:A,'
          'pay_maintenance_log.pay_maintenance_log_guard_truncate:A',
          'the guards and the archive''s trigger fire always, replica role included, on every partition');
SELECT ok((SELECT count(*) = 2 FROM pg_extension e, unnest(e.extconfig) AS c
           WHERE e.extname = 'idempotent_pay'
             AND c IN ('pay_ledger'::regclass, 'pay_journal'::regclass)),
          'ledger and journal are dumped by pg_dump');
SELECT has_view('pay_currencies');
SELECT has_function('pay_second_charges', '{}'::name[]);

-- Functions
SELECT function_returns('pay_open', ARRAY['text', 'text', 'numeric', 'text'], 'text');
SELECT function_returns('pay_begin', ARRAY['text', 'numeric', 'text'], 'pay_action');
-- since 1.3 pay_succeed answers whether the bank charged twice (pay_settlement), not the status;
-- since 1.4 the attempt is a bigint, so that every integer type a driver sends resolves
SELECT function_returns('pay_succeed', ARRAY['text', 'text', 'bigint', 'jsonb'], 'pay_settlement');
SELECT function_returns('pay_fail', ARRAY['text', 'text', 'bigint'], 'pay_status');
SELECT function_returns('pay_reset', ARRAY['text', 'text'], 'pay_status');
SELECT function_returns('pay_transition', ARRAY['text', 'pay_status', 'text'], 'pay_status');
SELECT function_returns('pay_get', ARRAY['text'], 'setof pay_ledger');
SELECT function_returns('pay_stuck', ARRAY['interval', 'integer'], 'setof pay_ledger');
SELECT function_returns('pay_find', ARRAY['text', 'text'], 'setof pay_ledger');
SELECT function_returns('pay_confirm_second_charge', ARRAY['text', 'text'], 'void');
SELECT function_returns('pay_grant', ARRAY['regrole'], 'void');
SELECT function_returns('pay_allowed', ARRAY['pay_status', 'pay_status'], 'boolean');
SELECT is_definer('pay_begin', ARRAY['text', 'numeric', 'text']);
SELECT is((SELECT count(*)::int FROM pg_proc
           WHERE proname IN ('pay_open', 'pay_reset', 'pay_transition', 'pay_get', 'pay_stuck',
                             'pay_find', 'pay_confirm_second_charge')
             AND prosecdef AND proconfig::text LIKE '%search_path=%pg_temp%'),
          7, 'the API functions that run SQL run as the owner with a pinned search_path');
SELECT is((SELECT count(*)::int FROM pg_proc
           WHERE proname IN ('pay_begin', 'pay_claim', 'pay_succeed', 'pay_fail')
             AND prosecdef AND prolang = (SELECT oid FROM pg_language WHERE lanname = 'c')
             AND proconfig IS NULL),
          4, 'the hot path runs as the owner and pins search_path in C, for the SQL it runs');

-- A claim is refused inside a transaction block, as every pgTAP file runs:
-- rolled back after the bank call, it would be claimed and charged again.
SELECT throws_ok($$SELECT pay_claim('TAP-IN-BLOCK', 5, 'USD')$$, '25001', NULL,
                 'a claim inside a transaction block is refused');
SELECT is((SELECT count(*)::int FROM pay_ledger WHERE bizno = 'TAP-IN-BLOCK'), 0, 'and writes nothing');
-- The tests below claim in this transaction, which rolls back at the end.
SET LOCAL idempotent_pay.claim_in_transaction = allow;

-- Decisions
SELECT is(pay_begin('TAP-1', 5, 'USD'), 'PROCEED', 'a new bizNo: PROCEED');
SELECT is(pay_begin('TAP-1'), 'IN_PROGRESS', 'again while PROCESSING: IN_PROGRESS');
SELECT is(pay_succeed('TAP-1', 'REF-1', 1), 'SUCCESS', 'pay_succeed settles it');
SELECT is(pay_begin('TAP-1'), 'ALREADY_SUCCEEDED', 'after SUCCESS: ALREADY_SUCCEEDED');
SELECT is(pay_begin('TAP-2', 5, 'USD'), 'PROCEED', 'another payment');
SELECT is(pay_fail('TAP-2', 'declined', 1), 'FAILED', 'pay_fail');
SELECT is(pay_begin('TAP-2'), 'PROCEED', 'FAILED is retried (auto)');
SELECT is((pay_get('TAP-2')).attempt, 2, 'attempt counts entries into PROCESSING');
SELECT throws_ok($$SELECT pay_succeed('TAP-2', 'LATE-REF', 1)$$, '55000', NULL, 'a stale attempt is fenced off');
SELECT throws_ok($$SELECT pay_succeed('TAP-2', 'REF-2')$$, '22004', NULL, 'since 1.3 the attempt is required');
SELECT throws_ok($$SELECT pay_succeed('TAP-2', NULL, 2)$$, '22004', NULL, 'since 1.3 a success needs its channel_ref');
SELECT throws_ok($$SELECT pay_transition('TAP-1', 'INIT')$$, '23514', NULL, 'SUCCESS is final');
SELECT throws_ok($$SELECT pay_begin('TAP-1', 6, 'USD')$$, '55000', NULL, 'the amount of a SUCCESS is frozen');
SELECT throws_ok($$SELECT pay_reset('TAP-9', 'x')$$, 'P0002', NULL, 'unknown bizNo');
SELECT results_eq($$SELECT from_status::text, to_status::text FROM pay_journal WHERE bizno = 'TAP-1' ORDER BY seq$$,
                  $$VALUES (NULL, 'PROCESSING'), ('PROCESSING', 'SUCCESS')$$,
                  'the journal records each transition');
SELECT is_empty($$SELECT * FROM pay_verify()$$, 'ledger and journal agree');

-- Privileges: an application role given pay_grant pays, and nothing more.
CREATE ROLE tap_app;
SELECT lives_ok($$SELECT pay_grant('tap_app')$$, 'pay_grant');
SET LOCAL ROLE tap_app;
SELECT is(pay_begin('TAP-APP', 1, 'EUR'), 'PROCEED', 'the application pays');
SELECT is(pay_succeed('TAP-APP', 'REF-APP', 1), 'SUCCESS', 'and settles');
SELECT is((SELECT actor FROM pay_journal WHERE bizno = 'TAP-APP' ORDER BY seq DESC LIMIT 1), 'tap_app',
          'the journal names the application role, not the owner');
SELECT throws_ok($$UPDATE pay_ledger SET status = 'INIT' WHERE bizno = 'TAP-APP'$$, '42501', NULL,
                 'it cannot write the ledger');
SELECT throws_ok($$INSERT INTO pay_ledger (bizno) VALUES ('TAP-FORGED')$$, '42501', NULL,
                 'it cannot insert into the ledger');
SELECT throws_ok($$INSERT INTO pay_journal (bizno, attempt, to_status) VALUES ('TAP-APP', 1, 'FAILED')$$,
                 '42501', NULL, 'it cannot forge the journal');
SELECT throws_ok($$ALTER TABLE pay_ledger DISABLE TRIGGER pay_ledger_guard$$, '42501', NULL,
                 'it cannot switch the guard off');
SELECT throws_ok($$SET idempotent_pay.retry_failed = manual$$, '42501', NULL,
                 'it cannot change the retry policy');
SELECT throws_ok($$SET session_replication_role = replica$$, '42501', NULL,
                 'it cannot set session_replication_role');
SELECT throws_ok($$SELECT pay_grant('tap_app')$$, '42501', NULL, 'it cannot grant');
SELECT throws_ok($$SELECT pay_transition('TAP-2', 'FAILED')$$, '42501', NULL,
                 'since 1.3 it cannot call pay_transition (an operator''s, pay_grant_operator)');
SELECT throws_ok($$SELECT pay_reset('TAP-2', 'why')$$, '42501', NULL,
                 'since 1.3 it cannot call pay_reset (an operator''s, pay_grant_operator)');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
