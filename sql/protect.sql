-- Guarding tables that already exist: pay_protect, pay_unprotect, pay_guard.
\set SHOW_CONTEXT never

-- A text status column, with rows from before the guard.
CREATE TABLE orders (
    id      integer PRIMARY KEY,
    status  text NOT NULL DEFAULT 'INIT',
    amount  numeric,
    note    text
);
INSERT INTO orders VALUES (1, 'INIT', 10), (2, 'PROCESSING', 20), (3, 'SUCCESS', 30), (4, 'FAILED', 40);
SELECT pay_protect('orders', 'status', '{amount}');
SELECT table_name, trigger_name, status_column, frozen_columns, enabled
FROM pay_guards WHERE table_name = 'orders'::regclass ORDER BY trigger_name;

-- Every cell of the state machine, by UPDATE.
CREATE TEMP TABLE cells AS
    SELECT row_number() OVER (ORDER BY f, t) + 100 AS id, f, t
    FROM unnest(ARRAY['INIT', 'PROCESSING', 'SUCCESS', 'FAILED']) AS f,
         unnest(ARRAY['INIT', 'PROCESSING', 'SUCCESS', 'FAILED']) AS t;
SET session_replication_role = replica;     -- load rows in any state, as a restore would
INSERT INTO orders (id, status) SELECT id, f FROM cells;
RESET session_replication_role;
SELECT f AS from_status, t AS to_status,
       outcome(format('UPDATE orders SET status = %L WHERE id = %s RETURNING status', t, id)) AS outcome
FROM cells ORDER BY id;

-- INSERT starts in INIT or PROCESSING; a label that is no state is 22P02.
SELECT s AS status, outcome(format('INSERT INTO orders (id, status) VALUES (%s, %L) RETURNING status', 200 + n, s))
FROM unnest(ARRAY['INIT', 'PROCESSING', 'SUCCESS', 'FAILED', 'DONE', 'init']) WITH ORDINALITY AS x(s, n);
INSERT INTO orders (id, status) VALUES (300, 'DONE');
INSERT INTO orders (id, status) VALUES (301, 'SUCCESS');

-- The message names the table's row, the transition and the reason.
UPDATE orders SET status = 'INIT' WHERE id = 3;

-- Frozen columns keep their values while PROCESSING or SUCCESS; other columns may change.
SELECT outcome('UPDATE orders SET amount = 21 WHERE id = 2 RETURNING amount') AS processing_amount,
       outcome('UPDATE orders SET amount = 31 WHERE id = 3 RETURNING amount') AS success_amount,
       outcome('UPDATE orders SET amount = 11 WHERE id = 1 RETURNING amount') AS init_amount,
       outcome('UPDATE orders SET note = ''called the bank'' WHERE id = 2 RETURNING note') AS processing_note;
UPDATE orders SET amount = 21 WHERE id = 2;

-- DELETE spares PROCESSING and SUCCESS rows; TRUNCATE is refused.
SELECT outcome('DELETE FROM orders WHERE id = 1 RETURNING id') AS delete_init,
       outcome('DELETE FROM orders WHERE id = 4 RETURNING id') AS delete_failed,
       outcome('DELETE FROM orders WHERE id = 2 RETURNING id') AS delete_processing,
       outcome('DELETE FROM orders WHERE id = 3 RETURNING id') AS delete_success;
TRUNCATE orders;

-- A multi-row statement fails whole.
SELECT count(*) FILTER (WHERE status = 'INIT') AS init_before FROM orders;
UPDATE orders SET status = 'INIT' WHERE status IN ('FAILED', 'SUCCESS');
SELECT count(*) FILTER (WHERE status = 'INIT') AS init_after FROM orders;

-- An illegal step inside a larger application transaction takes it all back.
CREATE TABLE shipments (order_id integer);
BEGIN;
INSERT INTO shipments VALUES (3);
UPDATE orders SET note = 'shipped' WHERE id = 3;
UPDATE orders SET status = 'FAILED' WHERE id = 3;
COMMIT;
SELECT (SELECT count(*) FROM shipments) AS shipments, note FROM orders WHERE id = 3;

-- The guard fires under session_replication_role = replica: UPDATE and
-- DELETE stay guarded (INSERT may carry any state, see README).
SET session_replication_role = replica;
SELECT outcome('UPDATE orders SET status = ''INIT'' WHERE id = 3 RETURNING status') AS replica_update,
       outcome('DELETE FROM orders WHERE id = 3 RETURNING id') AS replica_delete;
RESET session_replication_role;

-- A pay_status column works the same way.
CREATE TABLE refunds (id integer PRIMARY KEY, state pay_status, amount numeric, currency text);
INSERT INTO refunds VALUES (1, 'INIT', 5, 'EUR');
SELECT pay_protect('refunds', 'state', '{amount,currency}');
UPDATE refunds SET state = 'PROCESSING' WHERE id = 1;
SELECT outcome('UPDATE refunds SET currency = ''USD'' WHERE id = 1 RETURNING currency') AS frozen_currency,
       outcome('UPDATE refunds SET state = ''INIT'' WHERE id = 1 RETURNING state') AS back_to_init,
       outcome('UPDATE refunds SET state = NULL WHERE id = 1 RETURNING state') AS to_null,
       outcome('UPDATE refunds SET state = ''SUCCESS'' WHERE id = 1 RETURNING state') AS settled,
       outcome('INSERT INTO refunds VALUES (2, ''FAILED'') RETURNING state') AS insert_failed;

-- And so does varchar; a table without a primary key names "a row".
CREATE TABLE transfers (ref varchar(20), status varchar(12));
INSERT INTO transfers VALUES ('T1', 'SUCCESS');
SELECT pay_protect('transfers');
UPDATE transfers SET status = 'FAILED';

-- pay_protect checks before it installs anything.
CREATE TABLE legacy (id integer PRIMARY KEY, status text);
INSERT INTO legacy VALUES (1, 'INIT'), (2, 'DONE'), (3, 'PAID');
SELECT pay_protect('legacy');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO legacy VALUES (4, NULL);
DELETE FROM legacy WHERE status IN ('DONE', 'PAID');
SELECT pay_protect('legacy');
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) AS guards_on_legacy FROM pay_guards WHERE table_name = 'legacy'::regclass;
CREATE TABLE numbered (id integer, status integer);
SELECT outcome($$SELECT pay_protect('numbered')$$) AS integer_status,
       outcome($$SELECT pay_protect('orders', 'state')$$) AS missing_column,
       outcome($$SELECT pay_protect('orders', 'status', '{price}')$$) AS missing_frozen_column,
       outcome($$SELECT pay_protect('pay_transitions')$$) AS a_view,
       outcome($$SELECT pay_protect(NULL)$$) AS null_table,
       outcome($$SELECT pay_protect('no_such_table')$$) AS no_table;

-- Protecting again replaces the guard: here, amount is no longer frozen.
SELECT pay_protect('orders');
SELECT frozen_columns FROM pay_guards WHERE trigger_name = 'pay_guard' AND table_name = 'orders'::regclass;
UPDATE orders SET amount = 22 WHERE id = 2;

-- pay_unprotect removes it; the extension's own guards stay.
SELECT pay_unprotect('orders');
UPDATE orders SET status = 'INIT' WHERE id = 3;
SELECT count(*) AS guards_on_orders FROM pay_guards WHERE table_name = 'orders'::regclass;
SELECT outcome($$SELECT pay_unprotect('pay_ledger')$$) AS unprotect_ledger;

-- The extension cannot be dropped from under a guarded table.
SELECT outcome('DROP EXTENSION idempotent_pay') AS drop_extension;
