-- The state machine, through the API and through raw SQL.

-- The legal edges; a NULL from is a new row.
SELECT * FROM pay_transitions;

SELECT f AS from_status,
       pay_allowed(f, 'INIT') AS "INIT",
       pay_allowed(f, 'PROCESSING') AS "PROCESSING",
       pay_allowed(f, 'SUCCESS') AS "SUCCESS",
       pay_allowed(f, 'FAILED') AS "FAILED"
FROM unnest(ARRAY[NULL, 'INIT', 'PROCESSING', 'SUCCESS', 'FAILED']::pay_status[]) AS f;
SELECT pay_allowed('INIT', NULL);

-- Every cell through pay_transition: the new status, or the refusal.
-- No-ops return the state and write nothing; refusals leave it unchanged.
-- Since 1.3 a payment enters SUCCESS only with the bank's reference, which
-- pay_transition cannot give: PROCESSING -> SUCCESS is legal, but through
-- pay_transition it is refused as pay_success_reference (pay_succeed
-- settles a payment).
SELECT f AS from_status, t AS to_status,
       outcome(format('SELECT pay_transition(%L, %L)',
                      payment_in('T-' || f || '-' || t, f), t)) AS outcome,
       standing('T-' || f || '-' || t) AS after
FROM unnest(enum_range(NULL::pay_status)) AS f,
     unnest(enum_range(NULL::pay_status)) AS t
ORDER BY f, t;

-- Every cell through a raw UPDATE of the ledger by a superuser.  A write
-- that leaves the status unchanged is not a transition, so PROCESSING ->
-- PROCESSING by UPDATE writes the row (and journals nothing).  An UPDATE to
-- SUCCESS sets the bank's reference in the same statement, as 1.3 requires.
SELECT f AS from_status, t AS to_status,
       outcome(format('UPDATE pay_ledger SET status = %L%s WHERE bizno = %L RETURNING status',
                      t, CASE WHEN t = 'SUCCESS' THEN ', channel_ref = coalesce(channel_ref, ''BANK-REF'')' END,
                      payment_in('U-' || f || '-' || t, f))) AS outcome,
       standing('U-' || f || '-' || t) AS after
FROM unnest(enum_range(NULL::pay_status)) AS f,
     unnest(enum_range(NULL::pay_status)) AS t
ORDER BY f, t;

-- New rows: INSERT starts in INIT or PROCESSING.
SELECT t AS to_status,
       outcome(format('INSERT INTO pay_ledger (bizno, status, amount, currency) VALUES (%L, %L, 10, ''EUR'') RETURNING status',
                      'N-' || t, t)) AS outcome,
       standing('N-' || t) AS after
FROM unnest(enum_range(NULL::pay_status)) AS t;
-- Since 1.3 a payment enters PROCESSING only with its amount and currency
-- (23502); an INIT row may wait for them.
SELECT outcome($$INSERT INTO pay_ledger (bizno, status) VALUES ('N-BARE', 'PROCESSING') RETURNING status$$) AS without_amount,
       outcome($$INSERT INTO pay_ledger (bizno, status, amount) VALUES ('N-BARE', 'PROCESSING', 10) RETURNING status$$) AS without_currency,
       standing('N-BARE') AS after;

-- What a refusal says: which transition, of which payment, and why.
UPDATE pay_ledger SET status = 'INIT' WHERE bizno = 'U-SUCCESS-INIT';
\echo :LAST_ERROR_SQLSTATE
SELECT pay_transition('T-FAILED-PROCESSING', 'PROCESSING');
SELECT pay_transition('T-PROCESSING-PROCESSING', 'PROCESSING');

-- The guard holds under session_replication_role = replica too.
SET session_replication_role = replica;
SELECT outcome($$UPDATE pay_ledger SET status = 'INIT' WHERE bizno = 'U-SUCCESS-INIT' RETURNING status$$);
SELECT outcome($$DELETE FROM pay_ledger WHERE bizno = 'U-SUCCESS-INIT' RETURNING status$$);
RESET session_replication_role;

-- Amount and currency are frozen while PROCESSING or SUCCESS.
SELECT outcome($$UPDATE pay_ledger SET amount = 5 WHERE bizno = 'T-PROCESSING-INIT' RETURNING amount$$);
SELECT outcome($$UPDATE pay_ledger SET currency = 'USD' WHERE bizno = 'T-SUCCESS-INIT' RETURNING currency$$);
SELECT outcome($$UPDATE pay_ledger SET amount = 5 WHERE bizno = 'T-FAILED-INIT' RETURNING amount$$);
SELECT outcome($$UPDATE pay_ledger SET amount = 6, currency = 'EUR' WHERE bizno = 'T-INIT-INIT' RETURNING amount$$);

-- The ledger keeps its derived columns: bizno, prefix, biz_id never change,
-- attempt counts entries into PROCESSING whatever a writer puts there.
SELECT outcome($$UPDATE pay_ledger SET bizno = 'other' WHERE bizno = 'T-INIT-INIT' RETURNING bizno$$);
UPDATE pay_ledger SET attempt = 99, status = 'PROCESSING' WHERE bizno = 'T-INIT-INIT';
SELECT bizno, status, attempt, processing_since IS NOT NULL AS stamped
FROM pay_ledger WHERE bizno = 'T-INIT-INIT';
SELECT outcome($$INSERT INTO pay_ledger (bizno, status) VALUES ('bad key!', 'INIT') RETURNING bizno$$);
SELECT outcome($$INSERT INTO pay_ledger (bizno, status) VALUES ('PAY-ORD001-20261130065033976-0000-366VRA691WVWE1', 'INIT') RETURNING bizno$$);
INSERT INTO pay_ledger (bizno, status) VALUES ('PAY-ORD001-20261130065033976-0000-366VRA691WVWE0', 'INIT');
SELECT prefix, biz_id FROM pay_ledger
WHERE bizno = 'PAY-ORD001-20261130065033976-0000-366VRA691WVWE0';

-- DELETE: INIT and FAILED rows may go, PROCESSING and SUCCESS rows stay;
-- TRUNCATE is refused.
SELECT outcome($$DELETE FROM pay_ledger WHERE bizno = 'N-INIT' RETURNING bizno$$);
SELECT outcome($$DELETE FROM pay_ledger WHERE bizno = 'T-FAILED-FAILED' RETURNING bizno$$);
SELECT outcome($$DELETE FROM pay_ledger WHERE bizno = 'N-PROCESSING' RETURNING bizno$$);
SELECT outcome($$DELETE FROM pay_ledger WHERE bizno = 'T-SUCCESS-SUCCESS' RETURNING bizno$$);
TRUNCATE pay_ledger;
\echo :LAST_ERROR_SQLSTATE

-- A multi-row statement fails whole: resetting FAILED rows is legal, but
-- the same statement also reaches SUCCESS rows.
SELECT status, count(*) FROM pay_ledger GROUP BY status ORDER BY status;
UPDATE pay_ledger SET status = 'INIT' WHERE status IN ('FAILED', 'SUCCESS');
SELECT status, count(*) FROM pay_ledger GROUP BY status ORDER BY status;

-- The journal is append-only.
SELECT outcome($$UPDATE pay_journal SET note = 'forged' WHERE seq = 1 RETURNING note$$);
SELECT outcome($$DELETE FROM pay_journal WHERE seq = 1 RETURNING seq$$);
TRUNCATE pay_journal;
\echo :LAST_ERROR_SQLSTATE

-- Every transition above is journaled: the ledger agrees with its journal.
SELECT * FROM pay_verify();
