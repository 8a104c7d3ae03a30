-- pay_claim: pay_begin's decision and, in the same round trip, what the
-- caller needs to act on it -- the attempt to charge under (the fencing
-- token), the attempt in flight, a success's reference and first answer.

SELECT * FROM pay_claim('CL-1', 10, 'EUR');                   -- new: PROCEED, attempt 1
SELECT * FROM pay_claim('CL-1');                              -- in flight: that attempt
SELECT pay_succeed('CL-1', 'BANK-1', 1, '{"receipt": 7, "approved": true}');
SELECT * FROM pay_claim('CL-1');                              -- the answer to replay
-- A duplicate callback keeps the first answer.
SELECT pay_succeed('CL-1', 'BANK-1', 1, '{"receipt": 8}');
SELECT response FROM pay_claim('CL-1');
-- Frozen once SUCCESS, for raw writes too.
SELECT outcome($$UPDATE pay_ledger SET response = '{}' WHERE bizno = 'CL-1' RETURNING 'ok'$$) AS raw_response_change;

-- A failed payment is claimed again under a new attempt, which pay_fail's
-- late answer for the old one cannot touch.
SELECT * FROM pay_claim('CL-2', 20, 'EUR');
SELECT pay_fail('CL-2', 'timeout', 1);
SELECT * FROM pay_claim('CL-2');
SELECT outcome($$SELECT pay_fail('CL-2', 'late', 1)$$) AS late_answer_for_attempt_1;
SELECT pay_succeed('CL-2', 'BANK-2', 2, '"ok"');
SELECT * FROM pay_claim('CL-2');

-- With retry_failed = manual a failed payment waits for an operator.
SELECT * FROM pay_claim('CL-3', 5, 'EUR');
SELECT pay_fail('CL-3', 'declined', 1);
SET idempotent_pay.retry_failed = manual;
SELECT * FROM pay_claim('CL-3');
RESET idempotent_pay.retry_failed;

-- pay_open_claim: open the business action and claim it in one call.
SELECT action, attempt, status, bizno LIKE 'SHOP-CL-ORDER-1-%' AS generated
FROM pay_open_claim('SHOP', 'CL-ORDER-1', 30, 'EUR');
SELECT action, attempt, status FROM pay_open_claim('SHOP', 'CL-ORDER-1', 30, 'EUR');
SELECT outcome($$SELECT action FROM pay_open_claim('SHOP', 'CL-ORDER-1', 31, 'EUR')$$) AS other_amount_in_flight;

-- The single-statement forms that read attempt 0 with pay_begin now read
-- the attempt claimed.
SELECT (c).action, (c).attempt FROM (SELECT pay_claim('CL-4', 1, 'EUR') AS c) AS claimed;

-- The same refusals as pay_begin.
SELECT outcome($$SELECT pay_claim(NULL)$$) AS null_key,
       outcome($$SELECT pay_claim('CL-5', 0, 'EUR')$$) AS zero_amount,
       outcome($$SELECT pay_claim('CL-1', 11)$$) AS other_amount_when_paid;
SELECT * FROM pay_verify();

-- A success reported again under another bank reference is a second charge:
-- the payment keeps its first reference and answer, the journal records the
-- second one, and the caller is warned (pay_second_charge) to refund it.
-- Since 1.3 pay_succeed answers SECOND_CHARGE, and pay_verify lists the
-- second charge until a bank statement confirms it.
SELECT pay_succeed('CL-1', 'BANK-OTHER', 1, '{"receipt": 9}');
SELECT channel_ref, response FROM pay_get('CL-1');
SELECT from_status, to_status, note FROM pay_journal WHERE bizno = 'CL-1' ORDER BY seq DESC LIMIT 1;
-- The same reference stays a quiet no-op; since 1.3 a success without a
-- reference is refused (22004) instead of being one.
SELECT pay_succeed('CL-1', 'BANK-1', 1) AS same_reference,
       outcome($$SELECT pay_succeed('CL-1', NULL, 1)$$) AS without_reference;
SELECT count(*) AS journal_rows FROM pay_journal WHERE bizno = 'CL-1';
SELECT * FROM pay_verify();
-- The operator finds it on the bank's statement and confirms it.
SELECT pay_confirm_second_charge('CL-1', 'BANK-OTHER');
SELECT channel_ref, confirmed FROM pay_second_charges() WHERE bizno = 'CL-1';
SELECT * FROM pay_verify();

-- A new payment needs an amount, and since 1.3 a currency: pay_claim and
-- (since 1.2) pay_begin refuse one without (22004) and record nothing.
SELECT outcome($$SELECT pay_claim('CL-NO-AMOUNT')$$) AS claim_without_amount,
       outcome($$SELECT pay_begin('CL-NO-AMOUNT')$$) AS begin_without_amount,
       outcome($$SELECT pay_claim('CL-NO-AMOUNT', 10)$$) AS claim_without_currency,
       outcome($$SELECT pay_begin('CL-NO-AMOUNT', 10)$$) AS begin_without_currency,
       standing('CL-NO-AMOUNT') AS nothing_recorded;
