-- Helpers the later regression files share.

-- Run a statement that returns one value; give that value, or the SQLSTATE
-- and constraint name of the error it raised.  The two helpers catch the
-- error in a subtransaction, where a claim is refused by default (its
-- handler could roll the claim back); the claims they run are committed
-- with the test's statement, so they allow it.
CREATE FUNCTION outcome(statement text) RETURNS text
SET idempotent_pay.claim_in_transaction = allow
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

-- The message of the error a statement raises (NULL if it raises none).
CREATE FUNCTION error_message(statement text) RETURNS text
SET idempotent_pay.claim_in_transaction = allow
LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE statement;
    RETURN NULL;
EXCEPTION WHEN OTHERS THEN
    RETURN SQLERRM;
END
$$;

-- The whole refusal a statement raises: message / detail / hint ('no
-- error' if it raises none).
CREATE FUNCTION refusal_message(statement text) RETURNS text
SET idempotent_pay.claim_in_transaction = allow
LANGUAGE plpgsql AS $$
DECLARE
    message text;
    detail text;
    hint text;
BEGIN
    EXECUTE statement;
    RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS message = MESSAGE_TEXT, detail = PG_EXCEPTION_DETAIL, hint = PG_EXCEPTION_HINT;
    RETURN message || ' / ' || coalesce(detail, '') || ' / ' || coalesce(hint, '');
END
$$;

-- A payment of 10 EUR with this key in this state, made through the API
-- (INIT by a plain insert, which the guard allows), settled under its first
-- attempt with the reference REF-<key>.
CREATE FUNCTION payment_in(key text, state pay_status) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
    IF state = 'INIT' THEN
        INSERT INTO pay_ledger (bizno, status, amount, currency) VALUES (key, 'INIT', 10, 'EUR');
    ELSE
        PERFORM pay_begin(key, 10, 'EUR');
        IF state = 'SUCCESS' THEN
            PERFORM pay_succeed(key, 'REF-' || key, 1);
        ELSIF state = 'FAILED' THEN
            PERFORM pay_fail(key, 'declined', 1);
        END IF;
    END IF;
    RETURN key;
END
$$;

-- How a payment stands: status, attempt, journal rows.
CREATE FUNCTION standing(key text) RETURNS text
LANGUAGE sql AS $$
    SELECT coalesce(l.status::text || '/' || l.attempt, 'absent') || ' journal:' ||
           (SELECT count(*) FROM pay_journal AS j WHERE j.bizno = key)
    FROM (SELECT 1) AS one LEFT JOIN pay_ledger AS l ON l.bizno = key
$$;

-- These suites key their payments by ids of their own ('UP-1', 'P-SUCCESS'),
-- which are keys of another system to the extension: every later file
-- accepts them.  The tests of the default (keys) set it back themselves.
DO $$
BEGIN
    EXECUTE format('ALTER DATABASE %I SET idempotent_pay.foreign_keys = accept', current_database());
END
$$;
