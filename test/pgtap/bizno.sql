-- The bizNo contract, as a user checks it.
BEGIN;
SELECT plan(33);

SELECT has_function('pay_bizno', ARRAY['text', 'text']);
SELECT function_returns('pay_bizno', ARRAY['text', 'text'], 'text');
SELECT volatility_is('pay_bizno', ARRAY['text', 'text'], 'volatile');
SELECT volatility_is('pay_bizno_valid', ARRAY['text'], 'immutable');
SELECT is_strict('pay_bizno_valid', ARRAY['text']);
SELECT volatility_is('pay_bizno_parse', ARRAY['text'], 'immutable');

SELECT ok(pay_bizno_valid(pay_bizno('PAY', 'ORD001')), 'a fresh bizNo is valid');
SELECT isnt(pay_bizno('PAY', 'ORD001'), pay_bizno('PAY', 'ORD001'),
            'every call gives a new bizNo');
SELECT results_eq(
    $$SELECT prefix, biz_id, node_id FROM pay_bizno_parse(pay_bizno('PAY', 'ORD-1:a.b_c'))$$,
    $$VALUES ('PAY'::text, 'ORD-1:a.b_c'::text, 0)$$,
    'parse gives back prefix, biz_id and node id');
SELECT ok((SELECT issued_at FROM pay_bizno_parse(pay_bizno('PAY', 'X')))
          BETWEEN clock_timestamp() - interval '1 minute' AND clock_timestamp(),
          'parse gives the time of issue');
SELECT is(pay_bizno_valid('PAY-ORD001-20261130065033976-0000-366VRA691WVWE0'), true,
          'a known bizNo is valid');
SELECT is(pay_bizno_valid('PAY-ORD001-20261130065033976-0000-366VRA691WVWE1'), false,
          'a wrong check character is caught');
SELECT is(pay_bizno_valid('PAY-ORD001-20261130065033976-0000-366VRA961WVWE0'), false,
          'an adjacent transposition is caught');
SELECT is(pay_bizno_valid('SHOP-1-20261203174955808-0000-0066E619TAX2Ra'), false,
          'a check character outside 0-9A-Z is never right, even where it fits');
SELECT is(pay_bizno_valid(NULL), NULL, 'pay_bizno_valid(NULL) is NULL');
SELECT is(pay_bizno_valid('PAY-ORD001-20261204012157362-0000-G064VEFC56FY4Y'), true,
          'a bizNo of 1.4 is valid');
SELECT is(pay_bizno_valid('PAY-ORD01-20261204012157362-0000-G064VEFC56FY4Y'), false,
          'a dropped character is caught');
SELECT is(pay_bizno_valid('PAY-ORD0001-20261204012157362-0000-G064VEFC56FY4Y'), false,
          'a doubled character is caught');
SELECT is(pay_bizno_valid('PAY-ORD001-20261204012157362-0000-G064VEFC56F4Y'), false,
          'a character dropped from the uniqueness part is caught');

-- Since 1.4 a key the ledger does not have is a bizNo, or a key of another
-- system the caller accepts; a biz_id is never a bizNo.  The suites accept
-- keys of another system (test/run); the default refuses them.
SET LOCAL idempotent_pay.foreign_keys = refuse;
-- (pgTAP runs the file in one transaction, where a claim is refused unless
-- allowed: api.sql tests that refusal)
SET LOCAL idempotent_pay.claim_in_transaction = allow;
SELECT throws_ok($$SELECT pay_claim('ORDER-7', 10, 'EUR')$$, '22P02',
                 'payment key "ORDER-7" is not a bizNo',
                 'a key of another system is refused by default');
SELECT throws_ok($$SELECT pay_claim('PAY-ORD01-20261204012157362-0000-G064VEFC56FY4Y', 10, 'EUR')$$,
                 '22P02', NULL, 'a bizNo with a character dropped is never a new payment');
SELECT throws_ok($$SELECT pay_open('PAY', 'PAY-ORD001-20261204012157362-0000-G064VEFC56FY4Y', 10, 'EUR')$$,
                 '22023', NULL, 'a biz_id that is a bizNo is refused');
RESET idempotent_pay.foreign_keys;
RESET idempotent_pay.claim_in_transaction;
SELECT is(pay_bizno_valid(repeat('-', 100000)), false, 'pay_bizno_valid never raises');

SELECT throws_ok($$SELECT pay_bizno('pay', 'X')$$, '22023',
                 'invalid bizNo prefix "pay"', 'lower-case prefix: 22023');
SELECT throws_ok($$SELECT pay_bizno(repeat('A', 17), 'X')$$, '22023', NULL,
                 'prefix of 17 characters: 22023');
SELECT throws_ok($$SELECT pay_bizno('PAY', 'a b')$$, '22023',
                 'invalid bizNo biz_id "a b"', 'space in biz_id: 22023');
SELECT throws_ok($$SELECT pay_bizno('PAY', NULL)$$, '22004', NULL, 'NULL biz_id: 22004');
SELECT throws_ok($$SELECT pay_bizno_parse('PAY-1')$$, '22P02',
                 'invalid bizNo: "PAY-1"', 'malformed input to parse: 22P02');
SELECT throws_ok($$SELECT pay_bizno_parse('PAY-ORD001-20261130065033976-0000-366VRA691WVWE1')$$,
                 '22P02', 'invalid check character for bizNo "PAY-ORD001-20261130065033976-0000-366VRA691WVWE1"',
                 'bad check character to parse: 22P02');
SELECT throws_ok($$SELECT pay_bizno_parse('SHOP-1-20261203174955808-0000-0066E619TAX3F-')$$,
                 '22P02', 'invalid check character for bizNo "SHOP-1-20261203174955808-0000-0066E619TAX3F-"',
                 'a check character outside 0-9A-Z that fits, to parse: 22P02');

SELECT is((pay_bizno_parse(pay_bizno('PAY', 'X'))).node_id,
          current_setting('idempotent_pay.node_id')::integer,
          'the server''s node id is written into the bizNo');
SELECT throws_ok($$SET LOCAL idempotent_pay.node_id = 42$$, '55P02', NULL,
                 'not even a superuser sets the node id for a session');

CREATE ROLE tap_bizno_app;
SET LOCAL ROLE tap_bizno_app;
SELECT throws_ok($$SET idempotent_pay.node_id = 1$$, '55P02', NULL,
                 'an application role cannot set the node id');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
