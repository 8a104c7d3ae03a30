-- The card flow's contract, one test per refusal: its SQLSTATE, constraint
-- name and hint, and the ledger and journal unchanged after it.
BEGIN;
SELECT plan(49);
-- The tests claim in this transaction, which rolls back at the end.
SET LOCAL idempotent_pay.claim_in_transaction = allow;

-- What a statement raises: SQLSTATE, constraint name and hint ('ok' when it does not raise).
CREATE FUNCTION tap_refusal(statement text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE state text; name text; hint text;
BEGIN EXECUTE statement; RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, name = CONSTRAINT_NAME, hint = PG_EXCEPTION_HINT;
    RETURN state || coalesce(' ' || nullif(name, ''), '') || ' | ' || coalesce(hint, '(no hint)');
END $$;
-- The ledger and the journal, every row: what a refusal must leave as it was.
CREATE FUNCTION tap_state() RETURNS text LANGUAGE sql AS $$
    SELECT md5(coalesce((SELECT string_agg(l::text, ';' ORDER BY l.bizno) FROM pay_ledger AS l), ''))
        || md5(coalesce((SELECT string_agg(j::text, ';' ORDER BY j.seq) FROM pay_journal AS j), ''))
$$;
-- A refusal, checked whole: what it raised, and the state unchanged.
CREATE FUNCTION tap_refused(statement text, expected text, description text) RETURNS SETOF text
LANGUAGE plpgsql AS $$
DECLARE before text := tap_state(); outcome text := tap_refusal(statement);
BEGIN
    RETURN NEXT is(outcome, expected, description);
    RETURN NEXT is(tap_state(), before, description || ': ledger and journal unchanged');
END $$;
-- What a caller reads of a refusal: message, detail and context.
CREATE FUNCTION tap_report(statement text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE message text; detail text; context text;
BEGIN EXECUTE statement; RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS message = MESSAGE_TEXT, detail = PG_EXCEPTION_DETAIL, context = PG_EXCEPTION_CONTEXT;
    RETURN message || ' | ' || coalesce(detail, '(no detail)') || ' | ' || coalesce(nullif(context, ''), '(no context)');
END $$;
-- A refusal raised while a step is recorded reads the same at every retry, and shows none of the extension's SQL.
CREATE FUNCTION tap_refused_alike(statement text, description text) RETURNS SETOF text
LANGUAGE plpgsql AS $$
DECLARE first text := tap_report(statement);
BEGIN
    RETURN NEXT is(tap_report(statement), first, description || ': two identical calls, one message and detail');
    RETURN NEXT matches(first, ' \| \(no context\)$', description || ': no context');
END $$;
CREATE TEMP TABLE tap_ids (k text PRIMARY KEY, bizno text);
CREATE FUNCTION tap_id(key text) RETURNS text LANGUAGE sql AS $$ SELECT bizno FROM tap_ids WHERE k = key $$;

-- A held authorization of 100.00 EUR; one not yet held; one FAILED; a plain payment.
DO $$ BEGIN
    INSERT INTO tap_ids VALUES ('held', pay_open_authorization('TAPCARD', 'held', 100.00, 'EUR'));
    PERFORM pay_claim(tap_id('held')), pay_succeed(tap_id('held'), 'HOLD-1', 1);
    INSERT INTO tap_ids VALUES ('init', pay_open_authorization('TAPCARD', 'init', 50, 'EUR'));
    INSERT INTO tap_ids VALUES ('failed', pay_open_authorization('TAPCARD', 'failed', 50, 'EUR'));
    PERFORM pay_claim(tap_id('failed')), pay_fail(tap_id('failed'), 'declined', 1);
    INSERT INTO tap_ids VALUES ('payment', pay_open('TAPCARD', 'payment', 50, 'EUR'));
    PERFORM pay_claim(tap_id('payment')), pay_succeed(tap_id('payment'), 'PAID-1', 1);
    -- a capture of 60 claimed, a void opened
    INSERT INTO tap_ids VALUES ('c60', pay_capture_open(tap_id('held'), 'C60', 60, false));
    PERFORM pay_claim(tap_id('c60'));
    INSERT INTO tap_ids VALUES ('c50', pay_capture_open(tap_id('held'), 'C50', 50, false));
    INSERT INTO tap_ids VALUES ('void', pay_void_open(tap_id('held'), 'V1'));
END $$;

SELECT function_returns('pay_open_authorization', ARRAY['text', 'text', 'numeric', 'text', 'interval'], 'text');
SELECT function_returns('pay_capture_open', ARRAY['text', 'text', 'numeric', 'boolean'], 'text');
SELECT function_returns('pay_void_open', ARRAY['text', 'text'], 'text');
SELECT function_returns('pay_increment_open', ARRAY['text', 'text', 'numeric'], 'text');

-- pay_authorization_not_held
SELECT * FROM tap_refused(format('SELECT pay_capture_open(%L, %L, 10)', tap_id('init'), 'C1'),
    '55000 pay_authorization_not_held | Capture, void or raise a hold only once its authorization succeeded: claim and settle the authorization first.',
    'a capture of an authorization not yet held');
SELECT * FROM tap_refused_alike(format('SELECT pay_capture_open(%L, %L, 10)', tap_id('init'), 'C1'),
    'a capture of an authorization not yet held');
SELECT * FROM tap_refused(format('SELECT pay_void_open(%L, %L)', tap_id('failed'), 'V1'),
    '55000 pay_authorization_not_held | Capture, void or raise a hold only once its authorization succeeded: claim and settle the authorization first.',
    'a void of a FAILED authorization');
SELECT * FROM tap_refused(format('SELECT pay_capture_open(%L, %L, 10)', tap_id('payment'), 'C1'),
    '55000 pay_authorization_not_held | Capture, void or raise a hold only once its authorization succeeded: claim and settle the authorization first.',
    'a capture of a payment that is no authorization');

-- pay_capture_limit: 60 in flight, 50 more is over the hold of 100
SELECT * FROM tap_refused(format('SELECT pay_claim(%L)', tap_id('c50')),
    '23514 pay_capture_limit | Capture at most 40.00, what the hold has left; a capture that fails frees its share.',
    'a capture claimed over what the hold has left');
SELECT * FROM tap_refused(format($q$INSERT INTO pay_ledger (bizno, status, amount, currency, parent, refund_key, kind)
                                   VALUES ('TAP-RAW-CAPTURE', 'PROCESSING', 41, 'EUR', %L, 'RAW', 'CAPTURE')$q$, tap_id('held')),
    '23514 pay_capture_limit | Capture at most 40.00, what the hold has left; a capture that fails frees its share.',
    'a raw INSERT of a capture in PROCESSING over the hold');

-- pay_increment_after_capture
SELECT * FROM tap_refused(format('SELECT pay_increment_open(%L, %L, 10)', tap_id('held'), 'I1'),
    '55000 pay_increment_after_capture | Raise a hold before its first capture; to charge more now, authorize again.',
    'an increment once a capture is in flight');
SELECT * FROM tap_refused_alike(format('SELECT pay_increment_open(%L, %L, 10)', tap_id('held'), 'I1'),
    'an increment once a capture is in flight');

-- pay_amount_frozen and pay_step_key_taken: a key keeps its step
SELECT * FROM tap_refused(format('SELECT pay_capture_open(%L, %L, 61, false)', tap_id('held'), 'C60'),
    '55000 pay_amount_frozen | A key names one step of one amount: retry with its amount, or use another key for another step.',
    'a capture key with another amount');
SELECT * FROM tap_refused(format('SELECT pay_capture_open(%L, %L, 60)', tap_id('held'), 'C60'),
    '55000 pay_step_key_taken | A key names one step of an authorization, of one kind: retry the step it names, or use another key.',
    'a capture key opened again as a final capture');
SELECT * FROM tap_refused(format('SELECT pay_refund_open(%L, %L, 10)', tap_id('held'), 'V1'),
    '55000 pay_step_key_taken | A key names one step of an authorization, of one kind: retry the step it names, or use another key.',
    'a void''s key opened as a refund');
SELECT * FROM tap_refused($$SELECT pay_open_authorization('TAPCARD', 'payment', 50, 'EUR')$$,
    '55000 pay_step_key_taken | A key names one step of an authorization, of one kind: retry the step it names, or use another key.',
    'an authorization of a business action paid as a payment');

-- pay_refund_limit: an authorization's refunds are held to what its captures captured (nothing yet)
SELECT is(tap_refusal(format('SELECT pay_refund_open(%L, %L, 10)', tap_id('held'), 'R1')), 'ok',
          'a refund of an authorization is opened');
SELECT * FROM tap_refused(format('SELECT pay_claim(pay_refund_open(%L, %L, 10))', tap_id('held'), 'R1'),
    '23514 pay_refund_limit | Refund at most 0, the rest of the capture; a failed refund frees its share.',
    'a refund claimed before anything was captured');

-- pay_authorization_closed: a void in flight closes the hold
SELECT is(tap_refusal(format('SELECT pay_claim(%L)', tap_id('void'))), 'ok', 'the void is claimed');
SELECT * FROM tap_refused(format('SELECT pay_capture_open(%L, %L, 10, false)', tap_id('held'), 'C10'),
    '55000 pay_authorization_closed | The hold is closed: capture nothing more under it; authorize again to charge more. A void or final capture that fails reopens it.',
    'a capture opened while a void is in flight');
SELECT is((SELECT closed_reason FROM pay_authorization_balance(tap_id('held'))), 'void in flight', 'the balance says why');

-- the late SUCCESS of the capture in flight is the bank's truth, and counted
SELECT is(pay_succeed(tap_id('c60'), 'CAPTURED-60', 1)::text, 'SUCCESS', 'a late capture settles after the void');
SELECT results_eq($$SELECT authorized, captured, capture_in_flight, capturable, refundable FROM pay_authorization_balance(tap_id('held'))$$,
                  $$VALUES (100.00::numeric, 60::numeric, 0::numeric, 0::numeric, 60::numeric)$$,
                  'and is counted as captured and refundable');

-- expiry, checked at the claim: a life of one microsecond has passed by the next statement
DO $$ BEGIN
    INSERT INTO tap_ids VALUES ('short', pay_open_authorization('TAPCARD', 'short', 10, 'EUR', '1 microsecond'));
    PERFORM pay_claim(tap_id('short')), pay_succeed(tap_id('short'), 'HOLD-2', 1);
END $$;
SELECT * FROM tap_refused(format('SELECT pay_capture_open(%L, %L, 5)', tap_id('short'), 'C1'),
    '55000 pay_authorization_closed | The hold is closed: capture nothing more under it; authorize again to charge more. A void or final capture that fails reopens it.',
    'a capture of an expired hold');

-- pay_card_step and pay_immutable_column: raw writes held as the API's
SELECT * FROM tap_refused($$INSERT INTO pay_ledger (bizno, status, amount, currency, kind) VALUES ('TAP-RAW', 'INIT', 1, 'EUR', 'HOLD')$$,
    '23514 pay_card_step | Open authorizations with pay_open_authorization, and their captures, voids and increments with pay_capture_open, pay_void_open and pay_increment_open.',
    'a raw row of a kind the card flow does not have');
SELECT * FROM tap_refused(format('UPDATE pay_ledger SET kind = NULL WHERE bizno = %L', tap_id('c50')),
    '23514 pay_immutable_column | Record a new payment instead of changing this one''s identity.',
    'a raw UPDATE turning a capture into a refund');
SELECT * FROM tap_refused(format($q$UPDATE pay_ledger SET expires_in = '1 year' WHERE bizno = %L$q$, tap_id('held')),
    '23514 pay_immutable_column | Record a new payment instead of changing this one''s identity.',
    'a raw UPDATE of an authorization''s life');

-- bad arguments
SELECT throws_ok($$SELECT pay_open_authorization('TAPCARD', 'x', 10, 'EUR', '0 seconds')$$, '22023', NULL, 'expires_in 0');
SELECT throws_ok($$SELECT pay_open_authorization('TAPCARD', 'x', 10, NULL)$$, '22004', NULL, 'no currency');
SELECT throws_ok(format('SELECT pay_capture_open(%L, %L, 0)', tap_id('held'), 'C0'), '22023', NULL, 'a capture of 0');
SELECT throws_ok(format('SELECT pay_capture_open(%L, %L, -1)', tap_id('held'), 'C0'), '22023', NULL, 'a negative capture');

SELECT * FROM finish();
ROLLBACK;
