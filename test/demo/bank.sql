-- The simulated bank of the half-open-network demo, in a schema of its own.
-- charge() books a charge and returns its id, or NULL when it declines: it
-- declines a share of first requests for a reference, and every request
-- for a reference that query_and_close() has closed.  refund() books money
-- paid back the same way.  query_and_close() is what a reconciler asks: the
-- charge or refund booked for a reference, if any, and from then on the
-- reference takes no more -- so a request still in flight can never be
-- booked after the payment was marked FAILED.  card() books a step of a
-- card payment (a hold, a capture, a void, a refund) of an authorization
-- under the same rules, in the order the bank took them.  A caller of idempotent_pay
-- charges under bizNo/attempt, and its reconciler asks under that same
-- reference: each attempt is booked, and closed, on its own.

DROP SCHEMA IF EXISTS bank CASCADE;
CREATE SCHEMA bank;

CREATE TABLE bank.requests (ref text NOT NULL);
CREATE INDEX ON bank.requests (ref);
CREATE TABLE bank.closed (ref text PRIMARY KEY);
CREATE TABLE bank.charges (
    id      bigserial PRIMARY KEY,
    ref     text NOT NULL,
    amount  numeric NOT NULL,
    at      timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX ON bank.charges (ref);
-- Money paid back: refund() books like charge(), under the same rules.
CREATE TABLE bank.refunds (
    id      bigint PRIMARY KEY DEFAULT nextval('bank.charges_id_seq'),
    ref     text NOT NULL,
    amount  numeric NOT NULL,
    at      timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX ON bank.refunds (ref);

-- The steps of card payments: what the bank took for each authorization,
-- in the order it took them (id).
CREATE TABLE bank.card (
    id      bigint PRIMARY KEY DEFAULT nextval('bank.charges_id_seq'),
    ref     text NOT NULL,
    auth    text NOT NULL,
    kind    text NOT NULL CHECK (kind IN ('hold', 'capture', 'void', 'refund')),
    amount  numeric,
    at      timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX ON bank.card (ref);
CREATE INDEX ON bank.card (auth);

CREATE FUNCTION bank.book(p_kind text, p_ref text, p_amount numeric, p_decline_rate float8)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    first_request boolean;
    booked_id bigint;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext(p_ref));
    IF EXISTS (SELECT FROM bank.closed WHERE ref = p_ref) THEN
        RETURN NULL;
    END IF;
    first_request := NOT EXISTS (SELECT FROM bank.requests WHERE ref = p_ref);
    INSERT INTO bank.requests VALUES (p_ref);
    IF first_request AND random() < p_decline_rate THEN
        RETURN NULL;
    END IF;
    IF p_kind = 'refund' THEN
        INSERT INTO bank.refunds (ref, amount) VALUES (p_ref, p_amount) RETURNING id INTO booked_id;
    ELSE
        INSERT INTO bank.charges (ref, amount) VALUES (p_ref, p_amount) RETURNING id INTO booked_id;
    END IF;
    RETURN booked_id;
END
$$;

CREATE FUNCTION bank.charge(p_ref text, p_amount numeric, p_decline_rate float8)
RETURNS bigint LANGUAGE sql AS $$
    SELECT bank.book('charge', p_ref, p_amount, p_decline_rate)
$$;

CREATE FUNCTION bank.refund(p_ref text, p_amount numeric, p_decline_rate float8)
RETURNS bigint LANGUAGE sql AS $$
    SELECT bank.book('refund', p_ref, p_amount, p_decline_rate)
$$;

CREATE FUNCTION bank.card(p_kind text, p_ref text, p_auth text, p_amount numeric, p_decline_rate float8)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    first_request boolean;
    booked_id bigint;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext(p_ref));
    IF EXISTS (SELECT FROM bank.closed WHERE ref = p_ref) THEN
        RETURN NULL;
    END IF;
    first_request := NOT EXISTS (SELECT FROM bank.requests WHERE ref = p_ref);
    INSERT INTO bank.requests VALUES (p_ref);
    IF first_request AND random() < p_decline_rate THEN
        RETURN NULL;
    END IF;
    INSERT INTO bank.card (ref, auth, kind, amount) VALUES (p_ref, p_auth, p_kind, p_amount)
        RETURNING id INTO booked_id;
    RETURN booked_id;
END
$$;

CREATE FUNCTION bank.query_and_close(p_ref text)
RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext(p_ref));
    INSERT INTO bank.closed VALUES (p_ref) ON CONFLICT DO NOTHING;
    RETURN coalesce((SELECT min(id) FROM bank.charges WHERE ref = p_ref),
                    (SELECT min(id) FROM bank.refunds WHERE ref = p_ref),
                    (SELECT min(id) FROM bank.card WHERE ref = p_ref));
END
$$;
