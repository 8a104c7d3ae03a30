-- Guarding existing tables, as a user checks it.
BEGIN;
SELECT plan(30);

SELECT has_function('pay_protect', ARRAY['regclass', 'name', 'name[]']);
SELECT has_function('pay_unprotect', ARRAY['regclass']);
SELECT has_view('pay_guards');

CREATE TABLE tap_orders (id integer PRIMARY KEY, status text, amount numeric, note text);
INSERT INTO tap_orders VALUES (1, 'INIT', 1), (2, 'PROCESSING', 2), (3, 'SUCCESS', 3), (4, 'FAILED', 4);
SELECT lives_ok($$SELECT pay_protect('tap_orders', 'status', '{amount}')$$, 'protect a text column');
SELECT trigger_is('tap_orders', 'pay_guard', 'pay_guard');
SELECT is((SELECT enabled FROM pay_guards WHERE table_name = 'tap_orders'::regclass AND trigger_name = 'pay_guard'),
          'always', 'the guard fires always');

SELECT lives_ok($$INSERT INTO tap_orders VALUES (5, 'INIT')$$, 'INSERT in INIT');
SELECT lives_ok($$INSERT INTO tap_orders VALUES (6, 'PROCESSING')$$, 'INSERT in PROCESSING');
SELECT throws_ok($$INSERT INTO tap_orders VALUES (7, 'SUCCESS')$$, '23514', NULL, 'INSERT in SUCCESS is refused');
SELECT throws_ok($$INSERT INTO tap_orders VALUES (8, 'PAID')$$, '22P02', NULL, 'an unknown label is refused');
SELECT lives_ok($$UPDATE tap_orders SET status = 'PROCESSING' WHERE id = 1$$, 'INIT -> PROCESSING');
SELECT lives_ok($$UPDATE tap_orders SET status = 'SUCCESS' WHERE id = 1$$, 'PROCESSING -> SUCCESS');
SELECT throws_ok($$UPDATE tap_orders SET status = 'FAILED' WHERE id = 1$$, '23514',
                 'illegal payment status transition from SUCCESS to FAILED', 'SUCCESS -> FAILED is refused');
SELECT lives_ok($$UPDATE tap_orders SET status = 'INIT' WHERE id = 4$$, 'FAILED -> INIT (reset)');
SELECT throws_ok($$UPDATE tap_orders SET status = 'INIT' WHERE id = 2$$, '23514', NULL, 'PROCESSING -> INIT is refused');
SELECT throws_ok($$UPDATE tap_orders SET amount = 9 WHERE id = 2$$, '23514', NULL, 'a frozen column while PROCESSING');
SELECT lives_ok($$UPDATE tap_orders SET note = 'x' WHERE id = 2$$, 'other columns may change');
SELECT throws_ok($$DELETE FROM tap_orders WHERE id = 3$$, '23514', NULL, 'DELETE of SUCCESS is refused');
SELECT lives_ok($$DELETE FROM tap_orders WHERE id = 4$$, 'DELETE of INIT is allowed');
SELECT throws_ok($$TRUNCATE tap_orders$$, '23514', NULL, 'TRUNCATE is refused');
SELECT throws_ok($$UPDATE tap_orders SET status = 'INIT'$$, '23514', NULL, 'a multi-row statement with one illegal row');
SELECT is((SELECT count(*)::int FROM tap_orders WHERE status = 'INIT'), 1, '... fails whole');

CREATE TABLE tap_refunds (id integer PRIMARY KEY, state pay_status);
INSERT INTO tap_refunds VALUES (1, 'SUCCESS');
SELECT lives_ok($$SELECT pay_protect('tap_refunds', 'state')$$, 'protect a pay_status column');
SELECT throws_ok($$UPDATE tap_refunds SET state = 'INIT'$$, '23514', NULL, 'the enum column is guarded');

CREATE TABLE tap_legacy (id integer, status text);
INSERT INTO tap_legacy VALUES (1, 'DONE');
SELECT throws_ok($$SELECT pay_protect('tap_legacy')$$, '22P02', NULL, 'existing bad labels refuse the guard');
SELECT is((SELECT count(*)::int FROM pg_trigger WHERE tgrelid = 'tap_legacy'::regclass), 0, '... and nothing is installed');
CREATE TABLE tap_numbered (id integer, status integer);
SELECT throws_ok($$SELECT pay_protect('tap_numbered')$$, '42804', NULL, 'a status column of another type');
SELECT throws_ok($$SELECT pay_protect('tap_orders', 'state')$$, '42703', NULL, 'an unknown column');

SELECT lives_ok($$SELECT pay_unprotect('tap_orders')$$, 'unprotect');
SELECT lives_ok($$UPDATE tap_orders SET status = 'INIT' WHERE id = 3$$, 'unprotected, the table is free again');

SELECT * FROM finish();
ROLLBACK;
