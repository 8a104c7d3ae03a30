-- Retention: pay_archive moves settled payments, with their journal rows and
-- refunds, into the archive's month partitions; a late retry of an archived
-- payment is answered from the archive while its month is kept, and refused
-- (55000 pay_archived) once the month is dropped.  Never PROCEED, never a
-- new bizNo.

-- Claims here run inside transaction blocks or subtransactions on purpose
-- (rolled back, or caught); the refusal of that is claim_durable's test.
SET idempotent_pay.claim_in_transaction = allow;

-- Payments in every state, settled last in March 2025 (the ledger's own
-- clock is the transaction's: the dates are set with its bookkeeping off,
-- as a replica would write them).
SELECT payment_in('AR-SUCCESS', 'SUCCESS'), payment_in('AR-FAILED', 'FAILED'),
       payment_in('AR-INIT', 'INIT'), payment_in('AR-PROCESSING', 'PROCESSING'),
       payment_in('AR-REFUNDED', 'SUCCESS'), payment_in('AR-REFUNDING', 'SUCCESS'),
       payment_in('AR-DOUBLE', 'SUCCESS');
SELECT pay_open('ARCH', 'ORDER-1', 12.50, 'EUR') AS order_bizno \gset
SELECT pay_claim(:'order_bizno', 12.50, 'EUR'), pay_succeed(:'order_bizno', 'BANK-ORDER-1', 1);
-- a refund settled, and one in flight, which keeps its payment in the ledger
SELECT pay_refund_open('AR-REFUNDED', 'R1', 4) AS refund_done \gset
SELECT pay_claim(:'refund_done', 4, 'EUR'), pay_succeed(:'refund_done', 'BANK-R1', 1);
SELECT pay_refund_open('AR-REFUNDING', 'R1', 4) AS refund_in_flight \gset
SELECT pay_claim(:'refund_in_flight', 4, 'EUR');
-- a second charge the bank reported and no statement confirmed yet
SELECT pay_succeed('AR-DOUBLE', 'BANK-OTHER', 1);
SET session_replication_role = replica;
UPDATE pay_ledger SET updated_at = '2025-03-10 12:00+00'
WHERE bizno LIKE 'AR-%' OR bizno IN (:'order_bizno', :'refund_done', :'refund_in_flight');
RESET session_replication_role;

-- 1. Who may archive, and with what.
CREATE ROLE regress_archive_app;
CREATE ROLE regress_archive_operator;
SELECT pay_grant('regress_archive_app'), pay_grant_operator('regress_archive_operator');
SET ROLE regress_archive_app;
SELECT outcome($$SELECT pay_archive('2025-04-01')$$) AS application_archives,
       outcome($$SELECT count(*) FROM pay_ledger_archive$$) AS application_reads_archive,
       outcome($$DELETE FROM pay_archive_keys$$) AS application_forgets;
RESET ROLE;
SELECT outcome($$SELECT pay_archive(NULL)$$) AS no_horizon,
       outcome($$SELECT pay_archive(now() + interval '1 hour')$$) AS future_horizon,
       outcome($$SELECT pay_archive('2025-04-01', 0)$$) AS no_rows;

-- 2. The move: every settled payment last changed before the horizon, with
-- its refunds; PROCESSING stays, as do a payment with a refund in flight
-- and one with an unconfirmed second charge.
SET ROLE regress_archive_operator;
SELECT pay_archive('2025-04-01', 2) AS first_batch;
SELECT pay_archive('2025-04-01') AS the_rest, pay_archive('2025-04-01') AS none_left;
RESET ROLE;
SELECT COALESCE('a refund of ' || parent, bizno) AS payment, status FROM pay_ledger
WHERE bizno LIKE 'AR-%' OR bizno IN (:'order_bizno', :'refund_done', :'refund_in_flight')
ORDER BY COALESCE('a refund of ' || parent, bizno) COLLATE "C";
SELECT bizno = :'refund_done' AS is_the_refund, status, parent, to_char(month, 'YYYY-MM') AS month, tableoid::regclass
FROM pay_ledger_archive ORDER BY bizno COLLATE "C";
SELECT count(*) AS archived_journal_rows, count(DISTINCT bizno) AS of_payments,
       min(month) = max(month) AS one_month
FROM pay_journal_archive;
SELECT count(*) AS journal_rows_left FROM pay_journal
WHERE bizno IN (SELECT bizno FROM pay_ledger_archive);
SELECT payments, ledger_rows, journal_rows FROM pay_archive_runs ORDER BY run;
SELECT sum(cardinality(pay_archive_key_unpack(lo, hashes))) AS hashes_kept FROM pay_archive_keys;
SELECT to_char(month, 'YYYY-MM') AS month, payments, ledger_rows, journal_rows, kept, problem FROM pay_archive_verify();
SELECT * FROM pay_verify();

-- 3. Late retries while the month is kept: a success answers from the
-- archive; nothing archived is charged again.
SELECT pay_claim('AR-SUCCESS', 10, 'EUR') AS claim_success,
       pay_begin('AR-SUCCESS', 10, 'EUR') AS begin_success;
SELECT pay_open('ARCH', 'ORDER-1', 12.50, 'EUR') = :'order_bizno' AS open_finds_its_bizno;
SELECT (pay_open_claim('ARCH', 'ORDER-1', 12.50, 'EUR')).action AS open_claim;
SELECT call, outcome(call),
       regexp_replace(error_message(call), 'ARCH-ORDER-1-[0-9A-Z-]+', '<a bizNo>', 'g') AS error
FROM (VALUES
    ($$SELECT pay_claim('AR-FAILED', 10, 'EUR')$$),
    ($$SELECT pay_begin('AR-INIT', 10, 'EUR')$$),
    ($$SELECT pay_claim(pay_bizno('ARCH', 'ORDER-1'), 12.50, 'EUR')$$),
    ($$SELECT pay_claim('AR-SUCCESS', 11, 'EUR')$$),
    ($$SELECT pay_succeed('AR-SUCCESS', 'REF-AR-SUCCESS', 1)$$),
    ($$SELECT pay_fail('AR-FAILED', 'late', 1)$$),
    ($$SELECT pay_reset('AR-FAILED', 'retry')$$),
    ($$SELECT pay_refund_open('AR-REFUNDED', 'R2', 1)$$)) AS c(call);
-- the guard: no raw statement brings an archived key or business action
-- back, and the archive keeps its rows
SELECT outcome($$INSERT INTO pay_ledger (bizno, status, amount, currency)
                 VALUES ('AR-SUCCESS', 'INIT', 10, 'EUR')$$) AS raw_insert,
       outcome(format($$INSERT INTO pay_ledger (bizno, status, amount, currency)
                        VALUES (pay_bizno('ARCH', 'ORDER-1'), 'INIT', 12.50, 'EUR')$$)) AS raw_insert_order,
       outcome($$UPDATE pay_ledger_archive SET status = 'FAILED' WHERE bizno = 'AR-SUCCESS'$$) AS rewrite_archive,
       outcome($$DELETE FROM pay_journal_archive$$) AS delete_archive,
       outcome($$TRUNCATE pay_ledger_archive$$) AS truncate_archive,
       outcome($$DELETE FROM pay_journal WHERE bizno = 'AR-PROCESSING'$$) AS delete_journal,
       outcome($$DELETE FROM pay_ledger WHERE bizno = 'AR-REFUNDING'$$) AS delete_settled;

-- 4. The month dumped and dropped: what was archived is refused, however late.
DROP TABLE pay_ledger_archive_2025_03, pay_journal_archive_2025_03;
SELECT to_char(month, 'YYYY-MM') AS month, payments, kept, problem FROM pay_archive_verify();
SELECT call, outcome(call),
       regexp_replace(error_message(call), 'ARCH-ORDER-1-[0-9A-Z-]+', '<a bizNo>', 'g') AS error
FROM (VALUES
    ($$SELECT pay_claim('AR-SUCCESS', 10, 'EUR')$$),
    ($$SELECT pay_begin('AR-FAILED', 10, 'EUR')$$),
    ($$SELECT pay_claim(pay_bizno('ARCH', 'ORDER-1'), 12.50, 'EUR')$$),
    ($$SELECT pay_open('ARCH', 'ORDER-1', 12.50, 'EUR')$$),
    ($$SELECT pay_open_claim('ARCH', 'ORDER-1', 12.50, 'EUR')$$),
    ($$SELECT pay_claim('AR-REFUNDED', 10, 'EUR')$$),
    ($$SELECT pay_refund_open('AR-REFUNDED', 'R2', 1)$$),
    ($$SELECT pay_succeed('AR-SUCCESS', 'REF-AR-SUCCESS', 1)$$)) AS c(call);
SELECT outcome(format($$SELECT pay_claim(%L, 4, 'EUR')$$, :'refund_done')) AS claim_refund;
SELECT count(*) AS new_rows_for_archived_keys FROM pay_ledger
WHERE bizno IN ('AR-SUCCESS', 'AR-FAILED', 'AR-INIT', 'AR-REFUNDED', :'order_bizno', :'refund_done')
   OR (prefix, biz_id) = ('ARCH', 'ORDER-1');
-- a key never archived is new, as ever
SELECT (pay_claim('AR-NEW', 10, 'EUR')).action AS new_key;
SELECT * FROM pay_verify();

-- 5. The counts of pay_stats go on counting what the archive took; the
-- payments it took are no longer the ledger's.
SELECT s.status, s.payments = (SELECT count(*) FROM pay_ledger AS l WHERE l.status = s.status) AS payments_counted
FROM pay_stats AS s ORDER BY s.status;
SELECT (SELECT sum(transitions) FROM pay_stats_transitions) =
       (SELECT count(*) FROM pay_journal WHERE from_status IS DISTINCT FROM to_status) +
       (SELECT sum(n) FROM pay_archive_counts WHERE from_status IS DISTINCT FROM to_status)
       AS transitions_counted;

-- 6. pay_archive folds the journal first, but never a transaction's own
-- rows: counted in a snapshot that does not show its own transaction, every
-- reader would count them again.  A fold in a transaction that wrote does
-- nothing.
BEGIN;
SELECT (pay_claim('AR-OWN', 10, 'EUR')).action AS own_payment;
SELECT pay_stats_refresh() AS folds_own_rows;
COMMIT;
SELECT (SELECT sum(transitions) FROM pay_stats_transitions) =
       (SELECT count(*) FROM pay_journal WHERE from_status IS DISTINCT FROM to_status) +
       (SELECT sum(n) FROM pay_archive_counts WHERE from_status IS DISTINCT FROM to_status)
       AS transitions_counted_once;

-- 7. The packed rows of pay_archive_keys: a width byte, then each hash
-- after lo as its distance from lo in that many bytes; the hashes come
-- back as they went in, the extremes included; six bytes a hash among
-- 128 spread like ten million; bytes that are not a packed row are refused
-- by the table, found by pay_verify, and stop a claim (55000) rather than
-- be read as hashes, as does a column of another type.
SELECT h, pay_archive_key_pack(h) AS bytes,
       pay_archive_key_unpack(h[1], pay_archive_key_pack(h)) = h AS round_trip
FROM (VALUES (ARRAY[-9223372036854775808, -1, 0, 1, 9223372036854775807]::bigint[]),
             (ARRAY[0, 1, 256]::bigint[]), (ARRAY[42]::bigint[])) AS v(h);
SELECT round(length(pay_archive_key_pack(h))::numeric / (cardinality(h) - 1), 2) AS bytes_a_hash
FROM (SELECT array_agg(g::bigint * 1844674407370 - 9223372036854775807 ORDER BY g) AS h
      FROM generate_series(1, 128) AS g) AS spread;
SELECT outcome($$SELECT pay_archive_key_pack(ARRAY[2, 1])$$) AS descending,
       outcome($$SELECT pay_archive_key_pack(ARRAY[1, 1])$$) AS repeated,
       outcome($$SELECT pay_archive_key_pack(ARRAY[1, NULL])$$) AS with_null,
       outcome($$SELECT pay_archive_key_pack('{}')$$) AS empty,
       outcome($$SELECT pay_archive_key_pack('{{1}, {2}}')$$) AS two_dimensions;
SELECT lo, bytes, pay_archive_key_unpack(lo, bytes) AS hashes
FROM (VALUES (0, '\x010102'::bytea), (0, ''), (0, '\x00'), (0, '\x01'), (0, '\x020001ff'),
             (0, '\x09000000000000000001'), (0, '\x010100'), (0, '\x010201'), (0, '\x010101'),
             (9223372036854775806, '\x0101'), (9223372036854775806, '\x0102')) AS v(lo, bytes);
SELECT outcome($$INSERT INTO pay_archive_keys VALUES (-9223372036854775808, 9223372036854775807, '\x00')$$) AS malformed_row,
       outcome($$INSERT INTO pay_archive_keys VALUES (1, 0, '')$$) AS ends_before_it_starts;
BEGIN;
-- a DBA's change, in maintenance, with the table's checks off, as a
-- corrupted page could leave the rows
SET LOCAL idempotent_pay.maintenance = on;
ALTER TABLE pay_archive_keys DISABLE TRIGGER pay_archive_keys_kept;
ALTER TABLE pay_archive_keys DROP CONSTRAINT pay_archive_keys_hashes_check;
DELETE FROM pay_archive_keys;
INSERT INTO pay_archive_keys VALUES (-9223372036854775808, 9223372036854775807, '\x00');
SELECT * FROM pay_verify();
SELECT outcome($$SELECT pay_claim('AR-LATER', 10, 'EUR')$$) AS claim_over_malformed_row,
       error_message($$SELECT pay_claim('AR-LATER', 10, 'EUR')$$) AS error;
-- nor is a column of another type read as hashes
ALTER TABLE pay_archive_keys ALTER COLUMN hashes TYPE text USING encode(hashes, 'hex');
SELECT outcome($$SELECT pay_claim('AR-LATER', 10, 'EUR')$$) AS claim_over_text_column,
       error_message($$SELECT pay_claim('AR-LATER', 10, 'EUR')$$) AS error;
ROLLBACK;

-- 8. Payments the archive must leave (a second charge no statement
-- confirmed) do not take the places of those it may move: a call of one
-- payment passes over three of them to the next.
SELECT count(payment_in('AR-TWICE-' || g, 'SUCCESS')) AS paid FROM generate_series(1, 3) AS g;
SELECT count(pay_succeed('AR-TWICE-' || g, 'BANK-TWICE-' || g, 1)) AS charged_twice FROM generate_series(1, 3) AS g;
SELECT payment_in('AR-AFTER-TWICE', 'SUCCESS');
SET session_replication_role = replica;
UPDATE pay_ledger SET updated_at = '2025-05-10 12:00+00' WHERE bizno LIKE 'AR-TWICE-%' OR bizno = 'AR-AFTER-TWICE';
RESET session_replication_role;
SET ROLE regress_archive_operator;
SELECT pay_archive('2025-06-01', 1) AS past_the_second_charges, pay_archive('2025-06-01', 1) AS none_left;
RESET ROLE;
SELECT bizno FROM pay_ledger_archive WHERE month = '2025-05-01';
SELECT count(*) AS second_charges_stay FROM pay_ledger WHERE bizno LIKE 'AR-TWICE-%';

-- 9. Many rows of hashes: the claim's probe of pay_archive_keys looks
-- first within the reach of a row as the table's statistics give it, and
-- below it only when no row starts there.  The hashes kept so far and
-- those of 4 000 more keys, packed again in 200 rows: every key refused
-- with the statistics as ANALYZE leaves them, and with statistics that
-- overstate the rows (each row then far wider than the reach), and a new
-- key still proceeds.
BEGIN;
WITH kept AS (DELETE FROM pay_archive_keys RETURNING lo, hashes),
     hashes AS (SELECT unnest(pay_archive_key_unpack(lo, hashes)) AS hash FROM kept
                UNION
                SELECT pay_archive_key_hash('AR-MANY-' || g) FROM generate_series(1, 4000) AS g)
INSERT INTO pay_archive_keys
SELECT h[1], COALESCE(lead(h[1]) OVER (ORDER BY h[1]) - 1, 9223372036854775807), pay_archive_key_pack(h)
FROM (SELECT array_agg(hash ORDER BY hash) AS h
      FROM (SELECT hash, ntile(200) OVER (ORDER BY hash) AS row_of FROM hashes) AS numbered
      GROUP BY row_of) AS packed;
ANALYZE pay_archive_keys;
SELECT reltuples >= 200 AS counted FROM pg_class WHERE oid = 'pay_archive_keys'::regclass;
SELECT outcome(format('SELECT pay_claim(%L, 10, %L)', 'AR-MANY-' || g, 'EUR')) AS claim, count(*)
FROM generate_series(1, 4000) AS g GROUP BY 1;
UPDATE pg_class SET reltuples = 1e15 WHERE oid = 'pay_archive_keys'::regclass;
SELECT outcome(format('SELECT pay_claim(%L, 10, %L)', 'AR-MANY-' || g, 'EUR')) AS claim, count(*)
FROM generate_series(1, 4000) AS g GROUP BY 1;
SELECT (pay_claim('AR-MANY-NEW', 10, 'EUR')).action AS new_key;
ROLLBACK;

-- 10. pay_archive's merge writes rows of at most 512 hashes, each row from
-- its lo up to the next row's, the last up to the largest bigint, every
-- hash once: 1 000 hashes among those kept so far, then 300 more among
-- them, which split the rows they fall in.
BEGIN;
CREATE TEMP TABLE merged_hashes AS
    SELECT unnest(pay_archive_key_unpack(lo, hashes)) AS hash FROM pay_archive_keys
    UNION
    SELECT pay_archive_key_hash('AR-MERGE-' || g) FROM generate_series(1, 1300) AS g;
SELECT pay_archive_add_keys(array(SELECT pay_archive_key_hash('AR-MERGE-' || g)
                                  FROM generate_series(1, 1000) AS g));
SELECT pay_archive_add_keys(array(SELECT pay_archive_key_hash('AR-MERGE-' || g)
                                  FROM generate_series(1001, 1300) AS g));
SELECT count(*) AS key_rows, max(cardinality(pay_archive_key_unpack(lo, hashes))) AS most_in_a_row,
       bool_and((pay_archive_key_unpack(lo, hashes))[1] = lo) AS each_from_its_lo,
       bool_and(hi = COALESCE(next_lo - 1, 9223372036854775807)) AS each_up_to_the_next
FROM (SELECT *, lead(lo) OVER (ORDER BY lo) AS next_lo FROM pay_archive_keys) AS k;
SELECT (SELECT array_agg(hash ORDER BY hash) FROM merged_hashes) =
       (SELECT array_agg(h ORDER BY h) FROM pay_archive_keys, unnest(pay_archive_key_unpack(lo, hashes)) AS h)
       AS every_hash_once;
ROLLBACK;

-- 11. The claim's lookup remembers where it found the row that answers for
-- a hash, and reads it straight from the heap next time; a row pay_archive
-- replaced since is not the answer.  2 000 new keys claimed and rolled
-- back (their rows remembered), then archived -- every row they fall in
-- written again -- and claimed again in the same session: each refused.
-- Rows whose ranges overlap are reported by pay_verify.
BEGIN;
SAVEPOINT remembered;
SELECT (pay_claim('AR-LOOKUP-' || g, 10, 'EUR')).action, count(*) FROM generate_series(1, 2000) AS g GROUP BY 1;
ROLLBACK TO remembered;
SELECT pay_archive_add_keys(array(SELECT pay_archive_key_hash('AR-LOOKUP-' || g)
                                  FROM generate_series(1, 2000) AS g));
SELECT outcome(format('SELECT pay_claim(%L, 10, %L)', 'AR-LOOKUP-' || g, 'EUR')) AS claim, count(*)
FROM generate_series(1, 2000) AS g GROUP BY 1;
SELECT (pay_claim('AR-LOOKUP-NEW', 10, 'EUR')).action AS new_key;
UPDATE pay_archive_keys SET hi = hi + 1 WHERE lo = (SELECT min(lo) FROM pay_archive_keys);
SELECT count(*) FILTER (WHERE problem ~ '^the rows of pay_archive_keys from -?\d+ and from -?\d+ both answer for the hashes from -?\d+ to -?\d+$')
       AS overlaps_found
FROM pay_verify();
ROLLBACK;

DROP OWNED BY regress_archive_app, regress_archive_operator;
DROP ROLE regress_archive_app;
DROP ROLE regress_archive_operator;
