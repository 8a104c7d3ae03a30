-- Version 1.3: the guarantee does not depend on the caller getting every
-- detail right.  Each section is a mistake an ordinary caller makes, which
-- 1.2 accepted and 1.3 refuses.  In a database of its own, with 1.2
-- installed first, so that a payment made under 1.2 is carried over.

SELECT current_database() AS regression_database \gset
CREATE DATABASE version13;
\c version13
SET client_min_messages = warning;
CREATE EXTENSION idempotent_pay VERSION '1.2';
SELECT pay_open('OLD', 'order-1', 20.00) IS NOT NULL AS opened_under_1_2_without_currency;
CREATE ROLE v13_old_app;
CREATE ROLE v13_old_ops;
SELECT pay_grant('v13_old_app'), pay_grant_operator('v13_old_ops');
ALTER EXTENSION idempotent_pay UPDATE TO '1.3';
SELECT extversion FROM pg_extension WHERE extname = 'idempotent_pay';

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
CREATE FUNCTION refusal(statement text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    message text;
    hint text;
BEGIN
    EXECUTE statement;
    RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS message = MESSAGE_TEXT, hint = PG_EXCEPTION_HINT;
    RETURN message || ' / ' || hint;
END
$$;
CREATE FUNCTION standing(key text) RETURNS text
LANGUAGE sql AS $$
    SELECT coalesce(l.status::text || '/' || l.attempt || '/' || coalesce(l.channel_ref, '-'), 'absent')
           || ' journal:' || (SELECT count(*) FROM pay_journal AS j WHERE j.bizno = key)
    FROM (SELECT 1) AS one LEFT JOIN pay_ledger AS l ON l.bizno = key
$$;

-- 1. The fencing token is required: a late answer for attempt 1 never
-- settles attempt 2.
SELECT attempt FROM pay_claim('V-LATE', 20.00, 'EUR');
SELECT pay_fail('V-LATE', 'timeout', 1);
SELECT attempt FROM pay_claim('V-LATE', 20.00, 'EUR');
SELECT outcome($$SELECT pay_succeed('V-LATE', 'LATE-REF-OF-ATTEMPT-1')$$) AS without_attempt,
       outcome($$SELECT pay_fail('V-LATE', 'late')$$) AS fail_without_attempt,
       outcome($$SELECT pay_succeed('V-LATE', 'LATE-REF-OF-ATTEMPT-1', 1)$$) AS earlier_attempt,
       outcome($$SELECT pay_succeed('V-LATE', 'REF', 3)$$) AS future_attempt;
SELECT refusal($$SELECT pay_succeed('V-LATE', 'LATE-REF-OF-ATTEMPT-1')$$) AS without_attempt;
SELECT standing('V-LATE') AS still_attempt_2;
SELECT pay_succeed('V-LATE', 'REF-2', 2) AS settled;

-- 9. Hints tell the truth: a forgotten claim, or an attempt from the
-- future, is not "a late answer for an earlier attempt".
SELECT pay_open('SHOP', 'forgot-claim', 15.00, 'EUR') AS forgot \gset
SELECT replace(refusal(format('SELECT pay_succeed(%L, %L, 1)', :'forgot', 'R')), :'forgot', '<bizno>') AS forgotten_claim;
SELECT refusal($$SELECT pay_succeed('V-LATE', 'R', 7)$$) AS future_attempt_on_success,
       refusal($$SELECT pay_succeed('V-LATE', 'R', 1)$$) AS earlier_attempt;

-- 2. A payment is complete before it is charged: amount and currency, a
-- currency ISO 4217 knows, an amount in its minor units -- through the API
-- and by raw SQL alike.
SELECT outcome($$SELECT pay_open_claim('SHOP', 'T-8', 20.00)$$) AS no_currency,
       outcome($$SELECT pay_claim('V-NOCUR', 20.00)$$) AS claim_no_currency,
       outcome($$SELECT pay_begin('V-NOCUR', 20.00)$$) AS begin_no_currency,
       outcome($$SELECT pay_open('SHOP', 'T-8', 20.00)$$) AS open_no_currency;
SELECT outcome($$SELECT pay_open_claim('SHOP', 'T-8', 20.00, 'ZZZ')$$) AS unknown_code,
       outcome($$SELECT pay_claim('V-CUR', 10.005, 'EUR')$$) AS three_decimals_eur,
       outcome($$SELECT pay_claim('V-CUR', 10.5, 'JPY')$$) AS half_yen,
       outcome($$SELECT (pay_claim('V-CUR', 10.00, 'JPY')).action$$) AS whole_yen_with_zeros,
       outcome($$SELECT (pay_claim('V-KWD', 1.005, 'KWD')).action$$) AS three_decimals_kwd;
SELECT refusal($$SELECT pay_claim('V-CUR2', 10.005, 'EUR')$$) AS message;
SELECT outcome($$INSERT INTO pay_ledger (bizno, amount, currency) VALUES ('V-RAW', 10, 'ZZZ') RETURNING 'ok'$$) AS raw_unknown_code,
       outcome($$INSERT INTO pay_ledger (bizno, amount, currency) VALUES ('V-RAW', 10.005, 'EUR') RETURNING 'ok'$$) AS raw_three_decimals,
       outcome($$UPDATE pay_ledger SET currency = 'JPY' WHERE bizno = 'V-LATE' RETURNING 'ok'$$) AS raw_frozen;
SELECT count(*) AS nothing_written FROM pay_ledger WHERE bizno IN ('V-NOCUR', 'V-CUR2', 'V-RAW') OR biz_id = 'T-8';
SELECT code, minor_units FROM pay_currencies WHERE code IN ('EUR', 'JPY', 'KWD', 'CLF', 'USD') ORDER BY code;
SELECT count(*) > 150 AS many_currencies, bool_and(code ~ '^[A-Z]{3}$') AS all_codes
FROM pay_currencies;

-- Mismatches name the field and both values.
SELECT outcome($$SELECT pay_claim('V-LATE', 21.00, 'EUR')$$) AS other_amount,
       outcome($$SELECT pay_claim('V-LATE', 20.00, 'USD')$$) AS other_currency;
SELECT refusal($$SELECT pay_claim('V-LATE', 20.00, 'USD')$$) AS message;
-- While INIT or FAILED the amount may change, journaled ...
SELECT pay_open('SHOP', 'change-me', 30.00, 'EUR') AS changing \gset
SELECT pay_open('SHOP', 'change-me', 31.00, 'EUR') = :'changing' AS same_bizno;
SELECT amount FROM pay_ledger WHERE bizno = :'changing';
-- ... unless the operator refuses it.
SET idempotent_pay.parameter_change = refuse;
SELECT outcome($$SELECT pay_open('SHOP', 'change-me', 32.00, 'EUR')$$) AS refused_amount,
       outcome($$SELECT pay_open('SHOP', 'change-me', 31.00, 'USD')$$) AS refused_currency,
       outcome($$SELECT pay_open('SHOP', 'change-me', 31.00, 'EUR') IS NOT NULL$$) AS same_values;
RESET idempotent_pay.parameter_change;

-- A payment made under 1.2 without a currency keeps it as it was.
SELECT status, amount, currency FROM pay_ledger WHERE prefix = 'OLD';

-- 4. SUCCESS carries the bank's reference: 22004 through the API, 23514 by
-- raw SQL; rows already SUCCESS are left as they are.
SELECT (pay_claim('V-REF', 12.00, 'EUR')).action AS claimed;
SELECT outcome($$SELECT pay_succeed('V-REF', NULL, 1)$$) AS api,
       outcome($$SELECT pay_transition('V-REF', 'SUCCESS')$$) AS transition,
       outcome($$UPDATE pay_ledger SET status = 'SUCCESS' WHERE bizno = 'V-REF' RETURNING 'ok'$$) AS raw,
       outcome($$UPDATE pay_ledger SET status = 'SUCCESS', channel_ref = 'BANK-9' WHERE bizno = 'V-REF' RETURNING 'ok'$$) AS raw_with_reference;

-- 5. Bounded input: nothing written.
SELECT (pay_claim('V-BIG', 10.00, 'EUR')).action AS claimed;
SELECT outcome(format('SELECT pay_fail(%L, %L, 1)', 'V-BIG', repeat('x', 1001))) AS long_reason,
       outcome(format('SELECT pay_succeed(%L, %L, 1)', 'V-BIG', repeat('r', 129))) AS long_reference,
       outcome(format('SELECT pay_succeed(%L, %L, 1, %L::jsonb)', 'V-BIG', 'R',
                      jsonb_build_object('blob', repeat('b', 70000)))) AS large_response,
       outcome(format('UPDATE pay_ledger SET last_error = %L WHERE bizno = %L RETURNING 1', repeat('é', 1001), 'V-BIG')) AS raw_long_error;
SELECT refusal(format('SELECT pay_fail(%L, %L, 1)', 'V-BIG', repeat('x', 1001))) AS message;
SELECT standing('V-BIG') AS unchanged;
SELECT pay_fail('V-BIG', repeat('é', 1000), 1) AS thousand_characters_fit;
SELECT outcome(format('SELECT pay_reset(%L, %L)', 'V-BIG', repeat('n', 1001))) AS long_note,
       outcome(format('SELECT pay_transition(%L, %L, %L)', 'V-BIG', 'INIT', repeat('n', 1001))) AS long_transition_note;
SELECT standing('V-BIG') AS still_failed;

-- 3. A second charge is the call's result, and not captured until a bank
-- statement confirms it.
SELECT (pay_claim('V-DUP', 20.00, 'EUR')).action AS claimed;
SELECT pay_succeed('V-DUP', 'REF-A', 1) AS first;
SELECT pay_succeed('V-DUP', 'REF-A', 1) AS same_again;
SELECT pay_succeed('V-DUP', 'REF-A-dup', 1) AS second;
SELECT pay_succeed('V-DUP', 'REF-A-dup2', 1) AS third;
SELECT * FROM pay_refund_balance('V-DUP');
SELECT pay_refund_open('V-DUP', 'r1', 20.00) AS refund_1 \gset
SELECT pay_refund_open('V-DUP', 'r2', 20.00) AS refund_2 \gset
SELECT (pay_claim(:'refund_1')).action AS first_refund;
SELECT outcome(format('SELECT pay_claim(%L)', :'refund_2')) AS second_refund_beyond_capture;
SELECT channel_ref, confirmed FROM pay_second_charges() WHERE bizno = 'V-DUP' ORDER BY channel_ref;
SELECT problem FROM pay_verify() WHERE bizno = 'V-DUP' ORDER BY problem;
SELECT unconfirmed_second_charges FROM pay_stats WHERE status = 'SUCCESS';

-- 7. The bank's statement names charges by the reference callers send the
-- bank, bizNo/attempt ("/" is never part of a key, ":" may be): the
-- statement confirms REF-A-dup, and settles a PROCESSING payment under the
-- attempt its reference names.
SELECT (pay_claim('V:COLON:1', 5.00, 'EUR')).action AS claimed_colon_key;
CREATE TABLE statement (bizno text, amount numeric, currency text, status text, channel_ref text);
INSERT INTO statement VALUES
    ('V-DUP/1', 20.00, 'EUR', 'SUCCESS', 'REF-A'),
    ('V-DUP/1', 20.00, 'EUR', 'SUCCESS', 'REF-A-dup'),
    ('V:COLON:1/1', 5.00, 'EUR', 'SUCCESS', 'BANK-COLON');
SELECT kind, bizno, ledger_status FROM pay_reconcile('statement', true) ORDER BY kind, bizno;
SELECT standing('V:COLON:1') AS settled_under_its_attempt;
SELECT channel_ref, confirmed FROM pay_second_charges() WHERE bizno = 'V-DUP' ORDER BY channel_ref;
SELECT captured, refunded, in_flight FROM pay_refund_balance('V-DUP');
SELECT (pay_claim(:'refund_2')).action AS second_refund_now_fits;

-- 6. The payment of a business action, without its amount and creating
-- nothing.
SELECT bizno = :'changing' AS found, amount FROM pay_find('SHOP', 'change-me');
SELECT count(*) AS none FROM pay_find('SHOP', 'never-opened');
SELECT count(*) AS still_none FROM pay_ledger WHERE biz_id = 'never-opened';

-- 4 again. Least privilege: the application pays, the operator repairs.
CREATE ROLE v13_app;
CREATE ROLE v13_ops;
SELECT pay_grant('v13_app'), pay_grant_operator('v13_ops');
SELECT r.role, f.function, has_function_privilege(r.role, f.function, 'EXECUTE') AS may
FROM (VALUES ('v13_app'), ('v13_ops')) AS r(role),
     (VALUES ('pay_claim(text,numeric,text)'), ('pay_succeed(text,text,integer,jsonb)'),
             ('pay_find(text,text)'), ('pay_reset(text,text)'), ('pay_transition(text,pay_status,text)'),
             ('pay_reconcile(regclass,boolean,timestamptz)'), ('pay_confirm_second_charge(text,text)'),
             ('pay_second_charges()'), ('pay_verify()')) AS f(function)
ORDER BY 1, 2;
SELECT r.role, has_table_privilege(r.role, 'pay_guards', 'SELECT') AS reads_guards,
       has_table_privilege(r.role, 'pay_stats', 'SELECT') AS reads_stats
FROM (VALUES ('v13_app'), ('v13_ops')) AS r(role) ORDER BY 1;
SET ROLE v13_app;
SELECT outcome($$SELECT pay_transition('V-REF', 'FAILED')$$) AS app_transition,
       outcome($$SELECT pay_reset('V-BIG', 'why')$$) AS app_reset;
RESET ROLE;

-- A 1.2 grantee of pay_grant lost pay_reset and pay_transition on the
-- update and gained pay_find; a 1.2 operator gained them.
SELECT r.role, f.function, has_function_privilege(r.role, f.function, 'EXECUTE') AS may
FROM (VALUES ('v13_old_app'), ('v13_old_ops')) AS r(role),
     (VALUES ('pay_succeed(text,text,integer,jsonb)'), ('pay_find(text,text)'), ('pay_reset(text,text)'),
             ('pay_transition(text,pay_status,text)'), ('pay_confirm_second_charge(text,text)'),
             ('pay_second_charges()')) AS f(function)
ORDER BY 1, 2;

-- 1.3 has no batches, and its pay_open_claim records a new business
-- action INIT, then claims it: two journal rows (1.4's SQL journals one).
SELECT count(*) AS batch_functions FROM pg_proc
WHERE proname IN ('pay_open_claim_many', 'pay_settle_many');
SELECT bizno AS batchless, action FROM pay_open_claim('SHOP', 'V13-BATCHLESS', 20.00, 'EUR') \gset
SELECT :'action' AS action,
       string_agg(coalesce(from_status::text, 'NULL') || ' -> ' || to_status, ', ' ORDER BY seq) AS journal
FROM pay_journal WHERE bizno = :'batchless';

\c :regression_database
DROP DATABASE version13;
DROP ROLE v13_app, v13_ops, v13_old_app, v13_old_ops;
