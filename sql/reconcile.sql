-- Reconciliation against the bank's statement: every kind of discrepancy,
-- and settle => true for the PROCESSING payments the bank has answered.

-- The ledger: one payment per story.
SELECT pay_begin('R-MATCHED', 10, 'EUR'), pay_succeed('R-MATCHED', 'BANK-1', 1);
SELECT pay_begin('R-NOT-IN-BANK', 10, 'EUR'), pay_succeed('R-NOT-IN-BANK', 'BANK-2', 1);
SELECT pay_begin('R-DUPLICATE', 10, 'EUR'), pay_succeed('R-DUPLICATE', 'BANK-3', 1);
SELECT pay_begin('R-AMOUNT', 10, 'EUR'), pay_succeed('R-AMOUNT', 'BANK-4', 1);
SELECT pay_begin('R-CURRENCY', 10, 'EUR'), pay_succeed('R-CURRENCY', 'BANK-5', 1);
SELECT pay_begin('R-FAILED', 10, 'EUR'), pay_fail('R-FAILED', 'timeout', 1);
SELECT pay_begin('R-PENDING-OK', 10, 'EUR'), pay_begin('R-PENDING-NO', 10, 'EUR'),
       pay_begin('R-PENDING-QUIET', 10, 'EUR');
INSERT INTO pay_ledger (bizno, status, amount, currency) VALUES ('R-INIT', 'INIT', 10, 'EUR');

-- The statement, as loaded from the bank's CSV.
CREATE TABLE bank_statement (bizno text, amount numeric, currency text, status text, channel_ref text);
INSERT INTO bank_statement VALUES
    ('R-MATCHED', 10, 'EUR', 'SUCCESS', 'BANK-1'),
    ('R-DUPLICATE', 10, 'EUR', 'SUCCESS', 'BANK-3'),
    ('R-DUPLICATE', 10, 'EUR', 'SUCCESS', 'BANK-3b'),
    ('R-AMOUNT', 12, 'EUR', 'SUCCESS', 'BANK-4'),
    ('R-CURRENCY', 10, 'USD', 'SUCCESS', 'BANK-5'),
    ('R-FAILED', 10, 'EUR', 'SUCCESS', 'BANK-6'),
    ('R-PENDING-OK', 10, 'EUR', 'SUCCESS', 'BANK-7'),
    ('R-PENDING-NO', 10, 'EUR', 'FAILED', NULL),
    ('R-INIT', 10, 'EUR', 'SUCCESS', 'BANK-8'),
    ('R-UNKNOWN', 7, 'EUR', 'SUCCESS', 'BANK-9');

SELECT * FROM pay_reconcile('bank_statement') WHERE bizno LIKE 'R-%';

-- since limits MISSING_IN_BANK to ledger rows changed since then.
SELECT count(*) AS missing_in_bank_since_tomorrow
FROM pay_reconcile('bank_statement', since => now() + interval '1 day')
WHERE kind = 'MISSING_IN_BANK';

-- Settling touches only the UNRESOLVED_PROCESSING rows, through the guarded
-- transitions, and journals that reconciliation did it.  Since 1.3 it also
-- confirms the second charges the statement shows (quietly: the statement
-- is the confirmation, no WARNING), which from then on count as captured.
SELECT kind, bizno, ledger_status, detail
FROM pay_reconcile('bank_statement', settle => true)
WHERE kind = 'UNRESOLVED_PROCESSING';
SELECT channel_ref, confirmed FROM pay_second_charges() WHERE bizno = 'R-DUPLICATE';
SELECT captured, refundable FROM pay_refund_balance('R-DUPLICATE');
SELECT kind, detail FROM pay_reconcile('bank_statement') WHERE bizno = 'R-DUPLICATE';
SELECT bizno, status, channel_ref, last_error FROM pay_ledger
WHERE bizno IN ('R-PENDING-OK', 'R-PENDING-NO', 'R-PENDING-QUIET', 'R-FAILED') ORDER BY bizno;
SELECT bizno, from_status, to_status, note FROM pay_journal
WHERE bizno IN ('R-PENDING-OK', 'R-PENDING-NO') AND from_status = 'PROCESSING' ORDER BY bizno;
SELECT current_setting('idempotent_pay.journal_note') = '' AS note_restored;
SELECT count(*) AS unresolved_after_settling
FROM pay_reconcile('bank_statement') WHERE kind = 'UNRESOLVED_PROCESSING';

-- A statement that is not one: clear errors.
CREATE TABLE not_a_statement (id integer);
SELECT outcome($$SELECT count(*) FROM pay_reconcile('not_a_statement')$$) AS wrong_columns,
       outcome($$SELECT count(*) FROM pay_reconcile(NULL)$$) AS null_statement,
       outcome($$SELECT count(*) FROM pay_reconcile('no_such_table')$$) AS no_table;

-- A journal note for manual fixes, outside the API.
SET idempotent_pay.journal_note = 'ticket 4711: customer called';
SELECT pay_begin('R-MANUAL', 10, 'EUR');
RESET idempotent_pay.journal_note;
SELECT note FROM pay_journal WHERE bizno = 'R-MANUAL';

SELECT * FROM pay_verify();

-- Settling from a session that has not loaded the library yet (no C
-- function called, nothing preloaded): the first settling loads it.
SELECT pay_begin('R-FRESH', 10, 'EUR');
CREATE TABLE fresh_statement AS SELECT 'R-FRESH'::text AS bizno, 10::numeric AS amount,
    'EUR'::text AS currency, 'SUCCESS'::text AS status, 'BANK-FRESH'::text AS channel_ref;
\c
SELECT kind, bizno, ledger_status, detail FROM pay_reconcile('fresh_statement', settle => true)
WHERE bizno = 'R-FRESH';

-- The same through pay_reconcile_rows, the statement given as JSON rows
-- (what idempotent_pay_proxy sends each partition).
SELECT pay_begin('R-ROWS', 10, 'EUR');
SELECT kind, bizno, ledger_status, detail
FROM pay_reconcile_rows('[{"bizno": "R-ROWS", "amount": 10, "currency": "EUR", "status": "SUCCESS", "channel_ref": "BANK-ROWS"}]',
                        settle => true)
WHERE bizno = 'R-ROWS';
SELECT outcome($$SELECT count(*) FROM pay_reconcile_rows('{"bizno": "R-ROWS"}')$$) AS not_an_array;
SELECT * FROM pay_verify();
