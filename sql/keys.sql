-- Keys are what they claim to be (1.4): a key the ledger does not have
-- starts a payment only when it is a bizNo, or a key of another system the
-- caller accepts (idempotent_pay.foreign_keys = accept); a key shaped like a
-- bizNo that is none, or one that starts with a prefix this database issues,
-- is 22P02 either way; a biz_id that is a bizNo is 22023.  setup.sql lets
-- the other files accept keys of another system: this one tests the default.
SET idempotent_pay.foreign_keys = refuse;
SELECT pay_open('KEY', 'ORDER-42', 10, 'EUR') AS order_42 \gset
SELECT count(*) AS before FROM pay_ledger \gset
SELECT boot_val, context FROM pg_settings WHERE name = 'idempotent_pay.foreign_keys';

-- The order's own id, and its prefix and biz_id joined, are not its key.
SELECT pay_claim('ORDER-42', 10, 'EUR');
SELECT pay_claim('KEY-ORDER-42', 10, 'EUR');
SELECT outcome($$SELECT pay_begin('ORDER-42', 10, 'EUR')$$) AS order_id_begin,
       outcome($$SELECT action FROM pay_claim('order-42', 10, 'EUR')$$) AS lower_case_order_id;
-- Accepting keys of another system records the order's own id, but never
-- one under a prefix this database issues.
SET idempotent_pay.foreign_keys = accept;
SELECT outcome($$SELECT action FROM pay_claim('KEY-ORDER-42', 10, 'EUR')$$) AS prefix_and_biz_id,
       outcome($$SELECT action FROM pay_claim('ORDER-42', 10, 'EUR')$$) AS order_id;
SET idempotent_pay.foreign_keys = refuse;
SELECT count(*) - :before AS new_payments FROM pay_ledger;

-- Every bizNo with one character dropped, or one of the key alphabet added
-- anywhere, is refused as a mistyped bizNo, whatever the caller accepts:
-- never a new payment.
CREATE TEMP TABLE edits AS
WITH b AS (SELECT :'order_42'::text AS b)
SELECT 'deletion' AS edit, left(b, i - 1) || substr(b, i + 1) AS key
FROM b, generate_series(1, length(b)) AS i
UNION ALL
SELECT 'insertion', left(b, i) || c || substr(b, i + 1)
FROM b, generate_series(0, length(b)) AS i,
     regexp_split_to_table('0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz-.:_', '') AS c;
SELECT edit, outcome(format('SELECT action FROM pay_claim(%L, 10, %L)', key, 'EUR')), count(*)
FROM edits GROUP BY 1, 2 ORDER BY 1, 2;
SET idempotent_pay.foreign_keys = accept;
SELECT edit, outcome(format('SELECT action FROM pay_claim(%L, 10, %L)', key, 'EUR')), count(*)
FROM edits GROUP BY 1, 2 ORDER BY 1, 2;
SET idempotent_pay.foreign_keys = refuse;
SELECT count(*) FILTER (WHERE pay_bizno_valid(key)) AS valid_edits, count(*) AS edits FROM edits;
SELECT replace(error_message(format($$SELECT pay_claim(%L, 10, 'EUR')$$, left(:'order_42', -1))),
               left(:'order_42', -1), '<bizNo without its check character>') AS dropped_check_character;
SELECT count(*) - :before AS new_payments FROM pay_ledger;

-- A bizNo is never the biz_id of a new business action: pay_open and
-- pay_open_claim refuse it (22023), mistyped too, instead of opening a
-- second payment of its order.
SELECT outcome(format($$SELECT pay_open('KEY', %L, 10, 'EUR')$$, :'order_42')) AS open_bizno,
       replace(error_message(format($$SELECT pay_open('KEY', %L, 10, 'EUR')$$, :'order_42')),
               :'order_42', '<bizNo>') AS message;
SELECT outcome(format($$SELECT bizno FROM pay_open_claim('KEY', %L, 10, 'EUR')$$, :'order_42'))
           AS open_claim_bizno,
       outcome(format($$SELECT bizno FROM pay_open_claim('KEY', %L, 10, 'EUR')$$, left(:'order_42', -1)))
           AS open_claim_mistyped_bizno;
SELECT count(*) - :before AS new_payments FROM pay_ledger;
-- One recorded so (as 1.3 let pay_open do) is found, as any.
INSERT INTO pay_ledger (bizno, status, amount, currency)
VALUES (pay_bizno('KEY', :'order_42'), 'INIT', 10, 'EUR');
SELECT pay_open('KEY', :'order_42', 10, 'EUR') = (SELECT bizno FROM pay_ledger WHERE biz_id = :'order_42')
       AS recorded_action_found;

-- A bizNo this database never recorded starts a payment: one of pay_bizno,
-- and one of 1.3 (its uniqueness part starts with 0-F, and its check is
-- the weighted sum's alone).
SELECT (pay_claim(pay_bizno('KEY', 'ORDER-43'), 10, 'EUR')).action AS bizno_of_pay_bizno,
       (pay_claim('KEY-ORDER-13-20251130105320000-0000-000938NKRKAYD9', 10, 'EUR')).action AS bizno_of_1_3;

-- Keys the ledger has keep working, whatever the setting: a payment keyed
-- by another system, accepted when it started, settles and replays.
SET idempotent_pay.foreign_keys = accept;
SELECT action FROM pay_claim('PSP-KEYS-7', 10, 'EUR');
SET idempotent_pay.foreign_keys = refuse;
SELECT action FROM pay_claim('PSP-KEYS-7');
SELECT pay_succeed('PSP-KEYS-7', 'BANK-KEYS-7', 1);
SELECT action FROM pay_claim('PSP-KEYS-7');

-- An installed 1.3 keeps 1.3's answers with the new library: the order's
-- id and a mistyped bizNo are new payments, a bizNo a biz_id.  The bizNos
-- the library issues there pass 1.3's check as well as 1.4's.
SELECT current_database() AS regression_database \gset
CREATE DATABASE regress_keys_1_3;
\c regress_keys_1_3
CREATE EXTENSION idempotent_pay VERSION '1.3';
SHOW idempotent_pay.foreign_keys;
SELECT pay_open('SHOP', 'ORDER-42', 10, 'EUR') AS order_42 \gset
SELECT (pay_claim('ORDER-42', 10, 'EUR')).action AS order_id,
       (pay_claim(left(:'order_42', -1), 10, 'EUR')).action AS dropped_check_character,
       (pay_open_claim('SHOP', :'order_42', 10, 'EUR')).action AS bizno_as_biz_id,
       pay_bizno_valid(:'order_42') AS issued_bizno_valid;
\c :regression_database
DROP DATABASE regress_keys_1_3;
