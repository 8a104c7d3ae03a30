-- Where two features meet: an operator verifying an archived database, the
-- archive inside a long snapshot, bank references a statement could never
-- print, the archive's and the counts' own tables written by hand, and the
-- card flow's counts under raw deletions.

SELECT payment_in('SEAM-SUCCESS', 'SUCCESS'), payment_in('SEAM-FAILED', 'FAILED'),
       payment_in('SEAM-PROCESSING', 'PROCESSING');

-- 1. An operator verifies, the archive included: its tables are the
-- owner's alone, and pay_verify and pay_archive_verify read them as the
-- owner.
CREATE ROLE regress_seams_operator;
SELECT pay_grant_operator('regress_seams_operator');
SET ROLE regress_seams_operator;
SELECT outcome($$SELECT count(*) >= 0 FROM pay_verify()$$) AS operator_verifies,
       outcome($$SELECT count(*) >= 0 FROM pay_archive_verify()$$) AS operator_verifies_archive;
-- and reads none of them directly
SELECT outcome($$SELECT count(*) FROM pay_ledger_archive$$) AS read_archive,
       outcome($$SELECT count(*) FROM pay_archive_keys$$) AS read_keys;
RESET ROLE;

-- 2. pay_archive judges a payment by what committed before its lock: in a
-- snapshot taken at the transaction's start a refund claimed since would
-- be missed, so any level but READ COMMITTED is refused.
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT outcome($$SELECT pay_archive(now())$$) AS archive_repeatable_read;
ROLLBACK;
BEGIN ISOLATION LEVEL SERIALIZABLE;
SELECT error_message($$SELECT pay_archive(now())$$) AS archive_serializable;
ROLLBACK;
BEGIN ISOLATION LEVEL READ COMMITTED;
SELECT outcome($$SELECT pay_archive(now() - interval '100 years')$$) AS archive_read_committed;
ROLLBACK;

-- 3. A bank's reference is one a statement can print: not empty, not
-- blank, no control characters; through the API and by raw SQL alike.
SELECT payment_in('SEAM-REF', 'PROCESSING');
SELECT outcome($$SELECT pay_succeed('SEAM-REF', '', 1)$$) AS succeed_empty,
       outcome($$SELECT pay_succeed('SEAM-REF', '   ', 1)$$) AS succeed_blank,
       outcome($$SELECT pay_succeed('SEAM-REF', E'BANK\n1', 1)$$) AS succeed_newline,
       outcome($$SELECT pay_succeed('SEAM-REF', E'BANK\x7f', 1)$$) AS succeed_delete;
SELECT outcome($$UPDATE pay_ledger SET status = 'SUCCESS', channel_ref = E'\t' WHERE bizno = 'SEAM-REF' RETURNING status$$) AS raw_tab,
       outcome($$UPDATE pay_ledger SET status = 'SUCCESS', channel_ref = '' WHERE bizno = 'SEAM-REF' RETURNING status$$) AS raw_empty;
SELECT pay_succeed('SEAM-REF', 'BANK-SEAM-REF', 1);
SELECT outcome($$SELECT pay_confirm_second_charge('SEAM-SUCCESS', '')$$) AS confirm_empty,
       outcome($$SELECT pay_confirm_second_charge('SEAM-SUCCESS', E'x\x01y')$$) AS confirm_control,
       outcome($$SELECT pay_confirm_second_charge('SEAM-SUCCESS', ' ')$$) AS confirm_blank;
SELECT count(*) AS second_charges_recorded FROM pay_second_charges() WHERE bizno = 'SEAM-SUCCESS';
-- a reference in any script is one
SELECT pay_confirm_second_charge('SEAM-SUCCESS', 'BANK-Zürich 7');
SELECT channel_ref, confirmed FROM pay_second_charges() WHERE bizno = 'SEAM-SUCCESS';

-- 4. What outlives the archive's partitions, and the record of archiving,
-- are never emptied, even by the superuser; in a replica's apply neither.
SELECT outcome($$TRUNCATE pay_archive_keys$$) AS truncate_keys,
       outcome($$TRUNCATE pay_archive_months$$) AS truncate_months,
       outcome($$TRUNCATE pay_archive_counts$$) AS truncate_counts,
       outcome($$TRUNCATE pay_archive_runs$$) AS truncate_runs;
SET session_replication_role = replica;
SELECT outcome($$TRUNCATE pay_archive_keys$$) AS replica_truncate_keys,
       outcome($$TRUNCATE pay_archive_runs$$) AS replica_truncate_runs;
RESET session_replication_role;

-- The hashes only grow: at commit, every hash of a row replaced or removed
-- is still in the row covering it, and no two rows' ranges overlap.
SELECT count(*) > 0 AS some_archived_keys FROM pay_archive_keys;
SELECT sum(cardinality(pay_archive_key_unpack(lo, hashes))) AS hashes_before FROM pay_archive_keys \gset
\set VERBOSITY sqlstate
BEGIN;
DELETE FROM pay_archive_keys;
COMMIT;
\set VERBOSITY default
BEGIN;
SET CONSTRAINTS pay_archive_keys_kept IMMEDIATE;
SELECT outcome($$WITH d AS (DELETE FROM pay_archive_keys RETURNING 1) SELECT count(*) FROM d$$) AS delete_keys,
       outcome($$WITH u AS (UPDATE pay_archive_keys SET hashes = '\x' RETURNING 1) SELECT count(*) FROM u$$) AS empty_rows,
       outcome($$WITH u AS (UPDATE pay_archive_keys SET hi = lo WHERE lo = (SELECT min(lo) FROM pay_archive_keys) RETURNING 1) SELECT count(*) FROM u$$) AS shrink_range,
       outcome($$INSERT INTO pay_archive_keys SELECT lo + 1, lo + 1, '' FROM pay_archive_keys ORDER BY lo LIMIT 1 RETURNING lo$$) AS shadow_range;
SET LOCAL session_replication_role = replica;
SELECT outcome($$WITH d AS (DELETE FROM pay_archive_keys RETURNING 1) SELECT count(*) FROM d$$) AS replica_delete_keys;
ROLLBACK;
-- shrinking a row's range and putting a row of no archived hash over the gap
BEGIN;
UPDATE pay_archive_keys SET hi = lo WHERE lo = (SELECT min(lo) FROM pay_archive_keys);
INSERT INTO pay_archive_keys SELECT lo + 1, 9223372036854775807, '' FROM pay_archive_keys ORDER BY lo LIMIT 1;
\set VERBOSITY sqlstate
COMMIT;
\set VERBOSITY default
SELECT sum(cardinality(pay_archive_key_unpack(lo, hashes))) = :hashes_before AS every_hash_kept FROM pay_archive_keys;
-- a hash added (the merge pay_archive runs) is fine
BEGIN;
SET CONSTRAINTS pay_archive_keys_kept IMMEDIATE;
SELECT outcome($$SELECT pay_archive_add_keys('{4242, 4243}')$$) AS merge;
ROLLBACK;

-- A settled payment leaves the ledger only into the archive with its hash
-- kept: rows copied by hand into a partition of one's own, deleted from
-- the ledger and the journal, the partition then dropped, would leave no
-- record of it at all.
SELECT payment_in('SEAM-ERASED', 'SUCCESS');
BEGIN;
CREATE TABLE seams_ledger_part PARTITION OF pay_ledger_archive FOR VALUES FROM ('2030-01-01') TO ('2030-02-01');
CREATE TABLE seams_journal_part PARTITION OF pay_journal_archive FOR VALUES FROM ('2030-01-01') TO ('2030-02-01');
INSERT INTO pay_ledger_archive (bizno, prefix, biz_id, status, amount, currency, attempt, channel_ref,
                                last_error, created_at, updated_at, processing_since, note, parent,
                                refund_key, response, month, archived_at)
SELECT bizno, prefix, biz_id, status, amount, currency, attempt, channel_ref, last_error, created_at,
       updated_at, processing_since, note, parent, refund_key, response, '2030-01-01', now()
FROM pay_ledger WHERE bizno = 'SEAM-ERASED';
INSERT INTO pay_journal_archive (seq, bizno, attempt, from_status, to_status, amount, currency, at, txid,
                                 actor, note, month)
SELECT seq, bizno, attempt, from_status, to_status, amount, currency, at, txid, actor, note, '2030-01-01'
FROM pay_journal WHERE bizno = 'SEAM-ERASED';
SELECT outcome($$WITH d AS (DELETE FROM pay_ledger WHERE bizno = 'SEAM-ERASED' RETURNING 1) SELECT count(*) FROM d$$)
       AS erase_from_ledger;
ROLLBACK;
SELECT action FROM pay_claim('SEAM-ERASED', 10, 'EUR');

-- 5. pay_stats' counts are tables the owner can write; pay_verify compares
-- them with a full count of the same snapshot and names each difference.
SELECT count(*) AS stats_problems_before FROM pay_verify() WHERE problem LIKE 'pay_stats%';
UPDATE pay_stats_counts SET n = n + 1000 WHERE to_status = 'SUCCESS' AND from_status = 'PROCESSING' AND NOT refund;
SELECT regexp_replace(problem, '[0-9]+', 'N', 'g') AS problem FROM pay_verify() WHERE problem LIKE 'pay_stats%' ORDER BY 1;
UPDATE pay_stats_counts SET n = n - 1000 WHERE to_status = 'SUCCESS' AND from_status = 'PROCESSING' AND NOT refund;
SELECT count(*) AS stats_problems_after FROM pay_verify() WHERE problem LIKE 'pay_stats%';

-- 6. What a journal row means is data only the API writes, never read
-- from a note: an application that sets the journal's note to the words of
-- a second charge before it settles makes no second charge of it, and its
-- refunds are held to what it really captured.
CREATE ROLE regress_seams_app;
SELECT pay_grant('regress_seams_app');
SET ROLE regress_seams_app;
SELECT pay_claim('SEAM-NOTE', 10, 'EUR');
SET idempotent_pay.journal_note = 'second charge reported: BANK-FORGED, for a payment settled as BANK-SEAM-NOTE';
SELECT pay_succeed('SEAM-NOTE', 'BANK-SEAM-NOTE', 1);
RESET idempotent_pay.journal_note;
SELECT captured, refundable FROM pay_refund_balance('SEAM-NOTE');
SELECT action FROM pay_claim(pay_refund_open('SEAM-NOTE', 'R1', 10));
RESET ROLE;
SELECT count(*) AS second_charges_of_it FROM pay_second_charges() WHERE bizno = 'SEAM-NOTE';
SELECT to_status, note, second_charge FROM pay_journal WHERE bizno = 'SEAM-NOTE' ORDER BY seq;
-- a real second charge carries its kind and reference in columns
SELECT pay_succeed('SEAM-SUCCESS', 'BANK-SEAM-AGAIN', 1);
SELECT channel_ref, second_charge FROM pay_journal
WHERE bizno = 'SEAM-SUCCESS' AND second_charge IS NOT NULL ORDER BY seq;
-- a row the API never writes, by a superuser's hand, is refused; written
-- with a restore's settings, which the journal's guard cannot tell from a
-- restore's row, it is reported
SELECT outcome($$INSERT INTO pay_journal (bizno, attempt, to_status, second_charge)
                 VALUES ('SEAM-NOTE', 1, 'PROCESSING', 'reported') RETURNING 'inserted'$$) AS raw_second_charge;
BEGIN;
SET LOCAL row_security = off;
SET LOCAL check_function_bodies = false;
INSERT INTO pay_journal (bizno, attempt, to_status, second_charge) VALUES ('SEAM-NOTE', 1, 'PROCESSING', 'reported');
RESET row_security;
RESET check_function_bodies;
SELECT regexp_replace(problem, '[0-9]+', 'N') AS problem FROM pay_verify() WHERE problem LIKE '%never journals';
ROLLBACK;

-- 7. pay_stats counts the card flow by kind, and its amounts, whatever a
-- raw statement deletes: a capture that failed and an increment left INIT,
-- deleted by hand, leave the counts as a full count finds them, their kind
-- with them.
SELECT pay_stats_refresh() AS folded;
CREATE TEMPORARY TABLE seams_card_before AS
    SELECT status, payments, refunds, authorizations, captures, voids, increments FROM pay_stats;
CREATE TEMPORARY TABLE seams_amounts_before AS SELECT * FROM pay_stats_amounts;
SELECT pay_open_authorization('SEAMCARD', 'order-1', 60, 'EUR') AS auth \gset
SELECT action FROM pay_claim(:'auth');
SELECT pay_succeed(:'auth', 'SEAM-HOLD-1', 1);
SELECT pay_increment_open(:'auth', 'tip', 5) AS tip \gset
SELECT pay_capture_open(:'auth', 'ship-1', 25, false) AS captured \gset
SELECT action FROM pay_claim(:'captured');
SELECT pay_succeed(:'captured', 'SEAM-CAP-1', 1);
SELECT pay_capture_open(:'auth', 'ship-2', 10, false) AS declined \gset
SELECT action FROM pay_claim(:'declined');
SELECT pay_fail(:'declined', 'declined', 1);
SELECT pay_void_open(:'auth', 'cancel') AS void \gset
SELECT action FROM pay_claim(:'void');
SELECT pay_succeed(:'void', 'SEAM-VOID-1', 1);
-- folded first: the deletions must bring the kind the counts gave the rows
SELECT pay_stats_refresh() AS folded_before_deleting;
DELETE FROM pay_ledger WHERE bizno IN (:'declined', :'tip');
SELECT s.status, s.payments - b.payments AS payments, s.refunds - b.refunds AS refunds,
       s.authorizations - b.authorizations AS authorizations, s.captures - b.captures AS captures,
       s.voids - b.voids AS voids, s.increments - b.increments AS increments
FROM pay_stats AS s JOIN seams_card_before AS b USING (status) ORDER BY s.status;
SELECT a.currency, a.authorized - coalesce(b.authorized, 0) AS authorized,
       a.captured - coalesce(b.captured, 0) AS captured
FROM pay_stats_amounts AS a LEFT JOIN seams_amounts_before AS b USING (currency) ORDER BY 1;
SELECT closed_reason, holds, uncaptured FROM pay_stats_holds() WHERE currency = 'EUR' ORDER BY 1;
SELECT pay_stats_refresh() AS folded_again;
SELECT count(*) AS stats_problems FROM pay_verify() WHERE problem LIKE 'pay_stats%';

SET client_min_messages = warning;
DROP OWNED BY regress_seams_app;
DROP ROLE regress_seams_app;
DROP OWNED BY regress_seams_operator;
DROP ROLE regress_seams_operator;
