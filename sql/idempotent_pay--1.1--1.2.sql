/* idempotent_pay 1.1 -> 1.2: one amount rule, notes that travel with the write */

\echo Use "ALTER EXTENSION idempotent_pay UPDATE TO '1.2'" to load this file. \quit

-- One rule for amounts and currencies (src/amount.c), for the API and the
-- ledger alike.  The ledger's old CHECKs let NaN and Infinity through.

CREATE FUNCTION @extschema@.pay_amount_valid(amount numeric)
RETURNS boolean
AS 'MODULE_PATHNAME', 'pay_amount_valid'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION @extschema@.pay_amount_valid(numeric) IS
'Whether a number is a payment amount: finite and greater than 0 (not NaN, not Infinity)';

CREATE FUNCTION @extschema@.pay_currency_valid(currency text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'pay_currency_valid'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION @extschema@.pay_currency_valid(text) IS
'Whether a text is an ISO 4217 currency code: three upper-case letters';

-- The domains get their CHECKs after the columns have their types: a
-- change to a domain without constraints rewrites nothing.
CREATE DOMAIN @extschema@.pay_amount AS numeric;

COMMENT ON DOMAIN @extschema@.pay_amount IS
'A payment amount: finite and greater than 0';

CREATE DOMAIN @extschema@.pay_currency AS text;

COMMENT ON DOMAIN @extschema@.pay_currency IS
'An ISO 4217 currency code: three upper-case letters';

-- The journal trigger's WHEN clause named amount and currency; the trigger
-- itself now skips an UPDATE that changes none of status, amount and
-- currency (a WHEN clause is read and compiled again for every statement).
DROP TRIGGER pay_ledger_journal_update ON @extschema@.pay_ledger;
ALTER TABLE @extschema@.pay_ledger
    DROP CONSTRAINT pay_ledger_amount_check,
    DROP CONSTRAINT pay_ledger_currency_check,
    ALTER COLUMN amount TYPE @extschema@.pay_amount,
    ALTER COLUMN currency TYPE @extschema@.pay_currency;
CREATE TRIGGER pay_ledger_journal_update
    AFTER UPDATE ON @extschema@.pay_ledger
    FOR EACH ROW EXECUTE FUNCTION @extschema@.pay_ledger_journal();

-- New writes are held to the rule at once; rows written under 1.0 or 1.1,
-- whose CHECK let NaN and Infinity in, are validated when there are none
-- and reported otherwise (the constraint stays NOT VALID until a DBA fixes
-- them and runs ALTER DOMAIN ... VALIDATE CONSTRAINT).
ALTER DOMAIN @extschema@.pay_amount
    ADD CONSTRAINT pay_amount_check CHECK (@extschema@.pay_amount_valid(VALUE)) NOT VALID;
ALTER DOMAIN @extschema@.pay_currency
    ADD CONSTRAINT pay_currency_check CHECK (@extschema@.pay_currency_valid(VALUE)) NOT VALID;
DO $$
DECLARE
    invalid bigint;
BEGIN
    SELECT pg_catalog.count(*) INTO invalid FROM @extschema@.pay_ledger AS l
    WHERE NOT @extschema@.pay_amount_valid(l.amount) OR NOT @extschema@.pay_currency_valid(l.currency);
    IF invalid OPERATOR(pg_catalog.=) 0 THEN
        ALTER DOMAIN @extschema@.pay_amount VALIDATE CONSTRAINT pay_amount_check;
        ALTER DOMAIN @extschema@.pay_currency VALIDATE CONSTRAINT pay_currency_check;
    ELSE
        RAISE WARNING '% payments in pay_ledger have an amount or currency idempotent_pay 1.2 refuses', invalid
            USING DETAIL = 'NaN or Infinity amounts, or malformed currencies, which 1.0 and 1.1 let in.',
                  HINT = 'SELECT * FROM pay_ledger WHERE NOT pay_amount_valid(amount) OR NOT pay_currency_valid(currency); '
                         'set them right, then ALTER DOMAIN pay_amount VALIDATE CONSTRAINT pay_amount_check '
                         '(and the same for pay_currency).';
    END IF;
END
$$;

-- One business action, one bizNo: only generated bizNos have a (prefix,
-- biz_id), so keys of other systems (both NULL) need no entry in the index.
ALTER TABLE @extschema@.pay_ledger DROP CONSTRAINT pay_ledger_prefix_biz_id_key;
CREATE UNIQUE INDEX pay_ledger_prefix_biz_id_key ON @extschema@.pay_ledger (prefix, biz_id)
    WHERE biz_id IS NOT NULL;


-- The note of a write travels in the row written: the API sets it, a DBA's
-- UPDATE may set it, the journal trigger copies it.

ALTER TABLE @extschema@.pay_ledger ADD COLUMN note text;

COMMENT ON COLUMN @extschema@.pay_ledger.note IS
'The note of the latest write, journaled with it; NULL when that write set none (kept by the ledger)';

-- Refunds: a refund is a ledger row with a parent, the
-- payment it pays back, and a refund key naming it among that payment's
-- refunds.  The ledger's trigger holds every write to the rules of refunds
-- (src/refund.c); pay_refund_open (below) opens them.

ALTER TABLE @extschema@.pay_ledger ADD COLUMN parent text, ADD COLUMN refund_key text;

COMMENT ON COLUMN @extschema@.pay_ledger.parent IS
'A refund''s payment, the bizNo of the SUCCESS payment it pays back; NULL for a payment; never changes';
COMMENT ON COLUMN @extschema@.pay_ledger.refund_key IS
'A refund''s key among the refunds of its payment (pay_refund_open''s refund_key); never changes';

-- One refund per refund key of a payment, and the index a payment's
-- refunds are added up by; payments (parent NULL) need no entry.
CREATE UNIQUE INDEX pay_ledger_parent_refund_key_key ON @extschema@.pay_ledger (parent, refund_key)
    WHERE parent IS NOT NULL;

-- What the bank captured for a payment -- every journaled entry into or
-- within SUCCESS: its success, and each second charge the bank reported
-- under another reference -- and what its refunds took of it.  The one
-- place the refund limit is counted: the ledger's trigger, pay_verify and
-- an operator read it here.
CREATE FUNCTION @extschema@.pay_refund_balance(bizno text, OUT captured numeric, OUT refunded numeric,
                                               OUT in_flight numeric, OUT refundable numeric)
RETURNS record
AS $$
    SELECT c.captured, r.refunded, r.in_flight,
           c.captured OPERATOR(pg_catalog.-) r.refunded OPERATOR(pg_catalog.-) r.in_flight
    FROM (SELECT COALESCE(pg_catalog.sum(j.amount), 0) AS captured
          FROM @extschema@.pay_journal AS j
          WHERE j.bizno OPERATOR(pg_catalog.=) $1
            AND j.to_status OPERATOR(pg_catalog.=) 'SUCCESS'::@extschema@.pay_status) AS c,
         (SELECT COALESCE(pg_catalog.sum(l.amount) FILTER (
                     WHERE l.status OPERATOR(pg_catalog.=) 'SUCCESS'::@extschema@.pay_status), 0) AS refunded,
                 COALESCE(pg_catalog.sum(l.amount) FILTER (
                     WHERE l.status OPERATOR(pg_catalog.=) 'PROCESSING'::@extschema@.pay_status), 0) AS in_flight
          FROM @extschema@.pay_ledger AS l
          WHERE l.parent OPERATOR(pg_catalog.=) $1) AS r
$$
LANGUAGE sql STABLE SET search_path = @extschema@, pg_temp;

COMMENT ON FUNCTION @extschema@.pay_refund_balance(text) IS
'What the bank captured for a payment (its success and every journaled second charge), what its refunds returned (SUCCESS) and hold (PROCESSING), and what may still be refunded';

REVOKE ALL ON FUNCTION @extschema@.pay_refund_balance(text) FROM PUBLIC;

-- pay_verify also finds a payment whose ledger row is gone although its
-- journal ends in PROCESSING or SUCCESS, which no guarded DELETE allows,
-- and refunds that break the rules of refunds (possible only with the
-- ledger's triggers off, as a replica's apply or a restore has them).
CREATE OR REPLACE FUNCTION @extschema@.pay_verify()
RETURNS TABLE (bizno text, problem text)
AS $$
    WITH entries AS (
        SELECT j.bizno, j.seq, j.from_status, j.to_status,
               pg_catalog.lag(j.to_status) OVER w AS previous_status,
               pg_catalog.count(*) FILTER (WHERE j.from_status IS NULL) OVER w AS life
        FROM @extschema@.pay_journal AS j
        WINDOW w AS (PARTITION BY j.bizno ORDER BY j.seq)
    ), latest_life AS (
        SELECT DISTINCT ON (e.bizno) e.bizno, e.life, e.to_status
        FROM entries AS e
        ORDER BY e.bizno, e.seq DESC
    ), summary AS (
        SELECT ll.bizno, ll.to_status AS last_status,
               pg_catalog.count(*) FILTER (
                   WHERE e.to_status OPERATOR(pg_catalog.=) 'PROCESSING'::@extschema@.pay_status
                     AND e.from_status IS DISTINCT FROM e.to_status) AS entries_into_processing
        FROM latest_life AS ll
        JOIN entries AS e ON e.bizno OPERATOR(pg_catalog.=) ll.bizno
                         AND e.life OPERATOR(pg_catalog.=) ll.life
        GROUP BY ll.bizno, ll.to_status
    )
    SELECT l.bizno, 'the journal has no entry for this payment'
    FROM @extschema@.pay_ledger AS l
    LEFT JOIN summary AS s ON s.bizno OPERATOR(pg_catalog.=) l.bizno
    WHERE s.bizno IS NULL
    UNION ALL
    SELECT l.bizno, pg_catalog.format('the ledger says %s, the latest journal entry says %s',
                                      l.status, s.last_status)
    FROM @extschema@.pay_ledger AS l
    JOIN summary AS s ON s.bizno OPERATOR(pg_catalog.=) l.bizno
    WHERE l.status OPERATOR(pg_catalog.<>) s.last_status
    UNION ALL
    SELECT l.bizno, pg_catalog.format('attempt is %s, the journal shows %s entries into PROCESSING',
                                      l.attempt, s.entries_into_processing)
    FROM @extschema@.pay_ledger AS l
    JOIN summary AS s ON s.bizno OPERATOR(pg_catalog.=) l.bizno
    WHERE l.attempt OPERATOR(pg_catalog.<>) s.entries_into_processing
    UNION ALL
    SELECT e.bizno, pg_catalog.format('journal entry %s goes from %s, but the entry before it ended in %s',
                                      e.seq, e.from_status, e.previous_status)
    FROM entries AS e
    WHERE e.from_status IS NOT NULL
      AND e.from_status IS DISTINCT FROM e.previous_status
    UNION ALL
    SELECT ll.bizno, pg_catalog.format('the journal says %s, but the ledger has no such payment',
                                       ll.to_status)
    FROM latest_life AS ll
    LEFT JOIN @extschema@.pay_ledger AS l ON l.bizno OPERATOR(pg_catalog.=) ll.bizno
    WHERE l.bizno IS NULL
      AND ll.to_status OPERATOR(pg_catalog.=) ANY
          (ARRAY['PROCESSING', 'SUCCESS']::@extschema@.pay_status[])
    UNION ALL
    SELECT r.bizno,
           CASE WHEN p.bizno IS NULL THEN
                    pg_catalog.format('a refund of %s, which the ledger does not have', r.parent)
                WHEN p.parent IS NOT NULL THEN
                    pg_catalog.format('a refund of %s, which is itself a refund', r.parent)
                WHEN p.status OPERATOR(pg_catalog.<>) 'SUCCESS' THEN
                    pg_catalog.format('a refund of %s, which is %s', r.parent, p.status)
                ELSE pg_catalog.format('a refund in %s of %s, which is in %s', r.currency, r.parent, p.currency)
           END
    FROM @extschema@.pay_ledger AS r
    LEFT JOIN @extschema@.pay_ledger AS p ON p.bizno OPERATOR(pg_catalog.=) r.parent
    WHERE r.parent IS NOT NULL
      AND (p.bizno IS NULL OR p.parent IS NOT NULL
           OR p.status OPERATOR(pg_catalog.<>) 'SUCCESS'
           OR r.currency IS DISTINCT FROM p.currency)
    UNION ALL
    SELECT refunded.parent,
           pg_catalog.format('its refunds return or hold %s, more than the %s captured',
                             b.refunded OPERATOR(pg_catalog.+) b.in_flight, b.captured)
    FROM (SELECT DISTINCT l.parent FROM @extschema@.pay_ledger AS l WHERE l.parent IS NOT NULL) AS refunded,
         @extschema@.pay_refund_balance(refunded.parent) AS b
    WHERE b.refundable OPERATOR(pg_catalog.<) 0
$$
LANGUAGE sql STABLE SET search_path = @extschema@, pg_temp;

COMMENT ON FUNCTION @extschema@.pay_verify() IS
'Every violation of the ledger/journal invariants, including a PROCESSING or SUCCESS payment missing from the ledger and refunds beyond their payment''s capture; no rows when all hold';

-- The ledger across the database's life (src/lifecycle.c, README.md)

CREATE FUNCTION @extschema@.pay_refuse_drop()
RETURNS event_trigger
AS 'MODULE_PATHNAME', 'pay_refuse_drop'
LANGUAGE C;

COMMENT ON FUNCTION @extschema@.pay_refuse_drop() IS
'Event trigger refusing DROP EXTENSION idempotent_pay (and DROP SCHEMA ... CASCADE of its schema, DROP OWNED BY its owner) while pay_ledger holds a payment';

CREATE EVENT TRIGGER pay_refuse_drop ON ddl_command_start
    WHEN TAG IN ('DROP EXTENSION', 'DROP SCHEMA', 'DROP OWNED')
    EXECUTE FUNCTION @extschema@.pay_refuse_drop();
ALTER EVENT TRIGGER pay_refuse_drop ENABLE ALWAYS;

-- ALTER TABLE ... ENABLE TRIGGER [ALL] (pg_restore --disable-triggers ends
-- with it) would leave a guard firing on origin sessions only: put it back
-- to ALWAYS, as pay_protect and the install script made it.  It fires on
-- every ALTER TABLE in the database, by any role: it reads the catalogs
-- only (no privilege on the extension's schema needed) and names nothing
-- by its schema.
CREATE FUNCTION @extschema@.pay_keep_guards_always()
RETURNS event_trigger
AS $$
DECLARE
    guard record;
BEGIN
    FOR guard IN
        SELECT t.tgrelid::pg_catalog.regclass AS tbl, t.tgname
        FROM pg_catalog.pg_trigger AS t
        JOIN pg_catalog.pg_event_trigger_ddl_commands() AS c
          ON c.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
         AND c.objid OPERATOR(pg_catalog.=) t.tgrelid
        JOIN pg_catalog.pg_proc AS p ON p.oid OPERATOR(pg_catalog.=) t.tgfoid
        JOIN pg_catalog.pg_extension AS e ON e.extnamespace OPERATOR(pg_catalog.=) p.pronamespace
        WHERE e.extname OPERATOR(pg_catalog.=) 'idempotent_pay'
          AND p.proname OPERATOR(pg_catalog.=) 'pay_guard'
          AND t.tgenabled OPERATOR(pg_catalog.=) 'O'
    LOOP
        EXECUTE pg_catalog.format('ALTER TABLE %s ENABLE ALWAYS TRIGGER %I', guard.tbl, guard.tgname);
    END LOOP;
END
$$
LANGUAGE plpgsql SET search_path = @extschema@, pg_temp;

COMMENT ON FUNCTION @extschema@.pay_keep_guards_always() IS
'Event trigger putting a re-enabled pay_guard back to ENABLE ALWAYS';

CREATE EVENT TRIGGER pay_keep_guards_always ON ddl_command_end
    WHEN TAG IN ('ALTER TABLE')
    EXECUTE FUNCTION @extschema@.pay_keep_guards_always();
ALTER EVENT TRIGGER pay_keep_guards_always ENABLE ALWAYS;

REVOKE ALL ON FUNCTION @extschema@.pay_refuse_drop(), @extschema@.pay_keep_guards_always() FROM PUBLIC;

-- pay_get and pay_succeed change their signatures, so they are made anew
-- below; the roles that could call them (a grant of the DBA's, or of
-- pay_grant) are noted here and granted the new functions at the end.
CREATE TEMPORARY TABLE pay_api_grantees ON COMMIT DROP AS
    SELECT p.proname AS function, a.grantee::pg_catalog.regrole AS grantee
    FROM pg_catalog.pg_proc AS p, pg_catalog.aclexplode(p.proacl) AS a
    WHERE p.oid OPERATOR(pg_catalog.=) ANY (ARRAY['@extschema@.pay_get(text)',
                                                  '@extschema@.pay_succeed(text, text, integer)']::pg_catalog.regprocedure[])
      AND a.privilege_type OPERATOR(pg_catalog.=) 'EXECUTE'
      AND a.grantee OPERATOR(pg_catalog.<>) p.proowner
      AND a.grantee OPERATOR(pg_catalog.<>) 0;

-- pay_get: no row for an unknown bizNo (not a row of NULLs), and columns as
-- columns with SELECT * FROM pay_get(...).
DROP FUNCTION @extschema@.pay_get(text);
CREATE FUNCTION @extschema@.pay_get(bizno text)
RETURNS SETOF @extschema@.pay_ledger
AS $$
    SELECT l FROM @extschema@.pay_ledger AS l WHERE l.bizno OPERATOR(pg_catalog.=) $1
$$
LANGUAGE sql STABLE SECURITY DEFINER ROWS 1 SET search_path = @extschema@, pg_temp;

COMMENT ON FUNCTION @extschema@.pay_get(text) IS
'The ledger row of a bizNo; no row when unknown';

REVOKE ALL ON FUNCTION @extschema@.pay_get(text) FROM PUBLIC;

-- What a role may call, in one place per kind of role, covering every
-- function of this version: pay_grant for applications (pay), and
-- pay_grant_operator for finance and operations (reconcile, watch, verify).
CREATE OR REPLACE FUNCTION @extschema@.pay_grant(role regrole)
RETURNS void
AS $$
BEGIN
    IF role IS NULL THEN
        RAISE EXCEPTION 'role must not be null' USING ERRCODE = '22004';
    END IF;
    EXECUTE pg_catalog.format('GRANT USAGE ON SCHEMA @extschema@ TO %s', role);
    EXECUTE pg_catalog.format('GRANT SELECT ON @extschema@.pay_ledger, @extschema@.pay_journal TO %s', role);
    EXECUTE pg_catalog.format(
        'GRANT EXECUTE ON FUNCTION '
        '@extschema@.pay_open(text, text, numeric, text), '
        '@extschema@.pay_begin(text, numeric, text), '
        '@extschema@.pay_succeed(text, text, integer, jsonb), '
        '@extschema@.pay_claim(text, numeric, text), '
        '@extschema@.pay_open_claim(text, text, numeric, text), '
        '@extschema@.pay_fail(text, text, integer), '
        '@extschema@.pay_reset(text, text), '
        '@extschema@.pay_transition(text, @extschema@.pay_status, text), '
        '@extschema@.pay_get(text), '
        '@extschema@.pay_stuck(interval, integer), '
        '@extschema@.pay_refund_open(text, text, numeric, text), '
        '@extschema@.pay_refund_balance(text) '
        'TO %s', role);
END
$$
LANGUAGE plpgsql VOLATILE SET search_path = @extschema@, pg_temp;

CREATE FUNCTION @extschema@.pay_grant_operator(role regrole)
RETURNS void
AS $$
BEGIN
    IF role IS NULL THEN
        RAISE EXCEPTION 'role must not be null' USING ERRCODE = '22004';
    END IF;
    EXECUTE pg_catalog.format('GRANT USAGE ON SCHEMA @extschema@ TO %s', role);
    EXECUTE pg_catalog.format(
        'GRANT SELECT ON @extschema@.pay_ledger, @extschema@.pay_journal, @extschema@.pay_stats TO %s', role);
    EXECUTE pg_catalog.format(
        'GRANT EXECUTE ON FUNCTION '
        '@extschema@.pay_reconcile(regclass, boolean, timestamptz), '
        '@extschema@.pay_reconcile_rows(jsonb, boolean, timestamptz), '
        '@extschema@.pay_succeed(text, text, integer, jsonb), '
        '@extschema@.pay_fail(text, text, integer), '
        '@extschema@.pay_stats_reset(), '
        '@extschema@.pay_verify(), '
        '@extschema@.pay_get(text), '
        '@extschema@.pay_stuck(interval, integer), '
        '@extschema@.pay_refund_open(text, text, numeric, text), '
        '@extschema@.pay_refund_balance(text) '
        'TO %s', role);
END
$$
LANGUAGE plpgsql VOLATILE SET search_path = @extschema@, pg_temp;

COMMENT ON FUNCTION @extschema@.pay_grant_operator(regrole) IS
'Give a finance or operations role what reconciling, refunding and watching need: pay_reconcile (which settles through pay_succeed and pay_fail), pay_refund_open, pay_refund_balance, pay_stats, pay_stats_reset, pay_verify, pay_get, pay_stuck, SELECT on ledger and journal';

REVOKE ALL ON FUNCTION @extschema@.pay_grant_operator(regrole) FROM PUBLIC;

-- The claim in one round trip: pay_begin's decision with
-- the attempt to charge under, and a success's reference and first answer.

ALTER TABLE @extschema@.pay_ledger ADD COLUMN response jsonb;

COMMENT ON COLUMN @extschema@.pay_ledger.response IS
'The first answer given with pay_succeed, replayed by every later claim; never changes once SUCCESS';

CREATE TYPE @extschema@.pay_claim AS (
    action      @extschema@.pay_action,
    attempt     integer,
    status      @extschema@.pay_status,
    channel_ref text,
    response    jsonb
);

COMMENT ON TYPE @extschema@.pay_claim IS
'What pay_claim answers: the decision, the attempt to charge under or in flight, the status, and a success''s reference and response';

CREATE FUNCTION @extschema@.pay_claim(bizno text, amount numeric DEFAULT NULL, currency text DEFAULT NULL)
RETURNS @extschema@.pay_claim
AS 'MODULE_PATHNAME', 'pay_claim'
LANGUAGE C VOLATILE SECURITY DEFINER;

COMMENT ON FUNCTION @extschema@.pay_claim(text, numeric, text) IS
'pay_begin''s decision and, in the same round trip, the attempt (the fencing token), status, channel_ref and stored response';

CREATE FUNCTION @extschema@.pay_open_claim(prefix text, biz_id text, amount numeric, currency text DEFAULT NULL,
    OUT bizno text, OUT action @extschema@.pay_action, OUT attempt integer, OUT status @extschema@.pay_status,
    OUT channel_ref text, OUT response jsonb)
RETURNS record
AS 'MODULE_PATHNAME', 'pay_open_claim'
LANGUAGE C VOLATILE SECURITY DEFINER SET search_path = @extschema@, pg_temp;

COMMENT ON FUNCTION @extschema@.pay_open_claim(text, text, numeric, text) IS
'pay_open and pay_claim in one call: the bizNo of the business action and the claim on it';

-- pay_succeed takes the response to store.
DROP FUNCTION @extschema@.pay_succeed(text, text, integer);
CREATE FUNCTION @extschema@.pay_succeed(bizno text, channel_ref text DEFAULT NULL, attempt integer DEFAULT NULL,
                                        response jsonb DEFAULT NULL)
RETURNS @extschema@.pay_status
AS 'MODULE_PATHNAME', 'pay_succeed'
LANGUAGE C VOLATILE SECURITY DEFINER;

COMMENT ON FUNCTION @extschema@.pay_succeed(text, text, integer, jsonb) IS
'PROCESSING -> SUCCESS, storing the response every later claim replays; a no-op on SUCCESS; attempt, when given, must be the current one';

-- Refunds are opened here and then driven as any payment: pay_claim,
-- pay_succeed, pay_fail, pay_stuck, pay_reconcile.
CREATE FUNCTION @extschema@.pay_refund_open(bizno text, refund_key text, amount numeric, reason text DEFAULT NULL)
RETURNS text
AS 'MODULE_PATHNAME', 'pay_refund_open'
LANGUAGE C VOLATILE SECURITY DEFINER SET search_path = @extschema@, pg_temp;

COMMENT ON FUNCTION @extschema@.pay_refund_open(text, text, numeric, text) IS
'The bizNo of refund refund_key of SUCCESS payment bizno: found again, or recorded as INIT in the payment''s currency; claim and settle it as any payment';

REVOKE ALL ON FUNCTION @extschema@.pay_succeed(text, text, integer, jsonb),
    @extschema@.pay_claim(text, numeric, text),
    @extschema@.pay_open_claim(text, text, numeric, text),
    @extschema@.pay_refund_open(text, text, numeric, text) FROM PUBLIC;
-- The roles noted above: pay_get's keep it; pay_succeed's, the paying
-- roles, get the new pay_succeed, the claims and refunds.
DO $$
DECLARE
    noted record;
BEGIN
    FOR noted IN SELECT g.function, g.grantee FROM pg_temp.pay_api_grantees AS g LOOP
        EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO %s',
            CASE noted.function
                WHEN 'pay_get' THEN '@extschema@.pay_get(text)'
                ELSE '@extschema@.pay_succeed(text, text, integer, jsonb), '
                     '@extschema@.pay_claim(text, numeric, text), '
                     '@extschema@.pay_open_claim(text, text, numeric, text), '
                     '@extschema@.pay_refund_open(text, text, numeric, text), '
                     '@extschema@.pay_refund_balance(text)'
            END, noted.grantee);
    END LOOP;
END
$$;
DROP TABLE pg_temp.pay_api_grantees;

-- A new payment needs an amount: 1.2's pay_begin binds the entry point that
-- refuses one without (22004); the SQL of 1.0 and 1.1 keeps the old one.
CREATE OR REPLACE FUNCTION @extschema@.pay_begin(bizno text, amount numeric DEFAULT NULL, currency text DEFAULT NULL)
RETURNS @extschema@.pay_action
AS 'MODULE_PATHNAME', 'pay_begin_1_2'
LANGUAGE C VOLATILE SECURITY DEFINER;

-- The hot path needs no SET clause: the C code writes a new payment and
-- settles it through the access methods, running no SQL and resolving no
-- name, and pins search_path itself for every statement it runs otherwise
-- (src/ledger.c, PinSearchPath).  The other functions keep theirs.
ALTER FUNCTION @extschema@.pay_fail(text, text, integer) RESET search_path;

-- pay_stats counts refunds too: every status's refunds in a column of
-- their own (payments counts both).
CREATE OR REPLACE VIEW @extschema@.pay_stats AS
    WITH counters AS (SELECT * FROM @extschema@.pay_stats_counters())
    SELECT s.status,
           pg_catalog.count(l.bizno) AS payments,
           pg_catalog.min(l.updated_at) AS oldest_updated_at,
           CASE WHEN s.status OPERATOR(pg_catalog.=) 'PROCESSING' THEN
               pg_catalog.count(l.bizno) FILTER (
                   WHERE l.processing_since OPERATOR(pg_catalog.<)
                         (pg_catalog.now() OPERATOR(pg_catalog.-) (SELECT c.stuck_after FROM counters AS c)))
           END AS stuck,
           CASE s.status
               WHEN 'INIT' THEN (SELECT pg_catalog.count(*) FROM @extschema@.pay_journal AS j
                                 WHERE j.from_status OPERATOR(pg_catalog.=) 'FAILED'
                                   AND j.to_status OPERATOR(pg_catalog.=) 'INIT'
                                   AND j.at OPERATOR(pg_catalog.>=)
                                       COALESCE((SELECT c.stats_reset FROM counters AS c), '-infinity'))
           END AS resets,
           CASE s.status
               WHEN 'SUCCESS' THEN (SELECT c.already_succeeded FROM counters AS c)
               WHEN 'PROCESSING' THEN (SELECT c.in_progress FROM counters AS c)
           END AS duplicate_answers,
           (SELECT c.stats_reset FROM counters AS c) AS stats_reset,
           pg_catalog.count(l.bizno) FILTER (WHERE l.parent IS NOT NULL) AS refunds
    FROM pg_catalog.unnest(pg_catalog.enum_range(NULL::@extschema@.pay_status)) AS s(status)
    LEFT JOIN @extschema@.pay_ledger AS l ON l.status OPERATOR(pg_catalog.=) s.status
    GROUP BY s.status
    ORDER BY s.status;

-- pay_reconcile knows refunds: a statement row may name a refund's bizNo
-- (detail says whose), and with settle => true a DUPLICATE_CHARGE's
-- second charges are journaled, so its refunds can return what the bank
-- really captured.
CREATE OR REPLACE FUNCTION @extschema@.pay_reconcile(statement regclass, settle boolean DEFAULT false,
                                          since timestamptz DEFAULT NULL)
RETURNS TABLE (kind text, bizno text, ledger_status @extschema@.pay_status, ledger_amount numeric,
               bank_amount numeric, bank_rows integer, detail text)
AS $$
DECLARE
    found record;
    previous_note text;
    reference text;
    refund_status @extschema@.pay_status;
    second_charges text[];
    unrefunded boolean;
BEGIN
    IF statement IS NULL OR settle IS NULL THEN
        RAISE EXCEPTION 'statement and settle must not be null' USING ERRCODE = '22004';
    END IF;

    FOR found IN EXECUTE pg_catalog.format($query$
        WITH bank AS MATERIALIZED (
            SELECT s.bizno::pg_catalog.text AS bizno,
                   pg_catalog.count(*)::integer AS bank_rows,
                   pg_catalog.count(*) FILTER (WHERE s.status OPERATOR(pg_catalog.=) 'SUCCESS') AS successes,
                   pg_catalog.count(*) FILTER (WHERE s.status OPERATOR(pg_catalog.=) 'FAILED') AS failures,
                   pg_catalog.sum(s.amount) FILTER (WHERE s.status OPERATOR(pg_catalog.=) 'SUCCESS') AS charged,
                   pg_catalog.min(s.amount) FILTER (WHERE s.status OPERATOR(pg_catalog.=) 'SUCCESS') AS least_amount,
                   pg_catalog.max(s.amount) FILTER (WHERE s.status OPERATOR(pg_catalog.=) 'SUCCESS') AS greatest_amount,
                   pg_catalog.min(s.currency) FILTER (WHERE s.status OPERATOR(pg_catalog.=) 'SUCCESS') AS least_currency,
                   pg_catalog.max(s.currency) FILTER (WHERE s.status OPERATOR(pg_catalog.=) 'SUCCESS') AS greatest_currency,
                   pg_catalog.min(s.channel_ref) FILTER (WHERE s.status OPERATOR(pg_catalog.=) 'SUCCESS') AS channel_ref,
                   pg_catalog.array_agg(DISTINCT s.channel_ref::pg_catalog.text) FILTER (
                       WHERE s.status OPERATOR(pg_catalog.=) 'SUCCESS' AND s.channel_ref IS NOT NULL) AS channel_refs
            FROM %s AS s
            GROUP BY s.bizno
        ), joined AS MATERIALIZED (
            SELECT COALESCE(l.bizno, b.bizno) AS bizno, l.status, l.amount, l.currency, l.updated_at,
                   COALESCE(b.bank_rows, 0) AS bank_rows, COALESCE(b.successes, 0) AS successes,
                   COALESCE(b.failures, 0) AS failures, b.charged, b.least_amount, b.greatest_amount,
                   b.least_currency, b.greatest_currency, b.channel_ref, b.channel_refs,
                   l.channel_ref AS ledger_channel_ref, l.parent
            FROM @extschema@.pay_ledger AS l
            FULL JOIN bank AS b ON b.bizno OPERATOR(pg_catalog.=) l.bizno
        )
        SELECT 'MISSING_IN_BANK' AS kind, j.*, 'the ledger says SUCCESS, the bank has no successful charge' AS detail
        FROM joined AS j
        WHERE j.status OPERATOR(pg_catalog.=) 'SUCCESS' AND j.successes OPERATOR(pg_catalog.=) 0
          AND ($1 IS NULL OR j.updated_at OPERATOR(pg_catalog.>=) $1)
        UNION ALL
        SELECT 'MISSING_IN_LEDGER', j.*,
               CASE WHEN j.status IS NULL THEN 'the bank charged, the ledger has no such payment'
                    ELSE 'the bank charged, the ledger says ' OPERATOR(pg_catalog.||) j.status END
        FROM joined AS j
        WHERE j.successes OPERATOR(pg_catalog.>) 0
          AND (j.status IS NULL OR j.status OPERATOR(pg_catalog.=) 'INIT')
        UNION ALL
        SELECT 'DUPLICATE_CHARGE', j.*, pg_catalog.format('the bank charged %%s times', j.successes)
        FROM joined AS j
        WHERE j.successes OPERATOR(pg_catalog.>) 1
        UNION ALL
        SELECT 'AMOUNT_MISMATCH', j.*,
               pg_catalog.format('the ledger says %%s, the bank charged %%s', j.amount, j.least_amount)
        FROM joined AS j
        WHERE j.status OPERATOR(pg_catalog.=) 'SUCCESS' AND j.successes OPERATOR(pg_catalog.>) 0
          AND (j.least_amount OPERATOR(pg_catalog.<>) j.amount OR j.greatest_amount OPERATOR(pg_catalog.<>) j.amount)
        UNION ALL
        SELECT 'CURRENCY_MISMATCH', j.*,
               pg_catalog.format('the ledger says %%s, the bank charged in %%s', j.currency, j.least_currency)
        FROM joined AS j
        WHERE j.status OPERATOR(pg_catalog.=) 'SUCCESS' AND j.successes OPERATOR(pg_catalog.>) 0
          AND j.currency IS NOT NULL
          AND (j.least_currency OPERATOR(pg_catalog.<>) j.currency OR j.greatest_currency OPERATOR(pg_catalog.<>) j.currency)
        UNION ALL
        SELECT 'STATUS_MISMATCH', j.*, 'the ledger says FAILED, the bank charged'
        FROM joined AS j
        WHERE j.status OPERATOR(pg_catalog.=) 'FAILED' AND j.successes OPERATOR(pg_catalog.>) 0
        UNION ALL
        SELECT 'UNRESOLVED_PROCESSING', j.*,
               CASE WHEN j.successes OPERATOR(pg_catalog.>) 0 THEN 'the bank reports SUCCESS'
                    ELSE 'the bank reports FAILED' END
        FROM joined AS j
        WHERE j.status OPERATOR(pg_catalog.=) 'PROCESSING'
          AND (j.successes OPERATOR(pg_catalog.>) 0 OR j.failures OPERATOR(pg_catalog.>) 0)
        ORDER BY 1, 2
    $query$, statement) USING since
    LOOP
        kind := found.kind;
        bizno := found.bizno;
        ledger_status := found.status;
        ledger_amount := found.amount;
        bank_amount := found.charged;
        bank_rows := found.bank_rows;
        detail := found.detail;

        IF settle AND found.kind OPERATOR(pg_catalog.=) 'UNRESOLVED_PROCESSING' THEN
            -- NULL until the library is loaded (by the first settling below)
            previous_note := pg_catalog.current_setting('idempotent_pay.journal_note', true);
            PERFORM pg_catalog.set_config('idempotent_pay.journal_note', 'settled by reconciliation', true);
            BEGIN
                IF found.successes OPERATOR(pg_catalog.>) 0 THEN
                    ledger_status := @extschema@.pay_succeed(found.bizno, found.channel_ref);
                ELSE
                    ledger_status := @extschema@.pay_fail(found.bizno,
                        'settled by reconciliation: the bank reports FAILED');
                END IF;
                detail := detail OPERATOR(pg_catalog.||) ': settled as ' OPERATOR(pg_catalog.||) ledger_status;
            EXCEPTION WHEN OTHERS THEN
                detail := detail OPERATOR(pg_catalog.||) ': not settled, ' OPERATOR(pg_catalog.||) SQLERRM;
            END;
            PERFORM pg_catalog.set_config('idempotent_pay.journal_note', previous_note, true);
        END IF;

        -- A duplicate charge: each charge under another reference than the
        -- ledger's is listed with its refund; settling journals it once as
        -- a second charge, which the refund limit counts as captured.  The
        -- refund is keyed by that reference.
        IF found.kind OPERATOR(pg_catalog.=) 'DUPLICATE_CHARGE'
           AND found.status OPERATOR(pg_catalog.=) 'SUCCESS' THEN
            IF found.ledger_channel_ref IS NULL THEN
                detail := detail OPERATOR(pg_catalog.||)
                    ': the ledger has no channel_ref to tell the first charge from the others';
            ELSE
                second_charges := '{}';
                unrefunded := false;
                BEGIN
                    FOREACH reference IN ARRAY found.channel_refs LOOP
                        CONTINUE WHEN reference OPERATOR(pg_catalog.=) found.ledger_channel_ref;
                        IF settle THEN
                            PERFORM @extschema@.pay_succeed(found.bizno, reference);
                        END IF;
                        refund_status := (SELECT r.status FROM @extschema@.pay_ledger AS r
                                          WHERE r.parent OPERATOR(pg_catalog.=) found.bizno
                                            AND r.refund_key OPERATOR(pg_catalog.=) reference);
                        unrefunded := unrefunded OR refund_status IS DISTINCT FROM 'SUCCESS';
                        second_charges := second_charges OPERATOR(pg_catalog.||) pg_catalog.format('%s (%s)',
                            reference, COALESCE('refund ' OPERATOR(pg_catalog.||) refund_status, 'not refunded'));
                    END LOOP;
                    detail := pg_catalog.format('%s: %s %s', detail,
                        CASE WHEN settle THEN 'second charges journaled:' ELSE 'second charges:' END,
                        pg_catalog.array_to_string(second_charges, ', '));
                    IF unrefunded THEN
                        detail := pg_catalog.format('%s; refund each with pay_refund_open(%L, <its reference>, %s)',
                                                    detail, found.bizno, found.amount);
                    END IF;
                EXCEPTION WHEN OTHERS THEN
                    detail := detail OPERATOR(pg_catalog.||) ': not settled, ' OPERATOR(pg_catalog.||) SQLERRM;
                END;
            END IF;
        END IF;

        IF found.parent IS NOT NULL THEN
            detail := pg_catalog.format('refund of %s: %s', found.parent, detail);
        END IF;
        RETURN NEXT;
    END LOOP;
END
$$
LANGUAGE plpgsql VOLATILE SET search_path = @extschema@, pg_temp;

COMMENT ON FUNCTION @extschema@.pay_reconcile(regclass, boolean, timestamptz) IS
'Compare the ledger with a bank statement (bizno, amount, currency, status, channel_ref), refunds included; settle => true settles PROCESSING payments and refunds the bank has answered and journals the second charges of a DUPLICATE_CHARGE';


COMMENT ON VIEW @extschema@.pay_stats IS
'Per status: payments (refunds included), oldest update; PROCESSING: stuck ones; INIT: resets; SUCCESS and PROCESSING: the duplicate answers pay_begin gave since stats_reset; refunds: how many of the payments are refunds';

-- Reconciliation of a statement given as rows, a JSON array of objects with
-- bizno, amount, currency, status, channel_ref: what idempotent_pay_proxy
-- sends each partition, its share of a statement loaded in the proxy
-- database (which no partition can read).  The checks are pay_reconcile's,
-- on a temporary table holding the rows.
CREATE FUNCTION @extschema@.pay_reconcile_rows(statement jsonb, settle boolean DEFAULT false,
                                               since timestamptz DEFAULT NULL)
RETURNS TABLE (kind text, bizno text, ledger_status @extschema@.pay_status, ledger_amount numeric,
               bank_amount numeric, bank_rows integer, detail text)
AS $$
BEGIN
    IF statement IS NULL OR settle IS NULL THEN
        RAISE EXCEPTION 'statement and settle must not be null' USING ERRCODE = '22004';
    END IF;
    IF pg_catalog.jsonb_typeof(statement) OPERATOR(pg_catalog.<>) 'array' THEN
        RAISE EXCEPTION 'a statement is a JSON array of rows, not a JSON %', pg_catalog.jsonb_typeof(statement)
            USING ERRCODE = '22023',
                  HINT = 'Pass [{"bizno": ..., "amount": ..., "currency": ..., "status": ..., "channel_ref": ...}, ...].';
    END IF;
    -- a second call in one transaction finds the first one's table
    IF pg_catalog.to_regclass('pg_temp.pay_statement_rows') IS NOT NULL THEN
        DROP TABLE pg_temp.pay_statement_rows;
    END IF;
    CREATE TEMPORARY TABLE pay_statement_rows ON COMMIT DROP AS
        SELECT s.bizno, s.amount, s.currency, s.status, s.channel_ref
        FROM pg_catalog.jsonb_to_recordset(statement)
             AS s(bizno text, amount numeric, currency text, status text, channel_ref text);
    -- looked up when run: the table is new on every call
    RETURN QUERY SELECT * FROM @extschema@.pay_reconcile(
        pg_catalog.to_regclass('pg_temp.pay_statement_rows'), settle, since);
    DROP TABLE pg_temp.pay_statement_rows;
END
$$
LANGUAGE plpgsql VOLATILE SET search_path = @extschema@, pg_temp;

COMMENT ON FUNCTION @extschema@.pay_reconcile_rows(jsonb, boolean, timestamptz) IS
'pay_reconcile of a statement given as a JSON array of rows (bizno, amount, currency, status, channel_ref): what idempotent_pay_proxy sends each partition';

REVOKE ALL ON FUNCTION @extschema@.pay_reconcile_rows(jsonb, boolean, timestamptz) FROM PUBLIC;
