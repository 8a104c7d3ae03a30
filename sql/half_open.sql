-- The incident: the bank charged, the response was lost, the caller retried.

SELECT pay_open('SHOP', 'ORDER-42', 99.90, 'EUR') AS bizno \gset

-- The first try: PROCEED, so the caller charges the bank ...
SELECT pay_begin(:'bizno', 99.90, 'EUR');
-- ... the bank charges, and its answer is lost.  The caller times out and
-- retries with the same bizNo: the payment is in flight, never charge again.
SELECT pay_begin(:'bizno', 99.90, 'EUR');

-- The reconciler finds it among the stuck payments and asks the bank.
SELECT count(*) AS stuck_for_an_hour FROM pay_stuck(interval '1 hour') WHERE bizno = :'bizno';
SELECT status, attempt FROM pay_stuck(interval '0 seconds', 1000) WHERE bizno = :'bizno';
-- The bank says it charged: settle it.
SELECT pay_succeed(:'bizno', 'BANK-7781', 1);

-- The caller's next retry gets the earlier success: no second charge.
SELECT pay_begin(:'bizno', 99.90, 'EUR');
SELECT count(*) AS still_stuck FROM pay_stuck(interval '0 seconds', 1000) WHERE bizno = :'bizno';

-- One PROCEED in the journal, and the ledger agrees with it.
SELECT count(*) FILTER (WHERE to_status = 'PROCESSING') AS charges,
       string_agg(coalesce(from_status::text, 'new') || '->' || to_status, ', ' ORDER BY seq) AS history
FROM pay_journal WHERE bizno = :'bizno';
SELECT * FROM pay_verify();
