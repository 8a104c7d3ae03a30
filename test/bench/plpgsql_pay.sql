-- The same payment semantics as idempotent_pay, written in PL/pgSQL, for
-- the benchmark to compare against: ON CONFLICT insert, FOR UPDATE re-read,
-- the same ledger and journal rows, the guard and the bookkeeping as PL/pgSQL
-- triggers, SECURITY DEFINER with a pinned search_path.

CREATE SCHEMA plpgsql_pay;

-- The same columns, defaults, CHECKs, indexes and fillfactor as the real tables.
CREATE TABLE plpgsql_pay.ledger (LIKE pay_ledger INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING INDEXES)
    WITH (fillfactor = 90);
CREATE SEQUENCE plpgsql_pay.journal_seq;
CREATE TABLE plpgsql_pay.journal (LIKE pay_journal INCLUDING INDEXES);
ALTER TABLE plpgsql_pay.journal ALTER seq SET DEFAULT nextval('plpgsql_pay.journal_seq'),
    ALTER at SET DEFAULT now(), ALTER txid SET DEFAULT pg_current_xact_id(),
    ALTER actor SET DEFAULT CURRENT_USER;

-- The transition table, as in src/machine.c.
CREATE FUNCTION plpgsql_pay.allowed(from_status pay_status, to_status pay_status) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE
        WHEN from_status IS NULL THEN to_status IN ('INIT', 'PROCESSING')
        WHEN from_status = 'INIT' THEN to_status = 'PROCESSING'
        WHEN from_status = 'PROCESSING' THEN to_status IN ('SUCCESS', 'FAILED')
        WHEN from_status = 'FAILED' THEN to_status = 'INIT'
        ELSE false
    END
$$;

CREATE FUNCTION plpgsql_pay.guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF NOT plpgsql_pay.allowed(NULL, NEW.status) THEN
            RAISE EXCEPTION 'illegal payment status transition' USING ERRCODE = '23514';
        END IF;
        NEW.attempt := CASE WHEN NEW.status = 'PROCESSING' THEN 1 ELSE 0 END;
        NEW.processing_since := CASE WHEN NEW.status = 'PROCESSING' THEN now() END;
        NEW.created_at := now();
        NEW.updated_at := now();
        RETURN NEW;
    END IF;
    IF NEW.status <> OLD.status AND NOT plpgsql_pay.allowed(OLD.status, NEW.status) THEN
        RAISE EXCEPTION 'illegal payment status transition' USING ERRCODE = '23514';
    END IF;
    IF OLD.status IN ('PROCESSING', 'SUCCESS')
       AND (NEW.amount IS DISTINCT FROM OLD.amount OR NEW.currency IS DISTINCT FROM OLD.currency) THEN
        RAISE EXCEPTION 'frozen column' USING ERRCODE = '23514';
    END IF;
    IF NEW.bizno <> OLD.bizno THEN
        RAISE EXCEPTION 'frozen column' USING ERRCODE = '23514';
    END IF;
    NEW.attempt := OLD.attempt + CASE WHEN OLD.status <> 'PROCESSING' AND NEW.status = 'PROCESSING' THEN 1 ELSE 0 END;
    NEW.processing_since := CASE WHEN OLD.status <> 'PROCESSING' AND NEW.status = 'PROCESSING'
                                 THEN now() ELSE OLD.processing_since END;
    NEW.updated_at := now();
    RETURN NEW;
END
$$;

CREATE FUNCTION plpgsql_pay.journal_write() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO plpgsql_pay.journal (bizno, attempt, from_status, to_status, amount, currency)
    VALUES (NEW.bizno, NEW.attempt, CASE WHEN TG_OP = 'UPDATE' THEN OLD.status END, NEW.status,
            NEW.amount, NEW.currency);
    RETURN NULL;
END
$$;

CREATE TRIGGER guard BEFORE INSERT OR UPDATE ON plpgsql_pay.ledger
    FOR EACH ROW EXECUTE FUNCTION plpgsql_pay.guard();
CREATE TRIGGER journal_insert AFTER INSERT ON plpgsql_pay.ledger
    FOR EACH ROW EXECUTE FUNCTION plpgsql_pay.journal_write();
CREATE TRIGGER journal_update AFTER UPDATE ON plpgsql_pay.ledger
    FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status OR OLD.amount IS DISTINCT FROM NEW.amount
                       OR OLD.currency IS DISTINCT FROM NEW.currency)
    EXECUTE FUNCTION plpgsql_pay.journal_write();

CREATE FUNCTION plpgsql_pay.pay_begin(p_bizno text, p_amount numeric DEFAULT NULL,
                                      p_currency text DEFAULT NULL) RETURNS pay_action
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
    current pay_status;
    recorded plpgsql_pay.ledger;
BEGIN
    IF p_bizno IS NULL OR p_bizno !~ '^[A-Za-z0-9_.:-]{1,128}$' THEN
        RAISE EXCEPTION 'invalid key' USING ERRCODE = '22P02';
    END IF;
    IF p_amount <= 0 OR p_amount = 'NaN' OR p_amount = 'Infinity' OR p_currency !~ '^[A-Z]{3}$' THEN
        RAISE EXCEPTION 'invalid amount or currency' USING ERRCODE = '22023';
    END IF;
    LOOP
        SELECT * INTO recorded FROM plpgsql_pay.ledger WHERE bizno = p_bizno;
        IF NOT FOUND THEN
            INSERT INTO plpgsql_pay.ledger (bizno, status, amount, currency)
            VALUES (p_bizno, 'PROCESSING', p_amount, p_currency) ON CONFLICT DO NOTHING;
            IF FOUND THEN
                RETURN 'PROCEED';
            END IF;
            CONTINUE;
        END IF;
        current := recorded.status;
        IF (p_amount IS NOT NULL AND p_amount IS DISTINCT FROM recorded.amount)
           OR (p_currency IS NOT NULL AND p_currency IS DISTINCT FROM recorded.currency) THEN
            IF current IN ('PROCESSING', 'SUCCESS') THEN
                RAISE EXCEPTION 'the amount of a payment in flight or paid cannot change' USING ERRCODE = '55000';
            END IF;
            UPDATE plpgsql_pay.ledger SET amount = coalesce(p_amount, amount), currency = coalesce(p_currency, currency)
            WHERE bizno = p_bizno;
        END IF;
        IF current = 'SUCCESS' THEN
            RETURN 'ALREADY_SUCCEEDED';
        ELSIF current = 'PROCESSING' THEN
            RETURN 'IN_PROGRESS';
        END IF;
        SELECT status INTO current FROM plpgsql_pay.ledger WHERE bizno = p_bizno FOR UPDATE;
        IF current = 'INIT' THEN
            UPDATE plpgsql_pay.ledger SET status = 'PROCESSING' WHERE bizno = p_bizno;
            RETURN 'PROCEED';
        ELSIF current = 'FAILED' THEN
            UPDATE plpgsql_pay.ledger SET status = 'INIT' WHERE bizno = p_bizno;
            UPDATE plpgsql_pay.ledger SET status = 'PROCESSING' WHERE bizno = p_bizno;
            RETURN 'PROCEED';
        ELSIF current = 'SUCCESS' THEN
            RETURN 'ALREADY_SUCCEEDED';
        ELSE
            RETURN 'IN_PROGRESS';
        END IF;
    END LOOP;
END
$$;

CREATE FUNCTION plpgsql_pay.pay_succeed(p_bizno text, p_channel_ref text DEFAULT NULL, p_attempt integer DEFAULT NULL)
RETURNS pay_status
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
    found_row plpgsql_pay.ledger;
BEGIN
    IF p_bizno IS NULL OR p_bizno !~ '^[A-Za-z0-9_.:-]{1,128}$' THEN
        RAISE EXCEPTION 'invalid key' USING ERRCODE = '22P02';
    END IF;
    UPDATE plpgsql_pay.ledger SET status = 'SUCCESS', channel_ref = coalesce(p_channel_ref, channel_ref)
    WHERE bizno = p_bizno AND status = 'PROCESSING' AND attempt = coalesce(p_attempt, attempt);
    IF FOUND THEN
        RETURN 'SUCCESS';
    END IF;
    SELECT * INTO found_row FROM plpgsql_pay.ledger WHERE bizno = p_bizno;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'unknown payment %', p_bizno USING ERRCODE = 'P0002';
    ELSIF p_attempt IS NOT NULL AND found_row.attempt <> p_attempt THEN
        RAISE EXCEPTION 'stale attempt' USING ERRCODE = '55000';
    ELSIF found_row.status = 'SUCCESS' THEN
        RETURN 'SUCCESS';
    END IF;
    RAISE EXCEPTION 'illegal payment status transition' USING ERRCODE = '23514';
END
$$;

-- The PL/pgSQL guard for a user table, compared with pay_guard.
CREATE FUNCTION plpgsql_pay.status_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.status <> OLD.status AND NOT plpgsql_pay.allowed(OLD.status::pay_status, NEW.status::pay_status) THEN
        RAISE EXCEPTION 'illegal payment status transition' USING ERRCODE = '23514';
    END IF;
    RETURN NEW;
END
$$;
