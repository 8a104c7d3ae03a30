-- Refunds: a refund is a payment of its own, opened by pay_refund_open for
-- a SUCCESS payment, claimed and settled like any other; its payment's
-- refunds in PROCESSING or SUCCESS never add up to more than was captured.

-- How the ledger and journal stand: every refusal below leaves both as
-- they were.
CREATE FUNCTION refund_rows() RETURNS text
LANGUAGE sql AS $$
    SELECT 'ledger:' || (SELECT count(*) FROM pay_ledger) || ' journal:' || (SELECT count(*) FROM pay_journal)
$$;

SELECT pay_begin('RF-PAID', 100.00, 'CNY'), pay_succeed('RF-PAID', 'BANK-RF-1', 1);
SELECT pay_open('SHOP', 'RF-ORDER', 30.00, 'EUR') AS order_bizno \gset
SELECT pay_begin(:'order_bizno'), pay_succeed(:'order_bizno', 'BANK-RF-2', 1);
SELECT payment_in('RF-INIT', 'INIT'), payment_in('RF-PROCESSING', 'PROCESSING'),
       payment_in('RF-FAILED', 'FAILED');

-- 1. Opening: the same refund key finds the same refund; another opens another.
SELECT pay_refund_open('RF-PAID', 'R1', 40, 'customer returned one item') AS r1 \gset
SELECT pay_refund_open('RF-PAID', 'R1', 40) = :'r1' AS same_refund_again,
       pay_refund_open('RF-PAID', 'R2', 40) <> :'r1' AS second_key_second_refund;
SELECT pay_refund_open('RF-PAID', 'R2', 40) AS r2 \gset
SELECT status, amount, currency, parent, refund_key, attempt, prefix, biz_id
FROM pay_ledger WHERE bizno = :'r1';
SELECT from_status, to_status, amount, currency, note FROM pay_journal WHERE bizno = :'r1';
-- A refund's bizNo is issued for its payment's business action, so it reads
-- as that order's (and routes with it); one of a payment keyed by another
-- system reads REFUND-<its key>.
SELECT prefix, biz_id
FROM pay_bizno_parse(pay_refund_open(:'order_bizno', 'R1', 10));
SELECT prefix, biz_id FROM pay_bizno_parse(:'r1');
SELECT refund_key, prefix IS NULL AND biz_id IS NULL AS no_order_of_its_own
FROM pay_ledger WHERE parent = :'order_bizno';

-- 2. Refusals, each recording nothing.
SELECT refund_rows() AS before_refusals \gset
SELECT regexp_replace(call, 'REFUND-RF-PAID-[^'']+', '<r1>') AS call, outcome(call) FROM (VALUES
    ($$SELECT pay_refund_open('RF-PAID', 'R1', 41)$$),         -- same key, another amount
    ($$SELECT pay_refund_open(NULL, 'R9', 1)$$),
    ($$SELECT pay_refund_open('RF-PAID', NULL, 1)$$),
    ($$SELECT pay_refund_open('RF-PAID', 'R9', NULL)$$),
    ($$SELECT pay_refund_open('RF-PAID', 'R9', 0)$$),
    ($$SELECT pay_refund_open('RF-PAID', 'R9', -5)$$),
    ($$SELECT pay_refund_open('RF-PAID', 'R9', 'NaN')$$),
    ($$SELECT pay_refund_open('RF-PAID', 'R9', 'Infinity')$$),
    ($$SELECT pay_refund_open('RF-PAID', 'bad key!', 1)$$),
    ($$SELECT pay_refund_open('RF-NOBODY', 'R9', 1)$$),
    ($$SELECT pay_refund_open('RF-INIT', 'R9', 1)$$),
    ($$SELECT pay_refund_open('RF-PROCESSING', 'R9', 1)$$),
    ($$SELECT pay_refund_open('RF-FAILED', 'R9', 1)$$),
    (format('SELECT pay_refund_open(%L, %L, 1) /* a refund of a refund */', :'r1', 'R9'))
) AS refusals(call);
SELECT refund_rows() = :'before_refusals' AS nothing_recorded;
SELECT error_message($$SELECT pay_refund_open('RF-PROCESSING', 'R9', 1)$$);

-- 3. The limit: 100.00 captured; refunds of 40, 40 and 40 cannot all go.
SELECT pay_refund_open('RF-PAID', 'R3', 40) AS r3 \gset
SELECT action, attempt, status FROM pay_claim(:'r1');
SELECT action, attempt, status FROM pay_claim(:'r2');
SELECT refund_rows() AS before_limit \gset
SELECT outcome(format('SELECT action FROM pay_claim(%L)', :'r3')) AS third_refund;
SELECT error_message(format('SELECT action FROM pay_claim(%L)', :'r3')) AS message;
SELECT refund_rows() = :'before_limit' AS nothing_recorded, standing(:'r3');
SELECT * FROM pay_refund_balance('RF-PAID');
-- A failed refund frees its share; a succeeded one keeps it.
SELECT pay_fail(:'r2', 'the bank refused the refund', 1), pay_succeed(:'r1', 'BANK-REFUND-1', 1);
SELECT action, attempt, status FROM pay_claim(:'r3');
SELECT * FROM pay_refund_balance('RF-PAID');
-- The failed one, retried, no longer fits; exactly the rest does.
SELECT outcome(format('SELECT action FROM pay_claim(%L)', :'r2')) AS failed_refund_retried, standing(:'r2');
SELECT pay_refund_open('RF-PAID', 'R4', 20) AS r4 \gset
SELECT action, status FROM pay_claim(:'r4');
SELECT * FROM pay_refund_balance('RF-PAID');
-- A refund is a payment: duplicate answers, stale attempts, frozen amount.
SELECT action, attempt, status FROM pay_claim(:'r1');
SELECT outcome(format('SELECT pay_succeed(%L, %L, 0)', :'r3', 'BANK-REFUND-3')) AS stale_attempt,
       outcome(format('SELECT pay_succeed(%L, %L, 7)', :'r3', 'BANK-REFUND-3')) AS unclaimed_attempt,
       outcome(format('SELECT action FROM pay_claim(%L, 41)', :'r3')) AS other_amount_in_flight;
SELECT pay_succeed(:'r3', 'BANK-REFUND-3', 1), pay_succeed(:'r4', 'BANK-REFUND-4', 1);
SELECT * FROM pay_verify();

-- 4. A second charge the bank reports is journaled once, however often it
-- is reported.  Since 1.3 it counts as captured only once a bank statement
-- confirms it (pay_reconcile calls pay_confirm_second_charge, as an
-- operator may): until then its refund does not fit; from then on it can
-- be refunded, keyed by its reference.
SELECT pay_succeed('RF-PAID', 'BANK-RF-1b', 1);
SELECT pay_succeed('RF-PAID', 'BANK-RF-1b', 1);
SELECT count(*) AS second_charge_rows FROM pay_journal
WHERE bizno = 'RF-PAID' AND from_status = 'SUCCESS' AND to_status = 'SUCCESS';
SELECT * FROM pay_refund_balance('RF-PAID');
SELECT pay_refund_open('RF-PAID', 'BANK-RF-1b', 100.00, 'second charge') AS dup \gset
SELECT outcome(format('SELECT action FROM pay_claim(%L)', :'dup')) AS refund_before_confirmation;
SELECT pay_confirm_second_charge('RF-PAID', 'BANK-RF-1b');
SELECT pay_confirm_second_charge('RF-PAID', 'BANK-RF-1b') AS confirmed_again;
SELECT count(*) AS reported_and_confirmed_rows FROM pay_journal
WHERE bizno = 'RF-PAID' AND from_status = 'SUCCESS' AND to_status = 'SUCCESS';
SELECT channel_ref, confirmed FROM pay_second_charges() WHERE bizno = 'RF-PAID';
SELECT * FROM pay_refund_balance('RF-PAID');
SELECT action, status FROM pay_claim(:'dup');
SELECT pay_succeed(:'dup', 'BANK-REFUND-DUP', 1);
SELECT * FROM pay_refund_balance('RF-PAID');
SELECT * FROM pay_verify();

-- 5. Raw SQL is held to the same rules by the ledger's trigger.
SELECT refund_rows() AS before_raw \gset
SELECT regexp_replace(call, 'REFUND-RF-PAID-[^'']+', '<r1>') AS call, outcome(call) FROM (VALUES
    ($$INSERT INTO pay_ledger (bizno, amount, currency, parent, refund_key) VALUES ('RF-RAW', 1, 'CNY', 'RF-NOBODY', 'K') RETURNING 'ok'$$),
    ($$INSERT INTO pay_ledger (bizno, amount, currency, parent, refund_key) VALUES ('RF-RAW', 1, 'EUR', 'RF-FAILED', 'K') RETURNING 'ok'$$),
    ($$INSERT INTO pay_ledger (bizno, amount, currency, parent, refund_key) VALUES ('RF-RAW', 1, 'EUR', 'RF-PAID', 'K') RETURNING 'ok'$$),
    ($$INSERT INTO pay_ledger (bizno, amount, currency, parent) VALUES ('RF-RAW', 1, 'CNY', 'RF-PAID') RETURNING 'ok'$$),
    ($$INSERT INTO pay_ledger (bizno, currency, parent, refund_key) VALUES ('RF-RAW', 'CNY', 'RF-PAID', 'K') RETURNING 'ok'$$),
    ($$INSERT INTO pay_ledger (bizno, status, amount, currency, parent, refund_key) VALUES ('RF-RAW', 'PROCESSING', 0.01, 'CNY', 'RF-PAID', 'K') RETURNING 'ok'$$),
    ($$UPDATE pay_ledger SET parent = 'RF-PAID' WHERE bizno = 'RF-INIT' RETURNING 'ok'$$),
    (format('UPDATE pay_ledger SET refund_key = %L WHERE bizno = %L RETURNING %L', 'R9', :'r1', 'ok')),
    (format('UPDATE pay_ledger SET parent = NULL WHERE bizno = %L RETURNING %L', :'r1', 'ok'))
) AS raw(call);
SELECT refund_rows() = :'before_raw' AS nothing_recorded;
-- Raw refunds that fit are recorded and journaled like any write; one that
-- would exceed the capture is refused entering PROCESSING, also when one
-- UPDATE moves several refunds at once.
SELECT pay_begin('RF-RAW-PARENT', 50, 'CNY'), pay_succeed('RF-RAW-PARENT', 'BANK-RAW', 1);
INSERT INTO pay_ledger (bizno, amount, currency, parent, refund_key)
VALUES ('RF-RAW-A', 30, 'CNY', 'RF-RAW-PARENT', 'A'), ('RF-RAW-B', 30, 'CNY', 'RF-RAW-PARENT', 'B');
SELECT outcome($$UPDATE pay_ledger SET status = 'PROCESSING' WHERE parent = 'RF-RAW-PARENT' RETURNING 'ok'$$)
    AS both_at_once;
SELECT standing('RF-RAW-A') AS a, standing('RF-RAW-B') AS b;
SELECT outcome($$UPDATE pay_ledger SET currency = 'USD' WHERE bizno = 'RF-RAW-A' RETURNING 'ok'$$) AS other_currency;
UPDATE pay_ledger SET amount = 20 WHERE bizno = 'RF-RAW-B';
UPDATE pay_ledger SET status = 'PROCESSING' WHERE parent = 'RF-RAW-PARENT';
SELECT standing('RF-RAW-A') AS a, standing('RF-RAW-B') AS b;
SELECT * FROM pay_refund_balance('RF-RAW-PARENT');
SELECT * FROM pay_verify();

-- 6. pay_verify reports what only a write with the ledger's triggers off
-- can leave: here a replica's apply (session_replication_role = replica)
-- receiving a refund beyond the capture, and a refund of a payment it
-- does not have.
BEGIN;
SET LOCAL session_replication_role = replica;
INSERT INTO pay_ledger (bizno, status, amount, currency, parent, refund_key, attempt)
VALUES ('RF-REPLICA', 'PROCESSING', 5, 'CNY', 'RF-RAW-PARENT', 'C', 1),
       ('RF-ORPHAN', 'INIT', 5, 'CNY', 'RF-GONE', 'D', 0);
SELECT problem FROM pay_verify() WHERE bizno IN ('RF-RAW-PARENT', 'RF-REPLICA', 'RF-ORPHAN') ORDER BY 1;
ROLLBACK;

-- 8. Reconciliation knows refunds: a statement row may name a refund, and
-- settling a DUPLICATE_CHARGE journals the second charge as confirmed by
-- the statement (since 1.3: only then is it captured), which is then
-- refunded through the API, keyed by the bank's reference -- the incident's
-- manual refunds made idempotent.
SELECT pay_begin('RF-INCIDENT', 25, 'EUR'), pay_succeed('RF-INCIDENT', 'BANK-INC-1', 1);
SELECT pay_refund_open('RF-INCIDENT', 'R1', 5) AS inc_r1 \gset
SELECT action FROM pay_claim(:'inc_r1');
CREATE TABLE refund_statement (bizno text, amount numeric, currency text, status text, channel_ref text);
INSERT INTO refund_statement VALUES
    ('RF-INCIDENT', 25, 'EUR', 'SUCCESS', 'BANK-INC-1'),
    ('RF-INCIDENT', 25, 'EUR', 'SUCCESS', 'BANK-INC-2'),
    (:'inc_r1', 5, 'EUR', 'SUCCESS', 'BANK-INC-REFUND-1');
SELECT kind, bizno = :'inc_r1' AS is_the_refund, ledger_status,
       regexp_replace(detail, 'REFUND-RF-INCIDENT-[^ ]+', '<r1>') AS detail
FROM pay_reconcile('refund_statement', settle => true)
WHERE bizno IN ('RF-INCIDENT', :'inc_r1') ORDER BY kind;
SELECT * FROM pay_refund_balance('RF-INCIDENT');
SELECT pay_refund_open('RF-INCIDENT', 'BANK-INC-2', 25, 'duplicate charge') AS inc_dup \gset
SELECT action FROM pay_claim(:'inc_dup');
SELECT pay_succeed(:'inc_dup', 'BANK-INC-REFUND-2', 1);
-- Run again (a retry of the whole clean-up): nothing is journaled or refunded twice.
SELECT kind, regexp_replace(detail, 'REFUND-RF-INCIDENT-[^ ]+', '<r1>') AS detail
FROM pay_reconcile('refund_statement', settle => true)
WHERE bizno IN ('RF-INCIDENT', :'inc_r1') ORDER BY kind;
SELECT pay_refund_open('RF-INCIDENT', 'BANK-INC-2', 25) = :'inc_dup' AS same_refund,
       (SELECT count(*) FROM pay_journal WHERE bizno = 'RF-INCIDENT' AND from_status = 'SUCCESS') AS second_charges;
SELECT * FROM pay_refund_balance('RF-INCIDENT');
SELECT * FROM pay_verify();

-- 7. pay_stats counts refunds; an application role refunds through the
-- API only.
SELECT status, payments >= refunds AS refunds_are_payments, refunds > 0 AS has_refunds
FROM pay_stats ORDER BY status;
CREATE ROLE regress_refund_app;
SELECT pay_grant('regress_refund_app');
SET ROLE regress_refund_app;
SELECT pay_refund_open('RF-RAW-PARENT', 'APP-1', 0.50) IS NOT NULL AS app_opens_refund;
SELECT outcome($$INSERT INTO pay_ledger (bizno, amount, currency, parent, refund_key) VALUES ('RF-APP-RAW', 1, 'CNY', 'RF-RAW-PARENT', 'APP-2') RETURNING 'ok'$$) AS app_raw_insert,
       outcome($$SELECT captured FROM pay_refund_balance('RF-RAW-PARENT')$$) AS app_reads_balance;
RESET ROLE;
SELECT * FROM pay_verify();
DROP OWNED BY regress_refund_app;
DROP ROLE regress_refund_app;
