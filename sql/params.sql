-- Version 1.4: a payment's parameters.  A retry keeps the amount and
-- currency it was opened with, in every state; an amount is bounded; no
-- refusal quotes a megabyte of what it was given; the attempt is taken as
-- any integer type; a payment the reconciler settles replays a response.
-- The last section installs 1.3, which keeps 1.3's answers until it is
-- updated.

-- The refusals are caught in subtransactions, where a claim is refused
-- unless allowed (claim_durable's test).
SET idempotent_pay.claim_in_transaction = allow;

CREATE FUNCTION params_standing(key text) RETURNS text
LANGUAGE sql AS $$
    SELECT l.status || ' ' || l.amount || ' ' || l.currency || ' attempt ' || l.attempt
           || ' journal:' || (SELECT count(*) FROM pay_journal AS j WHERE j.bizno = key)
    FROM pay_ledger AS l WHERE l.bizno = key
$$;

-- 1. Another amount or currency under a known key is refused (55000) in
-- every state: pay_parameter_changed while INIT or FAILED, where 1.3
-- replaced it; pay_amount_frozen and pay_currency_frozen, as before, while
-- PROCESSING or SUCCESS.
SELECT pay_open('PRMSHOP', 'init', 10.00, 'EUR') AS init \gset
SHOW idempotent_pay.parameter_change;
SELECT action FROM pay_claim('PRM-PROCESSING', 10.00, 'EUR');
SELECT action FROM pay_claim('PRM-SUCCESS', 10.00, 'EUR');
SELECT pay_succeed('PRM-SUCCESS', 'BANK-PRM-1', 1);
SELECT action FROM pay_claim('PRM-FAILED', 10.00, 'EUR');
SELECT pay_fail('PRM-FAILED', 'declined', 1);
CREATE TEMP TABLE prm_keys (state text, key text);
INSERT INTO prm_keys VALUES ('INIT', :'init'), ('PROCESSING', 'PRM-PROCESSING'),
    ('SUCCESS', 'PRM-SUCCESS'), ('FAILED', 'PRM-FAILED');
SELECT k.state,
       outcome(format('SELECT pay_claim(%L, 12.00, %L)', k.key, 'EUR')) AS other_amount,
       outcome(format('SELECT pay_claim(%L, 10.00, %L)', k.key, 'USD')) AS other_currency,
       outcome(format('SELECT pay_begin(%L, 12.00, %L)', k.key, 'EUR')) AS begin_other_amount,
       params_standing(k.key) AS standing
FROM prm_keys AS k ORDER BY k.state;
-- pay_open and pay_open_claim of the business action: the same rule.
SELECT outcome($$SELECT pay_open('PRMSHOP', 'init', 12.00, 'EUR')$$) AS open_other_amount,
       outcome($$SELECT bizno FROM pay_open_claim('PRMSHOP', 'init', 10.00, 'USD')$$) AS open_claim_other_currency;
-- The refusal names the field and both values.
SELECT refusal_message($$SELECT pay_claim('PRM-FAILED', 12.00, 'EUR')$$) AS amount_refusal;
SELECT refusal_message($$SELECT pay_claim('PRM-FAILED', 10.00, 'USD')$$) AS currency_refusal;
-- The same values, written as another numeric, are no change.
SELECT action FROM pay_claim('PRM-FAILED', 10, 'EUR') AS same_values;
SELECT params_standing('PRM-FAILED') AS failed_retried;
-- A payment recorded without a currency (as 1.0 to 1.2 recorded them) is
-- completed by the claim that brings one: nothing recorded changes.
INSERT INTO pay_ledger (bizno, amount) VALUES ('PRM-NO-CURRENCY', 7.00);
SELECT action FROM pay_claim('PRM-NO-CURRENCY', 7.00, 'EUR') AS completed;
SELECT params_standing('PRM-NO-CURRENCY') AS completed_payment;
-- allow keeps 1.3's rule: the new values replace the old ones, journaled.
SET idempotent_pay.parameter_change = allow;
SELECT pay_fail('PRM-FAILED', 'declined again', 2);
SELECT action, attempt FROM pay_claim('PRM-FAILED', 15.00, 'USD') AS allowed;
SELECT from_status, to_status, amount, currency, note
FROM pay_journal WHERE bizno = 'PRM-FAILED' ORDER BY seq;
SELECT outcome($$SELECT pay_claim('PRM-PROCESSING', 12.00, 'EUR')$$) AS processing_under_allow;
RESET idempotent_pay.parameter_change;
-- A session may not choose the rule: it is the operator's.
CREATE ROLE params_app;
SELECT pay_grant('params_app');
SET ROLE params_app;
SELECT outcome($$SET idempotent_pay.parameter_change = allow$$) AS app_sets_allow,
       outcome($$SET idempotent_pay.max_amount = '922337203685477'$$) AS app_raises_bound;
RESET ROLE;

-- 2. An amount is at most idempotent_pay.max_amount units of its currency
-- (22003): by default 10^14, and never more than 922337203685477, so that
-- every amount is a bigint count of minor units, 4 decimals (CLF) included.
SHOW idempotent_pay.max_amount;
SELECT outcome($$SELECT pay_open('PRMSHOP', 'at-bound', 100000000000000, 'EUR') IS NOT NULL$$) AS at_bound,
       outcome($$SELECT pay_open('PRMSHOP', 'beyond', 100000000000000.01, 'EUR')$$) AS beyond_bound,
       outcome($$SELECT pay_claim('PRM-HUGE', 1e130000, 'EUR')$$) AS huge,
       outcome($$SELECT pay_begin('PRM-HUGE', 1e15, 'JPY')$$) AS begin_huge,
       outcome($$SELECT bizno FROM pay_open_claim('PRMSHOP', 'huge', 1e20, 'USD')$$) AS open_claim_huge;
SELECT refusal_message($$SELECT pay_claim('PRM-HUGE', 1e130000, 'EUR')$$) AS huge_refusal;
SELECT count(*) AS huge_rows FROM pay_ledger WHERE bizno = 'PRM-HUGE' OR biz_id IN ('beyond', 'huge');
-- By raw SQL too: the bookkeeping trigger holds every write.
SELECT outcome($$INSERT INTO pay_ledger (bizno, amount, currency) VALUES ('PRM-RAW', 1e15, 'EUR') RETURNING bizno$$) AS raw_insert,
       outcome(format('UPDATE pay_ledger SET amount = 1e15 WHERE bizno = %L RETURNING bizno', :'init')) AS raw_update,
       outcome($$INSERT INTO pay_ledger (bizno, amount, currency) VALUES ('PRM-RAW', 5e13, 'EUR') RETURNING amount$$) AS raw_within;
-- A refund is held to it too.
SELECT outcome($$SELECT pay_refund_open('PRM-SUCCESS', 'R-HUGE', 1e15)$$) AS huge_refund;
-- The operator sets the bound; a bound no bigint of minor units holds is refused.
SET idempotent_pay.max_amount = '1000';
SELECT outcome($$SELECT pay_open('PRMSHOP', 'over-1000', 1000.01, 'EUR')$$) AS over_1000,
       outcome($$SELECT pay_open('PRMSHOP', 'at-1000', 1000.00, 'EUR') IS NOT NULL$$) AS at_1000;
SET idempotent_pay.max_amount = '922337203685477';
SELECT pay_open('PRMSHOP', 'clf', 922337203685477.0000, 'CLF') IS NOT NULL AS largest_clf;
SELECT (amount * 10000)::bigint AS clf_minor_units FROM pay_ledger WHERE biz_id = 'clf';
SELECT outcome($$SET idempotent_pay.max_amount = '922337203685478'$$) AS above_limit,
       outcome($$SET idempotent_pay.max_amount = '0'$$) AS zero,
       outcome($$SET idempotent_pay.max_amount = '1e14'$$) AS exponent,
       outcome($$SET idempotent_pay.max_amount = '99999999999999999999999'$$) AS overflow;
RESET idempotent_pay.max_amount;

-- 3. No refusal quotes a megabyte of its input: what it quotes is cut
-- after 128 characters and marked with the input's length.
CREATE TEMP TABLE prm_big (call text);
INSERT INTO prm_big VALUES
    ($$SELECT pay_claim(repeat('x', 1000000), 10, 'EUR')$$),
    ($$SELECT pay_claim('PRM-' || repeat('x', 1000000), 10, 'EUR')$$),
    ($$SELECT pay_open(repeat('P', 1000000), 'order', 10, 'EUR')$$),
    ($$SELECT pay_open('PRMSHOP', repeat('x', 1000000), 10, 'EUR')$$),
    ($$SELECT pay_open('PRMSHOP', 'order', 10, repeat('E', 1000000))$$),
    ($$SELECT pay_open('PRMSHOP', 'order', 10, repeat('é', 500000))$$),
    ($$SELECT pay_open('PRMSHOP', 'order', -1e130000, 'EUR')$$),
    ($$SELECT pay_open('PRMSHOP', 'order', 1e-16383, 'EUR')$$),
    ($$SELECT pay_succeed(repeat('x', 1000000), 'REF', 1)$$),
    ($$SELECT pay_succeed('PRM-PROCESSING', repeat('r', 1000000), 1)$$),
    ($$SELECT pay_fail('PRM-PROCESSING', repeat('r', 1000000), 1)$$),
    ($$SELECT pay_refund_open('PRM-SUCCESS', repeat('k', 1000000), 1)$$),
    ($$SELECT pay_confirm_second_charge('PRM-SUCCESS', repeat('r', 1000000))$$),
    ($$SELECT pay_bizno('PRMSHOP', repeat('x', 1000000))$$),
    ($$SELECT * FROM pay_bizno_parse('PRM-' || repeat('x', 1000000) || '-20260101000000000-0000-0000000000000A')$$),
    ($$INSERT INTO pay_ledger (bizno, amount, currency) VALUES (repeat('x', 1000000), 10, 'EUR')$$);
SELECT b.call, r.refusal IS DISTINCT FROM 'no error' AS refused,
       length(r.refusal) AS refusal_length, r.refusal LIKE '%... (% bytes)%' AS marked
FROM prm_big AS b, LATERAL (SELECT refusal_message(b.call) AS refusal) AS r;
-- A guarded table of one's own: its rows' statuses and keys, quoted by
-- pay_protect and by the guard.
CREATE TABLE prm_orders (id text PRIMARY KEY, status text);
INSERT INTO prm_orders VALUES ('order-1', repeat('x', 1000000));
SELECT length(refusal_message($$SELECT pay_protect('prm_orders')$$)) AS protect_refusal_length,
       refusal_message($$SELECT pay_protect('prm_orders')$$) LIKE '%''... (1000000 bytes) in column%' AS marked;
UPDATE prm_orders SET status = 'SUCCESS';
INSERT INTO prm_orders VALUES (repeat('k', 100000), 'SUCCESS');
SELECT pay_protect('prm_orders');
SELECT length(r) AS guard_status_refusal_length, r LIKE '%"yyyy%... (1000000 bytes)" in (id)=(order-1)%' AS marked
FROM refusal_message($$UPDATE prm_orders SET status = repeat('y', 1000000) WHERE id = 'order-1'$$) AS r;
SELECT length(r) AS guard_key_refusal_length, r LIKE '%(id)=(kkkk%... (100007 bytes)%' AS marked
FROM refusal_message($$DELETE FROM prm_orders WHERE length(id) > 1000$$) AS r;
SELECT pay_unprotect('prm_orders');
DROP TABLE prm_orders;
SELECT refusal_message($$SELECT pay_open('PRMSHOP', repeat('x', 1000000), 10, 'EUR')$$) AS quoted;
SELECT refusal_message($$SELECT pay_open('PRMSHOP', 'order', 10, repeat('é', 500000))$$) AS quoted_multibyte;

-- 4. The attempt is taken as a smallint, an integer, a bigint, a quoted
-- literal; NULL is still 22004; beyond an integer's range it is 22003.
SELECT action FROM pay_claim('PRM-ATT-2', 10.00, 'EUR');
SELECT action FROM pay_claim('PRM-ATT-4', 10.00, 'EUR');
SELECT action FROM pay_claim('PRM-ATT-8', 10.00, 'EUR');
SELECT action FROM pay_claim('PRM-ATT-LIT', 10.00, 'EUR');
SELECT pay_succeed('PRM-ATT-2', 'BANK-ATT-2', 1::smallint) AS smallint_attempt,
       pay_succeed('PRM-ATT-4', 'BANK-ATT-4', 1::integer) AS integer_attempt,
       pay_fail('PRM-ATT-8', 'declined', 1::bigint) AS bigint_attempt,
       pay_succeed('PRM-ATT-LIT', 'BANK-ATT-LIT', '1') AS literal_attempt;
SELECT outcome($$SELECT pay_succeed('PRM-PROCESSING', 'BANK-PRM-2', NULL)$$) AS null_attempt,
       outcome($$SELECT pay_succeed('PRM-PROCESSING', 'BANK-PRM-2', 4294967297)$$) AS beyond_int4,
       outcome($$SELECT pay_fail('PRM-PROCESSING', 'late', -4294967295)$$) AS below_int4,
       outcome($$SELECT pay_succeed('PRM-PROCESSING', 'BANK-PRM-2', 2147483648::bigint)$$) AS int4_max_plus_1;
SELECT refusal_message($$SELECT pay_succeed('PRM-PROCESSING', 'BANK-PRM-2', 4294967297)$$) AS beyond_int4_refusal;
-- 4294967297 would wrap to 1, the current attempt, as an integer: refused,
-- the payment stays.
SELECT params_standing('PRM-PROCESSING') AS still_processing;

-- 5. A payment the reconciler settles stores a response, which a retry
-- replays: the statement's, or else the bank's row.
SELECT action FROM pay_claim('PRM-REC-1', 20.00, 'EUR');
SELECT action FROM pay_claim('PRM-REC-2', 30.00, 'EUR');
CREATE TABLE prm_statement (bizno text, amount numeric, currency text, status text, channel_ref text, response jsonb);
INSERT INTO prm_statement VALUES
    ('PRM-REC-1/1', 20.00, 'EUR', 'SUCCESS', 'BANK-REC-1', '{"receipt": "R-1"}'),
    ('PRM-REC-2/1', 30.00, 'EUR', 'SUCCESS', 'BANK-REC-2', NULL);
SELECT kind, bizno, detail FROM pay_reconcile('prm_statement', true) WHERE bizno LIKE 'PRM-REC-%';
SELECT c.action, c.channel_ref, c.response FROM pay_claim('PRM-REC-1', 20.00, 'EUR') AS c;
SELECT c.action, c.channel_ref, c.response FROM pay_claim('PRM-REC-2', 30.00, 'EUR') AS c;
-- A statement without the column: the bank's row.
SELECT action FROM pay_claim('PRM-REC-3', 40.00, 'EUR');
CREATE TABLE prm_statement_plain (bizno text, amount numeric, currency text, status text, channel_ref text);
INSERT INTO prm_statement_plain VALUES ('PRM-REC-3', 40.00, 'EUR', 'SUCCESS', 'BANK-REC-3');
SELECT kind, bizno, detail FROM pay_reconcile('prm_statement_plain', true) WHERE bizno = 'PRM-REC-3';
SELECT c.action, c.response FROM pay_claim('PRM-REC-3') AS c;
-- A statement given as rows, with a response.
SELECT action FROM pay_claim('PRM-REC-4', 50.00, 'EUR');
SELECT kind, bizno, detail FROM pay_reconcile_rows(
    '[{"bizno": "PRM-REC-4", "amount": 50.00, "currency": "EUR", "status": "SUCCESS",
       "channel_ref": "BANK-REC-4", "response": {"receipt": "R-4"}}]', true)
WHERE bizno = 'PRM-REC-4';
SELECT c.action, c.response FROM pay_claim('PRM-REC-4') AS c;
DROP TABLE prm_statement, prm_statement_plain;
SELECT * FROM pay_verify() WHERE bizno LIKE 'PRM-%';
DROP OWNED BY params_app;
DROP ROLE params_app;

-- 6. An installation at 1.3 keeps 1.3's answers with this library: another
-- amount replaces the old one while FAILED (parameter_change = default is
-- allow there), amounts are unbounded, the attempt is an integer.  Updated,
-- it has 1.4's, and its application role may still settle.
SELECT current_database() AS regression_database \gset
CREATE DATABASE params13;
\c params13
SET client_min_messages = warning;
SET idempotent_pay.claim_in_transaction = allow;
-- keys of this file's own, keys of another system (regress keys tests the refusal)
SET idempotent_pay.foreign_keys = accept;
CREATE EXTENSION idempotent_pay VERSION '1.3';
CREATE ROLE params13_app;
SELECT pay_grant('params13_app');
-- grants of a DBA's own, to PUBLIC and with the grant option
CREATE ROLE params13_delegate;
GRANT EXECUTE ON FUNCTION pay_succeed(text, text, integer, jsonb) TO params13_delegate WITH GRANT OPTION;
GRANT EXECUTE ON FUNCTION pay_fail(text, text, integer) TO PUBLIC;
CREATE FUNCTION outcome(statement text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    result text;
    state text;
    constraint_name text;
BEGIN
    EXECUTE statement INTO result;
    RETURN coalesce(result, 'ok');
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, constraint_name = CONSTRAINT_NAME;
    RETURN state || coalesce(' ' || nullif(constraint_name, ''), '');
END
$$;
SHOW idempotent_pay.parameter_change;
SELECT action FROM pay_claim('P13-FAILED', 10.00, 'EUR');
SELECT pay_fail('P13-FAILED', 'declined', 1);
SELECT action, attempt FROM pay_claim('P13-FAILED', 12.00, 'EUR') AS retried_with_other_amount;
SELECT amount, currency FROM pay_ledger WHERE bizno = 'P13-FAILED';
SELECT count(*) AS changes_journaled FROM pay_journal WHERE bizno = 'P13-FAILED' AND note = 'amount or currency changed';
SELECT outcome($$SELECT pay_open('P13', 'huge', 1e20, 'EUR') IS NOT NULL$$) AS huge_amount,
       outcome($$INSERT INTO pay_ledger (bizno, amount, currency) VALUES ('P13-RAW', 1e20, 'EUR') RETURNING amount$$) AS raw_huge,
       outcome($$SELECT pay_fail('P13-FAILED', 'declined', 2::bigint)$$) AS bigint_attempt;
-- An explicit refuse is refused there too, as 1.3 did.
SELECT pay_fail('P13-FAILED', 'declined', 2);
SET idempotent_pay.parameter_change = refuse;
SELECT outcome($$SELECT pay_claim('P13-FAILED', 13.00, 'EUR')$$) AS refused_under_1_3;
RESET idempotent_pay.parameter_change;
ALTER EXTENSION idempotent_pay UPDATE TO '1.4';
SELECT action FROM pay_claim('P13X-AFTER', 10.00, 'EUR');
SELECT pay_fail('P13X-AFTER', 'declined', 1::bigint) AS bigint_attempt_after_update;
SELECT outcome($$SELECT pay_claim('P13-FAILED', 14.00, 'EUR')$$) AS other_amount_after_update,
       outcome($$SELECT pay_open('P13', 'huge-2', 1e20, 'EUR')$$) AS huge_after_update;
SELECT has_function_privilege('params13_app', 'pay_succeed(text, text, bigint, jsonb)', 'EXECUTE')
           AND has_function_privilege('params13_app', 'pay_fail(text, text, bigint)', 'EXECUTE') AS app_may_settle;
SELECT has_function_privilege('params13_delegate', 'pay_succeed(text, text, bigint, jsonb)',
                              'EXECUTE WITH GRANT OPTION') AS delegate_may_grant,
       (SELECT proacl::text[] FROM pg_proc WHERE oid = 'pay_fail(text, text, bigint)'::regprocedure)
           @> ARRAY['=X/' || current_user] AS public_may_fail;
\c :regression_database
DROP DATABASE params13;
DROP ROLE params13_app, params13_delegate;
