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

CREATE DOMAIN @extschema@.pay_amount AS numeric
    CONSTRAINT pay_amount_check CHECK (@extschema@.pay_amount_valid(VALUE));

COMMENT ON DOMAIN @extschema@.pay_amount IS
'A payment amount: finite and greater than 0';

CREATE DOMAIN @extschema@.pay_currency AS text
    CONSTRAINT pay_currency_check CHECK (@extschema@.pay_currency_valid(VALUE));

COMMENT ON DOMAIN @extschema@.pay_currency IS
'An ISO 4217 currency code: three upper-case letters';

-- The journal trigger's WHEN clause names amount and currency: it is
-- recreated around the change of their types.
DROP TRIGGER pay_ledger_journal_update ON @extschema@.pay_ledger;
ALTER TABLE @extschema@.pay_ledger
    DROP CONSTRAINT pay_ledger_amount_check,
    DROP CONSTRAINT pay_ledger_currency_check,
    ALTER COLUMN amount TYPE @extschema@.pay_amount,
    ALTER COLUMN currency TYPE @extschema@.pay_currency;
CREATE TRIGGER pay_ledger_journal_update
    AFTER UPDATE ON @extschema@.pay_ledger
    FOR EACH ROW
    WHEN (OLD.status IS DISTINCT FROM NEW.status
          OR OLD.amount IS DISTINCT FROM NEW.amount
          OR OLD.currency IS DISTINCT FROM NEW.currency)
    EXECUTE FUNCTION @extschema@.pay_ledger_journal();

-- The note of a write travels in the row written: the API sets it, a DBA's
-- UPDATE may set it, the journal trigger copies it.

ALTER TABLE @extschema@.pay_ledger ADD COLUMN note text;

COMMENT ON COLUMN @extschema@.pay_ledger.note IS
'The note of the latest write, journaled with it; NULL when that write set none (kept by the ledger)';

-- The ledger across the database's life (src/lifecycle.c, README.md)

CREATE FUNCTION @extschema@.pay_refuse_drop()
RETURNS event_trigger
AS 'MODULE_PATHNAME', 'pay_refuse_drop'
LANGUAGE C;

COMMENT ON FUNCTION @extschema@.pay_refuse_drop() IS
'Event trigger refusing DROP EXTENSION idempotent_pay (and DROP SCHEMA ... CASCADE of its schema) while pay_ledger holds a payment';

CREATE EVENT TRIGGER pay_refuse_drop ON ddl_command_start
    WHEN TAG IN ('DROP EXTENSION', 'DROP SCHEMA')
    EXECUTE FUNCTION @extschema@.pay_refuse_drop();
ALTER EVENT TRIGGER pay_refuse_drop ENABLE ALWAYS;

-- ALTER TABLE ... ENABLE TRIGGER [ALL] (pg_restore --disable-triggers ends
-- with it) would leave a guard firing on origin sessions only: put it back
-- to ALWAYS, as pay_protect and the install script made it.
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
        WHERE t.tgfoid OPERATOR(pg_catalog.=) '@extschema@.pay_guard()'::pg_catalog.regprocedure
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
