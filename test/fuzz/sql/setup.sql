-- The database sqlsmith fuzzes (test/run fuzz-sql): the extension, a guarded
-- user table, payments and refunds in every state, and the two roles the
-- extension's grants make, so that the random queries meet every table,
-- type, function and trigger of idempotent_pay with rows to work on.
\set ON_ERROR_STOP on
SET client_min_messages = warning;
CREATE EXTENSION idempotent_pay;

CREATE ROLE fuzz_app LOGIN;
CREATE ROLE fuzz_operator LOGIN;
SELECT pay_grant('fuzz_app');
SELECT pay_grant_operator('fuzz_operator');

-- A table the application already had, guarded by pay_protect.
CREATE TABLE orders (
    id integer PRIMARY KEY,
    status text NOT NULL DEFAULT 'INIT',
    amount numeric,
    note text
);
INSERT INTO orders
SELECT i, (ARRAY['INIT', 'PROCESSING', 'SUCCESS', 'FAILED'])[1 + i % 4], i * 1.5, 'order ' || i
FROM generate_series(1, 40) AS i;
SELECT pay_protect('orders', 'status', '{amount}');
GRANT SELECT, INSERT, UPDATE, DELETE ON orders TO fuzz_app, fuzz_operator;

-- Payments in every state, generated keys and foreign ones, with refunds.
DO $$
DECLARE
    key text;
    claimed pay_claim;
BEGIN
    FOR i IN 1 .. 40 LOOP
        key := CASE WHEN i % 2 = 0 THEN pay_open('SHOP', 'order-' || i, 10 + i, 'EUR')
                    ELSE 'PSP-' || i END;
        CONTINUE WHEN i % 5 = 0;                                    -- INIT
        claimed := pay_claim(key, 10 + i, 'EUR');
        CONTINUE WHEN i % 5 = 1;                                    -- PROCESSING
        IF i % 5 = 2 THEN
            PERFORM pay_fail(key, 'declined', claimed.attempt);      -- FAILED
        ELSE
            PERFORM pay_succeed(key, 'REF-' || i, claimed.attempt,    -- SUCCESS
                                pg_catalog.jsonb_build_object('order', i));
            IF i % 5 = 4 THEN
                key := pay_refund_open(key, 'refund-' || i, 5, 'customer asked');
                claimed := pay_claim(key);
                PERFORM pay_succeed(key, 'RREF-' || i, claimed.attempt);
            END IF;
        END IF;
    END LOOP;
END
$$;
ANALYZE;
