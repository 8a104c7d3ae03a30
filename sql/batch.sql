-- Batches: pay_open_claim_many and pay_settle_many answer every input as
-- the single call answers it, in input order -- an action or a result, or
-- the refusal's SQLSTATE and constraint name -- and leave the ledger and
-- the journal as those calls would.  Two worlds built alike, under the
-- prefixes BTA (the batches) and BTS (the single calls, one after the other
-- in the same order), are compared answer by answer, row by row and journal
-- row by journal row, a bizNo standing for its business action.

-- The single calls, each caught as a caller would see its refusal; each
-- runs in a subtransaction that holds nothing else, which commits with the
-- statement, so claiming there is allowed.
CREATE FUNCTION single_open_claims(prefix text, biz_ids text[], amounts numeric[], currency text)
RETURNS TABLE (ord integer, biz_id text, bizno text, action pay_action, attempt integer,
               refused_with text, refused_by text)
SET idempotent_pay.claim_in_transaction = allow
LANGUAGE plpgsql AS $$
BEGIN
    FOR i IN 1 .. cardinality(biz_ids) LOOP
        ord := i;
        biz_id := biz_ids[i];
        BEGIN
            SELECT c.bizno, c.action, c.attempt INTO bizno, action, attempt
            FROM pay_open_claim(prefix, biz_ids[i], amounts[i], currency) AS c;
            refused_with := NULL;
            refused_by := NULL;
        EXCEPTION WHEN OTHERS THEN
            GET STACKED DIAGNOSTICS refused_with = RETURNED_SQLSTATE, refused_by = CONSTRAINT_NAME;
            bizno := NULL;
            action := NULL;
            attempt := NULL;
            refused_by := nullif(refused_by, '');
        END;
        RETURN NEXT;
    END LOOP;
END
$$;

CREATE FUNCTION single_settles(biznos text[], attempts bigint[], outcomes pay_status[],
                               channel_refs text[], reasons text[])
RETURNS TABLE (ord integer, bizno text, result text, refused_with text, refused_by text)
LANGUAGE plpgsql AS $$
BEGIN
    FOR i IN 1 .. cardinality(biznos) LOOP
        ord := i;
        bizno := biznos[i];
        refused_with := NULL;
        refused_by := NULL;
        BEGIN
            IF outcomes[i] = 'FAILED' THEN
                result := pay_fail(biznos[i], reasons[i], attempts[i]);
            ELSIF outcomes[i] = 'SUCCESS' THEN
                result := pay_succeed(biznos[i], channel_refs[i], attempts[i]);
            ELSIF outcomes[i] IS NULL THEN
                RAISE EXCEPTION USING ERRCODE = '22004';
            ELSE
                RAISE EXCEPTION USING ERRCODE = '22023';
            END IF;
        EXCEPTION WHEN OTHERS THEN
            GET STACKED DIAGNOSTICS refused_with = RETURNED_SQLSTATE, refused_by = CONSTRAINT_NAME;
            result := NULL;
            refused_by := nullif(refused_by, '');
        END;
        RETURN NEXT;
    END LOOP;
END
$$;

-- A world: a payment in each state, two of them settled in March 2025 and
-- archived below.
CREATE FUNCTION batch_world(prefix text) RETURNS void
SET idempotent_pay.claim_in_transaction = allow
LANGUAGE plpgsql AS $$
DECLARE
    b text;
BEGIN
    PERFORM pay_open(prefix, 'opened', 10, 'EUR');
    SELECT c.bizno INTO b FROM pay_open_claim(prefix, 'inflight', 10, 'EUR') AS c;
    SELECT c.bizno INTO b FROM pay_open_claim(prefix, 'paid', 10, 'EUR') AS c;
    PERFORM pay_succeed(b, 'R-paid', 1);
    SELECT c.bizno INTO b FROM pay_open_claim(prefix, 'declined', 10, 'EUR') AS c;
    PERFORM pay_fail(b, 'insufficient funds', 1);
    SELECT c.bizno INTO b FROM pay_open_claim(prefix, 'old-paid', 10, 'EUR') AS c;
    PERFORM pay_succeed(b, 'R-old-paid', 1);
    SELECT c.bizno INTO b FROM pay_open_claim(prefix, 'old-declined', 10, 'EUR') AS c;
    PERFORM pay_fail(b, 'expired card', 1);
END
$$;
SELECT batch_world('BTA'), batch_world('BTS');
SET session_replication_role = replica;
UPDATE pay_ledger SET updated_at = '2025-03-12 12:00+00'
WHERE prefix IN ('BTA', 'BTS') AND biz_id LIKE 'old-%';
RESET session_replication_role;
SELECT pay_archive('2025-04-01') > 0 AS archived;

-- The bizNo of business action (prefix, biz_id), in the ledger or archived.
CREATE FUNCTION world_bizno(world text, id text) RETURNS text
LANGUAGE sql AS $$
    SELECT bizno FROM pay_ledger WHERE prefix = world AND biz_id = id
    UNION ALL
    SELECT bizno FROM pay_ledger_archive WHERE prefix = world AND biz_id = id
$$;

-- 1. Claims: new, the same new key twice, a duplicate of each state,
-- archived, and refused -- a frozen amount, the same key twice with
-- another amount, a NULL amount and biz_id, a negative amount, a biz_id
-- that is a bizNo, one of too many characters, another amount of an INIT
-- payment (idempotent_pay.parameter_change); a biz_id shaped like a bizNo
-- whose check character fails is an ordinary biz_id.
CREATE TABLE claim_inputs (ord integer, biz_id text, amount numeric);
INSERT INTO claim_inputs VALUES
    (1, 'new-1', 10), (2, 'paid', 10), (3, 'inflight', 10), (4, 'declined', 10),
    (5, 'opened', 10), (6, 'old-paid', 10), (7, 'old-declined', 10), (8, 'paid', 99),
    (9, 'new-1', 10), (10, 'new-2', NULL), (11, NULL, 10), (12, 'new-3', -5),
    (13, 'new-4', 10), (14, 'new-4', 12), (15, 'new-5', 10),
    (16, 'BTA-x-20250101000000000-0000-G00000000000', 10), (17, repeat('x', 200), 10),
    (18, 'opened', 11), (19, 'new-5', 10), (20, pay_bizno('BTZ', 'elsewhere'), 10);
CREATE TABLE claim_answers AS
SELECT 'batch' AS side, a.ord::integer, a.biz_id, a.bizno = world_bizno('BTA', a.biz_id) AS bizno_is_its_own,
       a.action, a.attempt, a.sqlstate, a.constraint_name
FROM pay_open_claim_many('BTA', ARRAY(SELECT biz_id FROM claim_inputs ORDER BY ord),
                         ARRAY(SELECT amount FROM claim_inputs ORDER BY ord), 'EUR')
     WITH ORDINALITY AS a(biz_id, bizno, action, attempt, sqlstate, constraint_name, ord);
INSERT INTO claim_answers
SELECT 'single', s.ord, s.biz_id, s.bizno = world_bizno('BTS', s.biz_id), s.action, s.attempt,
       s.refused_with, s.refused_by
FROM single_open_claims('BTS', ARRAY(SELECT biz_id FROM claim_inputs ORDER BY ord),
                        ARRAY(SELECT amount FROM claim_inputs ORDER BY ord), 'EUR') AS s;
SELECT ord, left(biz_id, 12) AS biz_id, bizno_is_its_own, action, attempt, sqlstate, constraint_name
FROM claim_answers WHERE side = 'batch' ORDER BY ord;

-- 2. Settlements: a success, its duplicate, a second charge, a failure, a
-- failure then a success of the same payment, a stale attempt, one never
-- claimed, an archived payment, an unknown one, a NULL key, attempt,
-- reference and outcome, an outcome that is no settlement, an attempt
-- beyond an integer.
CREATE TABLE settle_inputs (ord integer, biz_id text, attempt bigint, outcome pay_status,
                            channel_ref text, reason text);
INSERT INTO settle_inputs VALUES
    (1, 'new-1', 1, 'SUCCESS', 'R-new-1', NULL), (2, 'new-1', 1, 'SUCCESS', 'R-new-1', NULL),
    (3, 'new-1', 1, 'SUCCESS', 'R-new-1-again', NULL), (4, 'inflight', 1, 'FAILED', NULL, 'declined'),
    (5, 'new-4', 1, 'FAILED', 'ignored', 'timeout'), (6, 'new-4', 1, 'SUCCESS', 'R-new-4', NULL),
    (7, 'opened', 0, 'SUCCESS', 'R-opened', NULL), (8, 'opened', 7, 'SUCCESS', 'R-opened', NULL),
    (9, 'old-paid', 1, 'SUCCESS', 'R-old-paid', NULL), (10, 'unknown', 1, 'SUCCESS', 'R-x', NULL),
    (11, NULL, 1, 'SUCCESS', 'R-x', NULL), (12, 'new-5', NULL, 'SUCCESS', 'R-new-5', NULL),
    (13, 'new-5', 1, 'SUCCESS', NULL, NULL), (14, 'new-5', 1, NULL, 'R-new-5', NULL),
    (15, 'new-5', 1, 'PROCESSING', 'R-new-5', NULL), (16, 'new-5', 2147483648, 'SUCCESS', 'R-new-5', NULL),
    (17, 'new-5', 1, 'SUCCESS', 'R-new-5', NULL), (18, 'paid', 1, 'FAILED', NULL, 'late decline');
CREATE FUNCTION settle_keys(world text) RETURNS text[]
LANGUAGE sql AS $$
    SELECT ARRAY(SELECT CASE WHEN biz_id = 'unknown' THEN world || '-unknown'
                             ELSE world_bizno(world, biz_id) END
                 FROM settle_inputs ORDER BY ord)
$$;
-- (the WARNING of the second charge, which names the bizNo, aside)
SET client_min_messages = error;
CREATE TABLE settle_answers AS
SELECT 'batch' AS side, a.ord::integer, a.bizno IS NOT DISTINCT FROM (settle_keys('BTA'))[a.ord] AS bizno_is_input,
       a.result, a.sqlstate, a.constraint_name
FROM pay_settle_many(settle_keys('BTA'), ARRAY(SELECT attempt FROM settle_inputs ORDER BY ord),
                     ARRAY(SELECT outcome FROM settle_inputs ORDER BY ord),
                     ARRAY(SELECT channel_ref FROM settle_inputs ORDER BY ord),
                     ARRAY(SELECT reason FROM settle_inputs ORDER BY ord))
     WITH ORDINALITY AS a(bizno, result, sqlstate, constraint_name, ord);
INSERT INTO settle_answers
SELECT 'single', s.ord, s.bizno IS NOT DISTINCT FROM (settle_keys('BTS'))[s.ord], s.result, s.refused_with,
       s.refused_by
FROM single_settles(settle_keys('BTS'), ARRAY(SELECT attempt FROM settle_inputs ORDER BY ord),
                    ARRAY(SELECT outcome FROM settle_inputs ORDER BY ord),
                    ARRAY(SELECT channel_ref FROM settle_inputs ORDER BY ord),
                    ARRAY(SELECT reason FROM settle_inputs ORDER BY ord)) AS s;
RESET client_min_messages;
SELECT s.ord, i.biz_id, s.bizno_is_input, s.result, s.sqlstate, s.constraint_name
FROM settle_answers AS s JOIN settle_inputs AS i USING (ord) WHERE side = 'batch' ORDER BY ord;

-- 3. The comparison: every answer, ledger row and journal row of one world
-- that the other lacks (none), and how many were compared.
CREATE VIEW world_ledgers AS
SELECT prefix AS world, biz_id, status, amount, currency, attempt, channel_ref, last_error, note,
       response, processing_since IS NULL AS never_processing
FROM pay_ledger WHERE prefix IN ('BTA', 'BTS');
CREATE VIEW world_journals AS
SELECT l.prefix AS world, l.biz_id,
       row_number() OVER (PARTITION BY j.bizno ORDER BY j.seq) AS step,
       j.attempt, j.from_status, j.to_status, j.amount, j.currency, j.actor, j.note,
       j.channel_ref, j.second_charge, j.response_digest
FROM pay_journal AS j JOIN pay_ledger AS l USING (bizno) WHERE l.prefix IN ('BTA', 'BTS');
CREATE FUNCTION world_differences(OUT what text, OUT differences bigint, OUT compared bigint)
RETURNS SETOF record LANGUAGE sql AS $$
    SELECT 'claim answers',
           (SELECT count(*) FROM ((SELECT ord, biz_id, bizno_is_its_own, action, attempt, sqlstate, constraint_name
                                   FROM claim_answers WHERE side = 'batch'
                                   EXCEPT SELECT ord, biz_id, bizno_is_its_own, action, attempt, sqlstate, constraint_name
                                   FROM claim_answers WHERE side = 'single')
                                  UNION ALL
                                  (SELECT ord, biz_id, bizno_is_its_own, action, attempt, sqlstate, constraint_name
                                   FROM claim_answers WHERE side = 'single'
                                   EXCEPT SELECT ord, biz_id, bizno_is_its_own, action, attempt, sqlstate, constraint_name
                                   FROM claim_answers WHERE side = 'batch')) AS d),
           (SELECT count(*) FROM claim_answers WHERE side = 'batch')
    UNION ALL
    SELECT 'settle answers',
           (SELECT count(*) FROM ((SELECT ord, bizno_is_input, result, sqlstate, constraint_name
                                   FROM settle_answers WHERE side = 'batch'
                                   EXCEPT SELECT ord, bizno_is_input, result, sqlstate, constraint_name
                                   FROM settle_answers WHERE side = 'single')
                                  UNION ALL
                                  (SELECT ord, bizno_is_input, result, sqlstate, constraint_name
                                   FROM settle_answers WHERE side = 'single'
                                   EXCEPT SELECT ord, bizno_is_input, result, sqlstate, constraint_name
                                   FROM settle_answers WHERE side = 'batch')) AS d),
           (SELECT count(*) FROM settle_answers WHERE side = 'batch')
    UNION ALL
    SELECT 'ledger rows',
           (SELECT count(*) FROM ((SELECT biz_id, status, amount, currency, attempt, channel_ref, last_error, note,
                                          response, never_processing FROM world_ledgers WHERE world = 'BTA'
                                   EXCEPT SELECT biz_id, status, amount, currency, attempt, channel_ref, last_error,
                                          note, response, never_processing FROM world_ledgers WHERE world = 'BTS')
                                  UNION ALL
                                  (SELECT biz_id, status, amount, currency, attempt, channel_ref, last_error, note,
                                          response, never_processing FROM world_ledgers WHERE world = 'BTS'
                                   EXCEPT SELECT biz_id, status, amount, currency, attempt, channel_ref, last_error,
                                          note, response, never_processing FROM world_ledgers WHERE world = 'BTA')) AS d),
           (SELECT count(*) FROM world_ledgers WHERE world = 'BTA')
    UNION ALL
    SELECT 'journal rows',
           (SELECT count(*) FROM ((SELECT biz_id, step, attempt, from_status, to_status, amount, currency, actor, note,
                                          channel_ref, second_charge, response_digest
                                   FROM world_journals WHERE world = 'BTA'
                                   EXCEPT SELECT biz_id, step, attempt, from_status, to_status, amount, currency,
                                          actor, note, channel_ref, second_charge, response_digest
                                   FROM world_journals WHERE world = 'BTS')
                                  UNION ALL
                                  (SELECT biz_id, step, attempt, from_status, to_status, amount, currency, actor, note,
                                          channel_ref, second_charge, response_digest
                                   FROM world_journals WHERE world = 'BTS'
                                   EXCEPT SELECT biz_id, step, attempt, from_status, to_status, amount, currency,
                                          actor, note, channel_ref, second_charge, response_digest
                                   FROM world_journals WHERE world = 'BTA')) AS d),
           (SELECT count(*) FROM world_journals WHERE world = 'BTA')
$$;
SELECT * FROM world_differences();
-- the comparison sees a difference: an answer altered, and one more call
-- in the single calls' world (a failure: a ledger row and a journal row)
UPDATE claim_answers SET attempt = 2 WHERE side = 'single' AND ord = 1;
SELECT pay_fail(world_bizno('BTS', 'declined'), 'regress: the comparison can fail', 2);
SELECT * FROM world_differences();

-- 4. Refusals of the whole call: nothing is run.
SELECT outcome($$SELECT count(*) FROM pay_open_claim_many('BTA', ARRAY['a', 'b'], ARRAY[1], 'EUR')$$) AS unequal_lengths,
       outcome($$SELECT count(*) FROM pay_open_claim_many('BTA', NULL, ARRAY[1], 'EUR')$$) AS null_biz_ids,
       outcome($$SELECT count(*) FROM pay_open_claim_many('BTA', ARRAY['a'], NULL, 'EUR')$$) AS null_amounts,
       outcome($$SELECT count(*) FROM pay_open_claim_many(NULL, ARRAY['a'], ARRAY[1], 'EUR')$$) AS null_prefix,
       outcome($$SELECT count(*) FROM pay_open_claim_many('BTA', ARRAY['a'], ARRAY[1], NULL)$$) AS null_currency,
       outcome($$SELECT count(*) FROM pay_open_claim_many('BTA', ARRAY[['a']], ARRAY[[1]], 'EUR')$$) AS two_dimensions;
SELECT outcome($$SELECT count(*) FROM pay_settle_many(ARRAY['a'], ARRAY[1, 2], ARRAY['SUCCESS']::pay_status[], ARRAY['r'], ARRAY[NULL])$$) AS unequal_lengths,
       outcome($$SELECT count(*) FROM pay_settle_many(ARRAY['a'], ARRAY[1], ARRAY['SUCCESS']::pay_status[], ARRAY['r'], NULL)$$) AS null_reasons,
       outcome($$SELECT count(*) FROM pay_settle_many(ARRAY['a'], NULL, ARRAY['SUCCESS']::pay_status[], ARRAY['r'], ARRAY[NULL])$$) AS null_attempts;
SELECT error_message($$SELECT count(*) FROM pay_open_claim_many('BTA', ARRAY['a', 'b'], ARRAY[1], 'EUR')$$);
SELECT count(*) AS empty_batch FROM pay_open_claim_many('BTA', '{}', '{}', 'EUR');
SELECT count(*) AS empty_batch FROM pay_settle_many('{}', '{}', '{}', '{}', '{}');
-- the batch's claims are refused in a transaction block, as a single claim is
BEGIN;
SELECT outcome($$SELECT count(*) FROM pay_open_claim_many('BTA', ARRAY['new-9'], ARRAY[1], 'EUR')$$) AS allowed_by_outcome;
ROLLBACK;
BEGIN;
SELECT count(*) FROM pay_open_claim_many('BTA', ARRAY['new-9'], ARRAY[1], 'EUR');
ROLLBACK;
-- settlements are not claims: a transaction block may hold them
BEGIN;
SELECT result, sqlstate FROM pay_settle_many(ARRAY[world_bizno('BTA', 'new-5')], ARRAY[1], ARRAY['SUCCESS']::pay_status[],
                                             ARRAY['R-new-5'], ARRAY[NULL]);
ROLLBACK;
-- an integer[] of attempts resolves to the bigint[] parameter
SELECT pg_typeof(a.result) FROM pay_settle_many(ARRAY[world_bizno('BTA', 'new-5')], ARRAY[1]::integer[],
                                                ARRAY['SUCCESS']::pay_status[], ARRAY['R-new-5'], ARRAY[NULL]) AS a;

-- 5. A refusal in the middle of a thousand claims leaves the others to run:
-- every 100th input is refused, the rest proceed, each once.
SELECT action, sqlstate, count(*)
FROM pay_open_claim_many('BTA', ARRAY(SELECT 'bulk-' || g FROM generate_series(1, 1000) AS g),
                         ARRAY(SELECT CASE WHEN g % 100 = 0 THEN -1 ELSE 5 END FROM generate_series(1, 1000) AS g)::numeric[],
                         'EUR')
GROUP BY 1, 2 ORDER BY 1, 2;
SELECT count(*) AS bulk_in_ledger, count(*) FILTER (WHERE status = 'PROCESSING' AND attempt = 1) AS processing_once
FROM pay_ledger WHERE prefix = 'BTA' AND biz_id LIKE 'bulk-%';

-- Refusals of the ledger's state in the middle of writes (each one rolls
-- its segment back, and the inputs before it run again): every 100th
-- input another amount for a payment in flight, among the new ones in the
-- order the batch runs them (by key).  Every new payment is claimed once
-- and journaled once per step.
SELECT action, sqlstate, constraint_name, count(*)
FROM pay_open_claim_many('BTA', ARRAY(SELECT CASE WHEN g % 100 = 0 THEN 'bulk-' || (g - 1) ELSE 'bulk-' || g || 'b' END
                                      FROM generate_series(1, 1000) AS g),
                         ARRAY(SELECT CASE WHEN g % 100 = 0 THEN 99 ELSE 5 END FROM generate_series(1, 1000) AS g)::numeric[],
                         'EUR')
GROUP BY 1, 2, 3 ORDER BY 1, 2, 3;
SELECT count(*) AS new_in_ledger, count(*) FILTER (WHERE l.status = 'PROCESSING' AND l.attempt = 1) AS processing_once,
       sum((SELECT count(*) FROM pay_journal AS j WHERE j.bizno = l.bizno)) AS journal_rows
FROM pay_ledger AS l WHERE prefix = 'BTA' AND biz_id LIKE 'bulk-%b';

-- 6. A DBA's partial unique index that the first claim of a segment has no
-- entry in and a later one has: the later one's row gets its entry (the
-- segment's writes share their open indexes, not their rows' predicates),
-- so the next claim of the same amount is refused by it, as a single
-- claim would be; the claims after it proceed.
CREATE UNIQUE INDEX batch_large_amount ON pay_ledger (amount) WHERE amount = 4321;
SELECT biz_id, action, attempt, sqlstate, constraint_name
FROM pay_open_claim_many('BTA', ARRAY['part-1', 'part-2', 'part-3', 'part-4'],
                         ARRAY[5, 4321, 4321, 6]::numeric[], 'EUR')
ORDER BY biz_id;
SELECT biz_id, status, amount FROM pay_ledger WHERE prefix = 'BTA' AND biz_id LIKE 'part-%' ORDER BY biz_id;
DROP INDEX batch_large_amount;

DROP FUNCTION world_differences();
DROP VIEW world_ledgers, world_journals;
DROP TABLE claim_inputs, claim_answers, settle_inputs, settle_answers;
DROP FUNCTION settle_keys(text), world_bizno(text, text), batch_world(text),
    single_open_claims(text, text[], numeric[], text), single_settles(text[], bigint[], pay_status[], text[], text[]);
