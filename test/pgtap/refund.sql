-- Refunds, as a user checks them.
BEGIN;
SELECT plan(65);
-- The tests claim in this transaction, which rolls back at the end.
SET LOCAL idempotent_pay.claim_in_transaction = allow;

-- What a statement raises: SQLSTATE and constraint name ('ok' when it does not raise).
CREATE FUNCTION tap_outcome(statement text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE state text; name text;
BEGIN EXECUTE statement; RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, name = CONSTRAINT_NAME;
    RETURN state || coalesce(' ' || nullif(name, ''), '');
END $$;
-- What probe answers after statement, both undone afterwards.
CREATE FUNCTION tap_undone(statement text, probe text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE answer text;
BEGIN EXECUTE statement; EXECUTE probe INTO answer; RAISE EXCEPTION USING ERRCODE = 'P0001';
EXCEPTION WHEN raise_exception THEN RETURN answer;
END $$;
CREATE FUNCTION tap_rows() RETURNS text LANGUAGE sql AS $$
    SELECT 'ledger:' || (SELECT count(*) FROM pay_ledger) || ' journal:' || (SELECT count(*) FROM pay_journal)
$$;
CREATE TEMP TABLE tap_mark AS SELECT tap_rows() AS rows_before;
CREATE TEMP TABLE tap_ids (k text PRIMARY KEY, bizno text);
CREATE FUNCTION tap_id(key text) RETURNS text LANGUAGE sql AS $$ SELECT bizno FROM tap_ids WHERE k = key $$;
CREATE FUNCTION tap_balance(bizno text) RETURNS SETOF numeric[] LANGUAGE sql AS $$
    SELECT ARRAY[captured, refunded, in_flight, refundable] FROM pay_refund_balance(bizno)
$$;

-- Payments in every state: 100.00 CNY captured, an order of 30.00 EUR opened with pay_open.
DO $$ BEGIN
    PERFORM pay_begin('TAP-PAID', 100.00, 'CNY'), pay_succeed('TAP-PAID', 'BANK-1', 1);
    INSERT INTO tap_ids VALUES ('order', pay_open('SHOP', 'TAP-ORDER', 30.00, 'EUR'));
    PERFORM pay_begin(tap_id('order')), pay_succeed(tap_id('order'), 'BANK-2', 1);
    INSERT INTO pay_ledger (bizno, status) VALUES ('TAP-INIT', 'INIT');
    PERFORM pay_begin('TAP-PROCESSING', 10, 'EUR'), pay_begin('TAP-FAILED', 10, 'EUR'), pay_fail('TAP-FAILED', 'declined', 1);
    PERFORM pay_begin('TAP-APP-PAID', 10, 'USD'), pay_succeed('TAP-APP-PAID', 'BANK-3', 1);
END $$;

SELECT function_returns('pay_refund_open', ARRAY['text', 'text', 'numeric', 'text'], 'text');
SELECT is_definer('pay_refund_open', ARRAY['text', 'text', 'numeric', 'text']);
SELECT has_column('pay_stats', 'refunds');

-- Opening: idempotent by (bizno, refund_key).
INSERT INTO tap_ids VALUES ('r1', pay_refund_open('TAP-PAID', 'R1', 40, 'customer returned one item'));
INSERT INTO tap_ids VALUES ('r2', pay_refund_open('TAP-PAID', 'R2', 40));
SELECT is(pay_refund_open('TAP-PAID', 'R1', 40), tap_id('r1'), 'the same refund key finds the same refund');
SELECT isnt(tap_id('r2'), tap_id('r1'), 'another refund key opens another refund');
SELECT results_eq($$SELECT status::text, amount::numeric, currency::text, parent, refund_key, attempt, prefix, biz_id
                    FROM pay_ledger WHERE bizno = tap_id('r1')$$,
                  $$VALUES ('INIT', 40::numeric, 'CNY', 'TAP-PAID', 'R1', 0, NULL::text, NULL::text)$$,
                  'a refund is a ledger row of its own in INIT: parent, key, the parent''s currency, no prefix/biz_id');
SELECT results_eq($$SELECT from_status::text, to_status::text, amount FROM pay_journal WHERE bizno = tap_id('r1')$$,
                  $$VALUES (NULL, 'INIT', 40::numeric)$$, 'opening a refund is journaled');
INSERT INTO tap_ids VALUES ('o1', pay_refund_open(tap_id('order'), 'R1', 10));
SELECT is((pay_get(tap_id('o1'))).currency::text, 'EUR', 'a refund of an EUR payment is in EUR');
SELECT results_eq($$SELECT prefix, biz_id FROM pay_bizno_parse(tap_id('o1'))$$, $$VALUES ('SHOP', 'TAP-ORDER')$$,
                  'the refund''s bizNo reads as the order''s prefix and biz_id');
SELECT is((SELECT prefix IS NULL AND biz_id IS NULL FROM pay_ledger WHERE bizno = tap_id('o1')), true,
          'but the refund row claims no prefix/biz_id of its own');

-- Refusals of pay_refund_open, each recording nothing.
UPDATE tap_mark SET rows_before = tap_rows();
SELECT is(tap_outcome($$SELECT pay_refund_open('TAP-PAID', 'R1', 41)$$), '55000 pay_amount_frozen',
          'the same refund key with another amount');
SELECT throws_ok($$SELECT pay_refund_open(NULL, 'R9', 1)$$, '22004', NULL, 'NULL bizno');
SELECT throws_ok($$SELECT pay_refund_open('TAP-PAID', NULL, 1)$$, '22004', NULL, 'NULL refund_key');
SELECT throws_ok($$SELECT pay_refund_open('TAP-PAID', 'R9', NULL)$$, '22004', NULL, 'NULL amount');
SELECT throws_ok($$SELECT pay_refund_open('TAP-PAID', 'R9', 0)$$, '22023', NULL, 'amount 0');
SELECT throws_ok($$SELECT pay_refund_open('TAP-PAID', 'R9', -5)$$, '22023', NULL, 'a negative amount');
SELECT throws_ok($$SELECT pay_refund_open('TAP-PAID', 'R9', 'NaN')$$, '22023', NULL, 'amount NaN');
SELECT throws_ok($$SELECT pay_refund_open('TAP-PAID', 'bad key!', 1)$$, '22P02', NULL, 'a malformed refund_key');
SELECT throws_ok($$SELECT pay_refund_open('TAP-NOBODY', 'R9', 1)$$, 'P0002', NULL, 'an unknown payment');
SELECT is(tap_outcome($$SELECT pay_refund_open('TAP-INIT', 'R9', 1)$$), '55000 pay_refund_unpaid', 'a payment in INIT');
SELECT is(tap_outcome($$SELECT pay_refund_open('TAP-PROCESSING', 'R9', 1)$$), '55000 pay_refund_unpaid',
          'a payment in PROCESSING');
SELECT is(tap_outcome($$SELECT pay_refund_open('TAP-FAILED', 'R9', 1)$$), '55000 pay_refund_unpaid', 'a FAILED payment');
SELECT is(tap_outcome(format('SELECT pay_refund_open(%L, %L, 1)', tap_id('r1'), 'R9')), '23514 pay_refund_parent',
          'a refund of a refund');
SELECT is(tap_rows(), (SELECT rows_before FROM tap_mark), 'the refused opens recorded nothing');

-- The limit, checked entering PROCESSING: 100.00 captured, 40 + 40 in flight, 20.01 does not fit, 20.00 does.
INSERT INTO tap_ids VALUES ('r3', pay_refund_open('TAP-PAID', 'R3', 20.01)), ('r4', pay_refund_open('TAP-PAID', 'R4', 20.00));
SELECT is(action::text, 'PROCEED', 'a refund is claimed like a payment') FROM pay_claim(tap_id('r1'));
SELECT is(action::text, 'PROCEED', 'a second refund within the capture') FROM pay_claim(tap_id('r2'));
UPDATE tap_mark SET rows_before = tap_rows();
SELECT is(tap_outcome(format('SELECT pay_claim(%L)', tap_id('r3'))), '23514 pay_refund_limit', 'one cent over is refused');
SELECT is(tap_rows(), (SELECT rows_before FROM tap_mark), '... and records nothing');
SELECT is(action::text, 'PROCEED', 'an exact fit is allowed') FROM pay_claim(tap_id('r4'));
SELECT results_eq($$SELECT tap_balance('TAP-PAID')$$, $$VALUES ('{100, 0, 100, 0}'::numeric[])$$,
                  'balance: captured, refunded, in flight, refundable');
SELECT is(tap_outcome(format('SELECT pay_claim(%L, 41)', tap_id('r4'))), '55000 pay_amount_frozen',
          'the amount of a refund in flight is frozen');
SELECT is(pay_fail(tap_id('r2'), 'the bank refused', 1), 'FAILED', 'a refund fails like a payment');
SELECT is(pay_succeed(tap_id('r1'), 'BANK-R1', 1), 'SUCCESS', 'a refund succeeds like a payment');
SELECT is(action::text, 'PROCEED', 'a failed refund frees its share') FROM pay_claim(tap_id('r3'));
UPDATE tap_mark SET rows_before = tap_rows();
SELECT is(tap_outcome(format('SELECT pay_claim(%L)', tap_id('r2'))), '23514 pay_refund_limit',
          'a FAILED refund retried is checked again (40 > 19.99 left)');
SELECT is(tap_rows() || ' ' || (pay_get(tap_id('r2'))).status, (SELECT rows_before FROM tap_mark) || ' FAILED',
          '... records nothing and stays FAILED');
SELECT is(pay_fail(tap_id('r3'), 'the bank refused', 1), 'FAILED', 'another refund fails');
SELECT is(action::text, 'PROCEED', 'now the retry fits exactly') FROM pay_claim(tap_id('r2'));
-- r2 settles its second attempt
DO $$ BEGIN PERFORM pay_succeed(tap_id('r2'), 'BANK-R2', 2), pay_succeed(tap_id('r4'), 'BANK-R4', 1); END $$;
SELECT results_eq($$SELECT tap_balance('TAP-PAID')$$, $$VALUES ('{100, 100, 0, 0}'::numeric[])$$, 'all captured is refunded');

-- A second charge reported by the bank is journaled once; since 1.3 it is
-- pay_succeed's answer, and counts as captured only once a bank statement
-- confirms it (1.2 counted it at once).
SET LOCAL client_min_messages = error;
SELECT is(pay_succeed('TAP-PAID', 'BANK-1b', 1), 'SECOND_CHARGE', 'since 1.3 a second charge is pay_succeed''s answer');
SELECT is(pay_succeed('TAP-PAID', 'BANK-1b', 1), 'SECOND_CHARGE', '... each time it is reported');
RESET client_min_messages;
SELECT is((SELECT count(*)::int FROM pay_journal WHERE bizno = 'TAP-PAID' AND from_status = 'SUCCESS' AND to_status = 'SUCCESS'),
          1, 'a second charge reported twice is journaled once');
SELECT results_eq($$SELECT tap_balance('TAP-PAID')$$, $$VALUES ('{100, 100, 0, 0}'::numeric[])$$,
                  'since 1.3 a second charge only reported is not captured yet');
INSERT INTO tap_ids VALUES ('dup', pay_refund_open('TAP-PAID', 'BANK-1b', 100.00, 'second charge'));
UPDATE tap_mark SET rows_before = tap_rows();
SELECT is(tap_outcome(format('SELECT pay_claim(%L)', tap_id('dup'))), '23514 pay_refund_limit',
          '... so its refund does not fit yet');
SELECT is(tap_rows(), (SELECT rows_before FROM tap_mark), '... and records nothing');
SELECT lives_ok($$SELECT pay_confirm_second_charge('TAP-PAID', 'BANK-1b')$$, 'a bank statement confirms it');
SELECT results_eq($$SELECT tap_balance('TAP-PAID')$$, $$VALUES ('{200, 100, 0, 100}'::numeric[])$$,
                  'the confirmed second charge counts as captured');
SELECT is(action::text, 'PROCEED', 'the second charge is refunded, keyed by its reference')
FROM pay_claim(tap_id('dup'));

-- Raw writes are held to the same rules by the ledger's trigger.
UPDATE tap_mark SET rows_before = tap_rows();
SELECT is(tap_outcome($$INSERT INTO pay_ledger (bizno, amount, currency, parent, refund_key) VALUES ('TAP-RAW', 1, 'CNY', 'TAP-NOBODY', 'K')$$),
          '23503 pay_refund_parent', 'raw: a refund of an unknown payment');
SELECT is(tap_outcome($$INSERT INTO pay_ledger (bizno, amount, currency, parent, refund_key) VALUES ('TAP-RAW', 1, 'EUR', 'TAP-FAILED', 'K')$$),
          '55000 pay_refund_unpaid', 'raw: a refund of a FAILED payment');
SELECT is(tap_outcome($$INSERT INTO pay_ledger (bizno, amount, currency, parent, refund_key) VALUES ('TAP-RAW', 1, 'EUR', 'TAP-PAID', 'K')$$),
          '22023 pay_refund_currency', 'raw: a refund in another currency');
SELECT is(tap_outcome($$INSERT INTO pay_ledger (bizno, amount, currency, parent) VALUES ('TAP-RAW', 1, 'CNY', 'TAP-PAID')$$),
          '23514 pay_refund_parent', 'raw: a parent without a refund_key');
SELECT is(tap_outcome($$INSERT INTO pay_ledger (bizno, status, amount, currency, parent, refund_key) VALUES ('TAP-RAW', 'PROCESSING', 0.01, 'CNY', 'TAP-PAID', 'K')$$),
          '23514 pay_refund_limit', 'raw: straight into PROCESSING beyond the capture');
SELECT is(tap_outcome($$UPDATE pay_ledger SET parent = 'TAP-PAID' WHERE bizno = 'TAP-INIT'$$),
          '23514 pay_immutable_column', 'raw: a payment cannot become a refund');
SELECT is(tap_outcome(format('UPDATE pay_ledger SET refund_key = %L WHERE bizno = %L', 'R9', tap_id('r1'))),
          '23514 pay_immutable_column', 'raw: refund_key never changes');
SELECT is(tap_rows(), (SELECT rows_before FROM tap_mark), 'the refused raw writes recorded nothing');
SELECT lives_ok(format($$INSERT INTO pay_ledger (bizno, amount, currency, parent, refund_key) VALUES ('TAP-RAW', 25, 'EUR', %L, 'K')$$,
                       tap_id('order')), 'raw: a refund within the rules is accepted');
SELECT is(tap_outcome(format($$UPDATE pay_ledger SET status = 'PROCESSING' WHERE parent = %L$$, tap_id('order'))),
          '23514 pay_refund_limit', 'raw: 10 + 25 of 30 moved at once is refused');

-- pay_verify reports a refund beyond the capture that only a write without triggers can leave.
SELECT is(tap_undone($$SELECT set_config('session_replication_role', 'replica', true);
                       INSERT INTO pay_ledger (bizno, status, amount, currency, parent, refund_key, attempt)
                       VALUES ('TAP-REPLICA', 'PROCESSING', 5, 'USD', 'TAP-APP-PAID', 'C', 1),
                              ('TAP-REPLICA-2', 'SUCCESS', 6, 'USD', 'TAP-APP-PAID', 'D', 1)$$,
                     $$SELECT string_agg(problem, '; ') FROM pay_verify() WHERE bizno = 'TAP-APP-PAID'$$),
          'its refunds return or hold 11, more than the 10 captured', 'pay_verify reports refunds beyond the capture');
SELECT results_eq($$SELECT status::text, refunds FROM pay_stats ORDER BY status$$,
                  $$SELECT s::text, count(l.bizno) FROM unnest(enum_range(NULL::pay_status)) AS s
                    LEFT JOIN pay_ledger AS l ON l.status = s AND l.parent IS NOT NULL GROUP BY s ORDER BY s$$,
                  'pay_stats counts refunds per status');

-- An application role refunds through the API only.
CREATE ROLE tap_refund_app;
SELECT lives_ok($$SELECT pay_grant('tap_refund_app')$$, 'pay_grant');
SET LOCAL ROLE tap_refund_app;
SELECT is(action::text, 'PROCEED', 'the application opens and claims a refund')
FROM pay_claim(pay_refund_open('TAP-APP-PAID', 'APP-1', 10));
SELECT results_eq($$SELECT ARRAY[captured, refunded, in_flight, refundable] FROM pay_refund_balance('TAP-APP-PAID')$$,
                  $$VALUES ('{10, 0, 10, 0}'::numeric[])$$, 'and reads the balance');
SELECT throws_ok($$INSERT INTO pay_ledger (bizno, status, amount, currency, parent, refund_key) VALUES ('TAP-APP-RAW', 'INIT', 1, 'USD', 'TAP-APP-PAID', 'APP-2')$$,
                 '42501', NULL, 'it cannot insert a refund row directly');
RESET ROLE;
SELECT is_empty($$SELECT * FROM pay_verify()$$, 'ledger and journal agree at the end');

SELECT * FROM finish();
ROLLBACK;
