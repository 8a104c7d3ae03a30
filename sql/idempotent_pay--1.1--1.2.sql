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
