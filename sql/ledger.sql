-- The payment API: decisions, amounts, fencing, errors.

-- pay_begin on every state it can find.
SELECT pay_begin('B-NEW', 10, 'USD') AS no_row;
SELECT bizno, status, attempt, amount, currency FROM pay_ledger WHERE bizno = 'B-NEW';
SELECT pay_begin(payment_in('B-INIT', 'INIT')) AS init, standing('B-INIT');
SELECT pay_begin(payment_in('B-PROCESSING', 'PROCESSING')) AS processing, standing('B-PROCESSING');
SELECT pay_begin(payment_in('B-SUCCESS', 'SUCCESS')) AS success, standing('B-SUCCESS');
SELECT pay_begin(payment_in('B-FAILED', 'FAILED')) AS failed_auto, standing('B-FAILED');
SELECT from_status, to_status, attempt, note FROM pay_journal WHERE bizno = 'B-FAILED' ORDER BY seq;

-- retry_failed = manual: a FAILED payment waits for pay_reset.
SET idempotent_pay.retry_failed = manual;
SELECT pay_begin(payment_in('B-MANUAL', 'FAILED')) AS failed_manual, standing('B-MANUAL');
SELECT pay_reset('B-MANUAL', 'customer asked to retry');
SELECT pay_begin('B-MANUAL') AS after_reset, standing('B-MANUAL');
RESET idempotent_pay.retry_failed;

-- Amounts: a different amount is refused while PROCESSING or SUCCESS and,
-- where the operator allows it (1.3's rule; 1.4 refuses it by default: see
-- params), replaced and journaled while INIT or FAILED.
SET idempotent_pay.parameter_change = allow;
SELECT pay_begin('B-AMOUNT', 10, 'USD');
SELECT pay_begin('B-AMOUNT', 10.00, 'USD') AS same_amount;
SELECT pay_begin('B-AMOUNT', 11, 'USD');
\echo :LAST_ERROR_SQLSTATE
SELECT pay_begin('B-AMOUNT', 10, 'EUR');
\echo :LAST_ERROR_SQLSTATE
SELECT pay_fail('B-AMOUNT', 'insufficient funds', 1);
SELECT pay_begin('B-AMOUNT', 12, 'USD') AS retried_with_new_amount;
SELECT from_status, to_status, attempt, amount, currency, note
FROM pay_journal WHERE bizno = 'B-AMOUNT' ORDER BY seq;

-- The attempt is a fencing token: a late answer for an old attempt is refused.
SELECT pay_fail('B-AMOUNT', 'late timeout of attempt 1', 1);
\echo :LAST_ERROR_SQLSTATE
SELECT pay_succeed('B-AMOUNT', 'bank-ref-2', 2);
SELECT pay_succeed('B-AMOUNT', 'bank-ref-2', 2) AS duplicate_callback;
SELECT channel_ref, last_error FROM pay_ledger WHERE bizno = 'B-AMOUNT';

-- pay_succeed and pay_fail: no-ops on their own state, refusals elsewhere.
SELECT pay_fail('B-AMOUNT', NULL, 2);
\echo :LAST_ERROR_SQLSTATE
SELECT pay_succeed(payment_in('S-INIT', 'INIT'), 'REF-S-INIT', 0);
\echo :LAST_ERROR_SQLSTATE
SELECT pay_fail(payment_in('S-FAILED', 'FAILED'), 'again', 1) AS duplicate_failure, standing('S-FAILED');
SELECT pay_reset('B-SUCCESS', 'refund instead');
\echo :LAST_ERROR_SQLSTATE
SELECT pay_reset(payment_in('S-INIT2', 'INIT'), 'nothing to reset') AS reset_init, standing('S-INIT2');

-- pay_open: one bizNo per business action, whatever its amount becomes.
SELECT pay_open('PAY', 'ORD-7', 30, 'CNY') = pay_open('PAY', 'ORD-7', 30, 'CNY') AS same_bizno;
SELECT pay_open('PAY', 'ORD-7', 35, 'CNY') = pay_open('PAY', 'ORD-7', 35, 'CNY') AS same_after_new_amount;
SELECT status, amount, currency, prefix, biz_id FROM pay_ledger WHERE biz_id = 'ORD-7';
SELECT pay_begin(pay_open('PAY', 'ORD-7', 35, 'CNY'));
SELECT outcome($$SELECT pay_open('PAY', 'ORD-7', 40, 'CNY')$$) AS new_amount_while_processing;
-- A second bizNo for the same business action is refused, naming the first.
SELECT outcome($$SELECT pay_begin(pay_bizno('PAY', 'ORD-7'), 1, 'EUR')$$) AS second_bizno,
       error_message($$SELECT pay_begin(pay_bizno('PAY', 'ORD-7'), 1, 'EUR')$$)
           = 'business action PAY ORD-7 already has bizNo ' || pay_open('PAY', 'ORD-7', 35, 'CNY') AS names_first;
SELECT count(*) AS rows_for_ord_7 FROM pay_ledger WHERE biz_id = 'ORD-7';
RESET idempotent_pay.parameter_change;

-- pay_get: the row, its columns as columns; no row for an unknown bizNo.
SELECT bizno, status, attempt FROM pay_get('B-SUCCESS');
SELECT count(*) AS unknown_rows FROM pay_get('no-such-payment');

-- Keys: 1 to 128 of [A-Za-z0-9_.:-]; a key that looks generated must pass
-- its check character.
SELECT pay_begin(repeat('k', 128), 1, 'EUR') AS longest_key;
SELECT outcome(format('SELECT pay_begin(%L, 1, ''EUR'')', k)) AS outcome, left(k, 40) AS key
FROM unnest(ARRAY['', repeat('k', 129), 'with space', 'semi;colon', 'ünï',
                  'PAY-ORD001-20261130065033976-0000-366VRA691WVWE1',
                  'PAY-ORD001-20261130065033976-0000-366VRA691WVWF0',
                  'PAY-ORD001-20261130065033976x0000-366VRA691WVWE0']) AS k;

-- Every SQLSTATE the API answers, and nothing written by the refused call.
SELECT count(*) AS ledger_rows, (SELECT count(*) FROM pay_journal) AS journal_rows
FROM pay_ledger \gset before_
SELECT outcome('SELECT pay_begin(NULL)') AS null_bizno,
       outcome('SELECT pay_begin(''E-1'', 0, ''EUR'')') AS zero_amount,
       outcome('SELECT pay_begin(''E-1'', -5, ''EUR'')') AS negative_amount,
       outcome('SELECT pay_begin(''E-1'', ''NaN'', ''EUR'')') AS nan_amount,
       outcome('SELECT pay_begin(''E-1'', ''Infinity'', ''EUR'')') AS infinite_amount,
       outcome('SELECT pay_begin(''E-1'', 1, ''usd'')') AS lower_currency,
       outcome('SELECT pay_begin(''E-1'', 1, ''USDT'')') AS long_currency;
SELECT outcome('SELECT pay_succeed(''no-such-payment'', ''REF'', 1)') AS succeed_unknown,
       outcome('SELECT pay_fail(''no-such-payment'', NULL, 1)') AS fail_unknown,
       outcome('SELECT pay_reset(''no-such-payment'', ''x'')') AS reset_unknown,
       outcome('SELECT pay_transition(''no-such-payment'', ''INIT'')') AS transition_unknown;
SELECT outcome('SELECT pay_reset(''B-FAILED'', NULL)') AS reset_without_note,
       outcome('SELECT pay_transition(''B-FAILED'', NULL)') AS transition_without_target,
       outcome('SELECT pay_open(NULL, ''X'', 1, ''EUR'')') AS open_null_prefix,
       outcome('SELECT pay_open(''PAY'', ''X'', NULL, ''EUR'')') AS open_null_amount,
       outcome('SELECT pay_open(''PAY'', ''X'', 1)') AS open_null_currency,
       outcome('SELECT pay_open(''pay'', ''X'', 1, ''EUR'')') AS open_bad_prefix,
       outcome('SELECT pay_open(''PAY'', ''X Y'', 1, ''EUR'')') AS open_bad_biz_id;
SELECT outcome('SELECT pay_stuck(NULL)') AS stuck_null,
       outcome('SELECT pay_stuck(''1 minute'', 0)') AS stuck_zero_rows;
SELECT count(*) = :before_ledger_rows AS ledger_unchanged,
       (SELECT count(*) FROM pay_journal) = :before_journal_rows AS journal_unchanged
FROM pay_ledger;

-- Messages say what is wrong.
SELECT pay_begin('E-1', 0, 'EUR');
SELECT pay_begin('E-1', 1, 'usd');
SELECT pay_succeed('no-such-payment', 'REF', 1);
SELECT pay_succeed(NULL, 'REF', 1);

-- A note belongs to the call that gave it: when that call fails inside a
-- subtransaction, a later write in the same transaction does not inherit it.
SELECT payment_in('S-NOTE', 'FAILED') AS refused, payment_in('S-NOTE-2', 'FAILED') AS written;
CREATE FUNCTION refuse_write() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'the ledger is read-only for this test';
END
$$;
-- (a trigger of one's own on the ledger is maintenance DDL)
SET idempotent_pay.maintenance = on;
CREATE TRIGGER refuse_write BEFORE UPDATE ON pay_ledger
    FOR EACH ROW WHEN (OLD.bizno = 'S-NOTE') EXECUTE FUNCTION refuse_write();
RESET idempotent_pay.maintenance;
BEGIN;
SELECT outcome($$SELECT pay_reset('S-NOTE', 'a note that must not leak')$$) AS failed_reset;
UPDATE pay_ledger SET status = 'INIT' WHERE bizno = 'S-NOTE-2';
COMMIT;
SELECT to_status, note FROM pay_journal WHERE bizno = 'S-NOTE-2' ORDER BY seq DESC LIMIT 1;
DROP TRIGGER refuse_write ON pay_ledger;

-- The journal names who acted, in which transaction.
SELECT count(*) AS entries, count(DISTINCT actor) AS actors, bool_and(actor = current_user) AS all_by_me,
       bool_and(txid IS NOT NULL) AS all_with_txid
FROM pay_journal;

SELECT * FROM pay_verify();
