-- The lean PL/pgSQL peer: what a careful engineer writes
-- in an afternoon instead of installing idempotent_pay.  PL/pgSQL functions
-- doing INSERT ... ON CONFLICT DO NOTHING, SELECT ... FOR UPDATE, UPDATE and
-- a journal INSERT; one PL/pgSQL BEFORE INSERT OR UPDATE trigger checking
-- that a status change is legal; the ledger's primary key only; the
-- journal's primary key and an index on bizno.  The same columns as ours.

CREATE SCHEMA lean_pay;

CREATE TABLE lean_pay.ledger (LIKE floor_pay.ledger INCLUDING DEFAULTS INCLUDING INDEXES)
    WITH (fillfactor = 90);
CREATE TABLE lean_pay.journal (LIKE floor_pay.journal INCLUDING DEFAULTS INCLUDING INDEXES);
CREATE SEQUENCE lean_pay.journal_seq;
ALTER TABLE lean_pay.journal ALTER seq SET DEFAULT nextval('lean_pay.journal_seq');

CREATE FUNCTION lean_pay.check_transition() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF NEW.status NOT IN ('INIT', 'PROCESSING') THEN
            RAISE EXCEPTION 'a payment starts in INIT or PROCESSING' USING ERRCODE = '23514';
        END IF;
    ELSIF NEW.status <> OLD.status AND NOT (
            (OLD.status = 'INIT' AND NEW.status = 'PROCESSING')
         OR (OLD.status = 'PROCESSING' AND NEW.status IN ('SUCCESS', 'FAILED'))
         OR (OLD.status = 'FAILED' AND NEW.status = 'INIT')) THEN
        RAISE EXCEPTION 'illegal transition % -> %', OLD.status, NEW.status USING ERRCODE = '23514';
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER check_transition BEFORE INSERT OR UPDATE ON lean_pay.ledger
    FOR EACH ROW EXECUTE FUNCTION lean_pay.check_transition();

CREATE FUNCTION lean_pay.pay_begin(p_bizno text, p_amount numeric, p_currency text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    current lean_pay.ledger;
BEGIN
    INSERT INTO lean_pay.ledger (bizno, status, amount, currency, attempt, processing_since)
    VALUES (p_bizno, 'PROCESSING', p_amount, p_currency, 1, now())
    ON CONFLICT DO NOTHING;
    IF FOUND THEN
        INSERT INTO lean_pay.journal (bizno, attempt, from_status, to_status, amount, currency)
        VALUES (p_bizno, 1, NULL, 'PROCESSING', p_amount, p_currency);
        RETURN 'PROCEED';
    END IF;

    SELECT * INTO current FROM lean_pay.ledger WHERE bizno = p_bizno FOR UPDATE;
    IF current.status = 'SUCCESS' THEN
        RETURN 'ALREADY_SUCCEEDED';
    ELSIF current.status = 'PROCESSING' THEN
        RETURN 'IN_PROGRESS';
    ELSIF current.status = 'FAILED' THEN
        UPDATE lean_pay.ledger SET status = 'INIT', updated_at = now() WHERE bizno = p_bizno;
        INSERT INTO lean_pay.journal (bizno, attempt, from_status, to_status, amount, currency)
        VALUES (p_bizno, current.attempt, 'FAILED', 'INIT', current.amount, current.currency);
    END IF;
    UPDATE lean_pay.ledger
    SET status = 'PROCESSING', attempt = attempt + 1, processing_since = now(), updated_at = now(),
        amount = p_amount, currency = p_currency
    WHERE bizno = p_bizno;
    INSERT INTO lean_pay.journal (bizno, attempt, from_status, to_status, amount, currency)
    VALUES (p_bizno, current.attempt + 1, 'INIT', 'PROCESSING', p_amount, p_currency);
    RETURN 'PROCEED';
END
$$;

CREATE FUNCTION lean_pay.pay_succeed(p_bizno text, p_channel_ref text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    settled lean_pay.ledger;
BEGIN
    UPDATE lean_pay.ledger SET status = 'SUCCESS', channel_ref = p_channel_ref, updated_at = now()
    WHERE bizno = p_bizno AND status = 'PROCESSING'
    RETURNING * INTO settled;
    IF FOUND THEN
        INSERT INTO lean_pay.journal (bizno, attempt, from_status, to_status, amount, currency)
        VALUES (p_bizno, settled.attempt, 'PROCESSING', 'SUCCESS', settled.amount, settled.currency);
        RETURN 'SUCCESS';
    END IF;
    IF EXISTS (SELECT FROM lean_pay.ledger WHERE bizno = p_bizno AND status = 'SUCCESS') THEN
        RETURN 'SUCCESS';
    END IF;
    RAISE EXCEPTION 'payment % cannot succeed', p_bizno USING ERRCODE = '23514';
END
$$;
