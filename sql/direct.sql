-- What a DBA adds to the ledger acts on the API's writes.  A new payment
-- (pay_begin, pay_claim, pay_open) and a settlement (pay_succeed, pay_fail)
-- go straight into heap and indexes while the ledger holds only what that
-- write can honour itself -- built-in defaults, domain checks, NOT NULL,
-- indexes of built-in functions; anything else (a DBA's trigger, a CHECK
-- constraint, a function of the DBA's in a default, domain or index) sends
-- them through SQL run on search_path = <extension schema>, pg_temp.  Either
-- way the user sees one behaviour: every default filled, every check
-- enforced, every index found, whatever the caller's search_path.

-- Claims here run inside transaction blocks or subtransactions on purpose
-- (rolled back, or caught); the refusal of that is claim_durable's test.
SET idempotent_pay.claim_in_transaction = allow;

-- The DBA's DDL on the extension's tables below is maintenance, which
-- idempotent_pay.maintenance lets through (and pay_maintenance_log records).
SET idempotent_pay.maintenance = on;

-- The rows the ledger and journal hold now: a refused write adds none.
CREATE FUNCTION table_rows() RETURNS text
LANGUAGE sql AS $$
    SELECT 'ledger:' || (SELECT count(*) FROM pay_ledger) || ' journal:' || (SELECT count(*) FROM pay_journal)
$$;

-- 1. Defaults.  A column the DBA adds gets its default on every new
-- payment: a constant, a volatile built-in evaluated per row at write time,
-- and a function of the DBA's that resolves its own names -- on the
-- extension's path, not the caller's.
ALTER TABLE pay_ledger ADD COLUMN region text NOT NULL DEFAULT 'eu';
SELECT pay_begin('D-REGION-1', 10, 'EUR') AS begin,
       (pay_claim('D-REGION-2', 10, 'EUR')).action AS claim,
       pay_open('DREGION', 'ORDER-1', 10, 'EUR') IS NOT NULL AS opened;
SELECT coalesce(prefix || '/' || biz_id, bizno) AS payment, region FROM pay_ledger
WHERE bizno IN ('D-REGION-1', 'D-REGION-2') OR prefix = 'DREGION' ORDER BY 1;
-- A new default is the one used: not the value stored for older rows.
ALTER TABLE pay_ledger ALTER COLUMN region SET DEFAULT 'us';
SELECT pay_begin('D-REGION-3', 10, 'EUR') AS begin, pay_succeed('D-REGION-3', 'R3', 1) AS succeed;
SELECT bizno, region FROM pay_ledger WHERE bizno IN ('D-REGION-1', 'D-REGION-3') ORDER BY bizno;
-- Its NOT NULL holds when the default is gone: refused, nothing written.
ALTER TABLE pay_ledger ALTER COLUMN region DROP DEFAULT;
SELECT table_rows() AS before \gset
SELECT outcome($$SELECT pay_begin('D-REGION-4', 10, 'EUR')$$) AS begin_without_region,
       outcome($$SELECT pay_claim('D-REGION-4', 10, 'EUR')$$) AS claim_without_region;
SELECT error_message($$SELECT pay_begin('D-REGION-4', 10, 'EUR')$$) AS message;
SELECT table_rows() = :'before' AS nothing_written;
ALTER TABLE pay_ledger DROP COLUMN region;

-- clock_timestamp(): evaluated when each row is written, once per row.
ALTER TABLE pay_ledger ADD COLUMN stamped_at timestamptz DEFAULT pg_catalog.clock_timestamp();
BEGIN;
SELECT pay_begin('D-STAMP-1', 10, 'EUR') AS first, pay_begin('D-STAMP-2', 10, 'EUR') AS second;
SELECT count(*) AS stamped, count(DISTINCT stamped_at) AS distinct_stamps,
       bool_and(stamped_at >= now() AND stamped_at <= clock_timestamp()) AS stamped_in_this_transaction
FROM pay_ledger WHERE bizno IN ('D-STAMP-1', 'D-STAMP-2');
COMMIT;
ALTER TABLE pay_ledger DROP COLUMN stamped_at;

-- A default of the DBA's: a SQL function that reads a table and calls a
-- function by unqualified names, found in the extension's schema.  The
-- caller's search_path lacks that schema: the names still resolve.
CREATE TABLE dba_branches (code text PRIMARY KEY, label text NOT NULL);
INSERT INTO dba_branches VALUES ('eu', 'Europe (from dba_branches)');
CREATE FUNCTION dba_branch_code() RETURNS text LANGUAGE sql STABLE AS $$ SELECT 'eu'::text $$;
CREATE FUNCTION dba_branch_label() RETURNS text LANGUAGE sql STABLE AS $$
    SELECT label FROM dba_branches WHERE code = dba_branch_code()
$$;
ALTER TABLE pay_ledger ADD COLUMN branch text DEFAULT dba_branch_label();
SELECT pay_begin('D-BRANCH-1', 10, 'EUR') AS begin;
SET search_path = pg_catalog;
SELECT public.pay_begin('D-BRANCH-2', 10, 'EUR') AS begin_on_pg_catalog_path,
       (public.pay_claim('D-BRANCH-3', 10, 'EUR')).action AS claim_on_pg_catalog_path;
RESET search_path;
SELECT bizno, branch FROM pay_ledger WHERE bizno LIKE 'D-BRANCH-%' ORDER BY bizno;
SELECT standing('D-BRANCH-2') AS branch_2, standing('D-BRANCH-3') AS branch_3;
ALTER TABLE pay_ledger DROP COLUMN branch;
DROP FUNCTION dba_branch_label(), dba_branch_code();
DROP TABLE dba_branches;

-- A column of the DBA's own domain: the domain's default fills it and the
-- domain's NOT NULL holds, as for any INSERT that omits the column.
CREATE DOMAIN dba_region AS text NOT NULL DEFAULT 'eu';
ALTER TABLE pay_ledger ADD COLUMN region dba_region;
SELECT pay_begin('D-DOMAIN-1', 10, 'EUR') AS begin;
SELECT region, region IS NULL AS null_in_not_null_domain FROM pay_ledger WHERE bizno = 'D-DOMAIN-1';
INSERT INTO pay_ledger (bizno, status) VALUES ('D-DOMAIN-RAW', 'INIT');
SELECT region FROM pay_ledger WHERE bizno = 'D-DOMAIN-RAW';
ALTER TABLE pay_ledger DROP COLUMN region;
DROP DOMAIN dba_region;

-- A default that resolves a name when it runs (the late-binding
-- nextval('seq'::text::regclass)) resolves it on the extension's path,
-- never on the caller's: a temporary sequence of the same name is not used.
CREATE SEQUENCE dba_serial;
ALTER TABLE pay_ledger ADD COLUMN serial_no bigint DEFAULT nextval('dba_serial'::text::regclass);
CREATE TEMP SEQUENCE dba_serial START 666;
SELECT pay_begin('D-SERIAL-1', 10, 'EUR') AS begin;
SELECT l.serial_no = s.last_value AS from_the_dba_sequence,
       (SELECT is_called FROM pg_temp.dba_serial) AS callers_sequence_used
FROM pay_ledger AS l, public.dba_serial AS s WHERE l.bizno = 'D-SERIAL-1';
ALTER TABLE pay_ledger DROP COLUMN serial_no;
DROP SEQUENCE pg_temp.dba_serial;
DROP SEQUENCE public.dba_serial;

-- 2. Domains.  A CHECK the DBA adds to pay_amount or pay_currency refuses
-- a new payment (23514, naming it) and writes nothing; one on a function
-- of the DBA's too.  (The amount limits are NOT VALID: the ledger may hold
-- larger amounts already; every new write is held to them all the same.)
-- The currency refused is one ISO 4217 knows, which the shop does not take.
ALTER DOMAIN pay_amount ADD CONSTRAINT dba_amount_limit CHECK (VALUE < 1000000) NOT VALID;
ALTER DOMAIN pay_currency ADD CONSTRAINT dba_unaccepted_currency CHECK (VALUE <> 'CHF');
SELECT table_rows() AS before \gset
SELECT outcome($$SELECT pay_begin('D-BIG-1', 5000000, 'EUR')$$) AS begin_big,
       outcome($$SELECT pay_claim('D-BIG-1', 5000000, 'EUR')$$) AS claim_big,
       outcome($$SELECT pay_open('DBIG', 'ORDER-1', 5000000, 'EUR')$$) AS open_big,
       outcome($$SELECT pay_begin('D-CHF-1', 10, 'CHF')$$) AS begin_chf;
SELECT error_message($$SELECT pay_begin('D-BIG-1', 5000000, 'EUR')$$) AS message;
SELECT table_rows() = :'before' AS nothing_written, standing('D-BIG-1') AS big_1;
-- A payment that brings no currency needs no CHECK of the DBA's: since 1.3
-- the API refuses it (22004) and writes nothing.
SELECT outcome($$SELECT pay_begin('D-NOCUR-1', 10)$$) AS begin_without_currency,
       outcome($$SELECT pay_claim('D-NOCUR-1', 10)$$) AS claim_without_currency,
       outcome($$SELECT pay_open('DNOCUR', 'ORDER-1', 10)$$) AS open_without_currency;
SELECT table_rows() = :'before' AS nothing_written, standing('D-NOCUR-1') AS nocur_1;
-- Within the limit, a payment goes through.
SELECT pay_begin('D-BIG-2', 999999.99, 'EUR') AS begin, pay_fail('D-BIG-2', 'declined', 1) AS fail;
-- A FAILED payment retried with a new amount, where the operator allows it
-- (1.4 refuses another amount by default): the same check.
SET idempotent_pay.parameter_change = allow;
SELECT outcome($$SELECT pay_begin('D-BIG-2', 5000000, 'EUR')$$) AS retry_big;
RESET idempotent_pay.parameter_change;
SELECT standing('D-BIG-2') AS big_2;
ALTER DOMAIN pay_amount DROP CONSTRAINT dba_amount_limit;
ALTER DOMAIN pay_currency DROP CONSTRAINT dba_unaccepted_currency;

CREATE FUNCTION dba_amount_allowed(amount numeric) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$ SELECT amount < 1000000 $$;
ALTER DOMAIN pay_amount ADD CONSTRAINT dba_amount_allowed CHECK (dba_amount_allowed(VALUE)) NOT VALID;
SELECT table_rows() AS before \gset
SELECT outcome($$SELECT pay_begin('D-BIG-3', 5000000, 'EUR')$$) AS begin_big,
       outcome($$SELECT pay_claim('D-BIG-3', 5000000, 'EUR')$$) AS claim_big,
       outcome($$SELECT pay_open('DBIG', 'ORDER-3', 5000000, 'EUR')$$) AS open_big;
SELECT table_rows() = :'before' AS nothing_written, standing('D-BIG-3') AS big_3;
SELECT pay_begin('D-BIG-4', 999999.99, 'EUR') AS begin_within_limit;
ALTER DOMAIN pay_amount DROP CONSTRAINT dba_amount_allowed;
DROP FUNCTION dba_amount_allowed(numeric);

-- 3. A CHECK constraint on the ledger (NOT VALID, as above): new payments
-- and settlements are held to it (23514, naming it), nothing written.
ALTER TABLE pay_ledger ADD CONSTRAINT dba_amount_cap CHECK (amount < 1000000) NOT VALID;
SELECT table_rows() AS before \gset
SELECT outcome($$SELECT pay_begin('D-CAP-1', 5000000, 'EUR')$$) AS begin_big,
       outcome($$SELECT pay_claim('D-CAP-1', 5000000, 'EUR')$$) AS claim_big;
SELECT table_rows() = :'before' AS nothing_written, standing('D-CAP-1') AS cap_1;
SELECT pay_begin('D-CAP-2', 10, 'EUR') AS begin_small;
ALTER TABLE pay_ledger DROP CONSTRAINT dba_amount_cap;
-- A success must carry a reference in the bank's format (NOT VALID: older
-- rows may have another).  That it carries one at all, 1.3 requires itself.
ALTER TABLE pay_ledger ADD CONSTRAINT dba_success_ref_format
    CHECK (status <> 'SUCCESS' OR channel_ref LIKE 'D-CAP-BANK-%') NOT VALID;
SELECT table_rows() AS before \gset
SELECT outcome($$SELECT pay_succeed('D-CAP-2', 'OTHER-BANK-2', 1)$$) AS succeed_with_other_ref;
SELECT table_rows() = :'before' AS nothing_written, standing('D-CAP-2') AS cap_2;
SELECT pay_succeed('D-CAP-2', 'D-CAP-BANK-2', 1) AS succeed_with_ref;
ALTER TABLE pay_ledger DROP CONSTRAINT dba_success_ref_format;

-- 4. Indexes.  A DBA's index holds every payment the API writes, and a
-- unique one refuses a clash (23505, naming it) -- on built-in functions
-- and on functions of the DBA's.
SET enable_seqscan = off;
-- A partial unique index on the bank's reference, of built-in operators:
-- one reference settles one payment.
CREATE UNIQUE INDEX dba_channel_ref_key ON pay_ledger (channel_ref) WHERE channel_ref LIKE 'D-BANK-%';
SELECT pay_begin('D-REF-1', 10, 'EUR') AS begin_1, pay_begin('D-REF-2', 10, 'EUR') AS begin_2,
       pay_begin('D-REF-3', 10, 'EUR') AS begin_3;
SELECT pay_succeed('D-REF-1', 'D-BANK-1', 1) AS succeed_1;
SELECT outcome($$SELECT pay_succeed('D-REF-2', 'D-BANK-1', 1)$$) AS same_reference_again;
SELECT standing('D-REF-2') AS ref_2;
SELECT pay_succeed('D-REF-2', 'D-BANK-2', 1) AS succeed_2, pay_succeed('D-REF-3', 'OTHER-BANK-3', 1) AS outside_predicate;
SELECT count(*) AS found_through_index FROM pay_ledger
WHERE channel_ref LIKE 'D-BANK-%' AND channel_ref IN ('D-BANK-1', 'D-BANK-2');
DROP INDEX dba_channel_ref_key;

-- On a function of the DBA's (pinned to its own search_path, as a DBA
-- should write it): found through it; unique, 'd_norm_abc' clashes with
-- 'D-NORM-ABC'.
CREATE FUNCTION dba_norm(key text) RETURNS text
LANGUAGE sql IMMUTABLE SET search_path = pg_catalog AS $$ SELECT upper(replace(key, '_', '-')) $$;
CREATE INDEX dba_ledger_norm_idx ON pay_ledger (dba_norm(bizno));
SELECT pay_begin('d_norm_1', 10, 'EUR') AS begin, (pay_claim('d_norm_2', 10, 'EUR')).action AS claim,
       pay_succeed('d_norm_1', 'N1', 1) AS succeed, pay_fail('d_norm_2', 'declined', 1) AS fail;
SELECT dba_norm(bizno) AS normalized, status FROM pay_ledger
WHERE dba_norm(bizno) IN ('D-NORM-1', 'D-NORM-2') ORDER BY 1;
DROP INDEX dba_ledger_norm_idx;
CREATE UNIQUE INDEX dba_ledger_norm_key ON pay_ledger (dba_norm(bizno)) WHERE dba_norm(bizno) LIKE 'D-NORM-A%';
SELECT pay_begin('D-NORM-ABC', 10, 'EUR') AS first;
SELECT table_rows() AS before \gset
SELECT outcome($$SELECT pay_begin('d_norm_abc', 10, 'EUR')$$) AS begin_clash,
       outcome($$SELECT pay_claim('d-norm-abc', 10, 'EUR')$$) AS claim_clash;
SELECT table_rows() = :'before' AS nothing_written, standing('d_norm_abc') AS clash;
SELECT count(*) AS found_through_index FROM pay_ledger WHERE dba_norm(bizno) LIKE 'D-NORM-A%' AND dba_norm(bizno) = 'D-NORM-ABC';
DROP INDEX dba_ledger_norm_key;
DROP FUNCTION dba_norm(text);

-- A BRIN index on updated_at, which every settlement moves on.  Settling
-- changes no column another index holds, so from PostgreSQL 16 on the
-- update is HOT and only the summarizing index is owed the new value; with
-- the page range summarized before, a scan through the index finds the
-- settled payment only if it got it.
CREATE INDEX dba_ledger_updated_brin ON pay_ledger USING brin (updated_at) WITH (pages_per_range = 1);
SELECT pay_begin('D-BRIN-1', 10, 'EUR') AS begin;
SELECT brin_summarize_new_values('dba_ledger_updated_brin') >= 0 AS summarized;
SELECT pg_sleep(0.01) AS later;
SELECT pay_succeed('D-BRIN-1', 'R-BRIN-1', 1) AS succeed;
SELECT processing_since + interval '1 microsecond' AS after_begin FROM pay_ledger
WHERE bizno = 'D-BRIN-1' \gset
PREPARE settled_since(timestamptz) AS SELECT bizno FROM pay_ledger WHERE updated_at >= $1;
SET plan_cache_mode = force_generic_plan;
EXPLAIN (COSTS OFF) EXECUTE settled_since(:'after_begin');
EXECUTE settled_since(:'after_begin');
DEALLOCATE settled_since;
RESET plan_cache_mode;
DROP INDEX dba_ledger_updated_brin;
RESET enable_seqscan;

-- 5. A hostile search_path.  Look-alikes of now(), clock_timestamp(),
-- lower(), upper(), nextval(), = for text and for enums, and of the DBA's
-- own helper, each raising, in a schema before pg_catalog: the API answers
-- as always, journals as always, and none of them runs.
CREATE SCHEMA evil;
CREATE FUNCTION evil.called(what text) RETURNS boolean
LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'evil % called', what; END $$;
CREATE FUNCTION evil.now() RETURNS timestamptz
LANGUAGE plpgsql AS $$ BEGIN PERFORM evil.called('now()'); RETURN NULL; END $$;
CREATE FUNCTION evil.clock_timestamp() RETURNS timestamptz
LANGUAGE plpgsql AS $$ BEGIN PERFORM evil.called('clock_timestamp()'); RETURN NULL; END $$;
CREATE FUNCTION evil.lower(text) RETURNS text
LANGUAGE plpgsql AS $$ BEGIN PERFORM evil.called('lower()'); RETURN NULL; END $$;
CREATE FUNCTION evil.upper(text) RETURNS text
LANGUAGE plpgsql AS $$ BEGIN PERFORM evil.called('upper()'); RETURN NULL; END $$;
CREATE FUNCTION evil.nextval(regclass) RETURNS bigint
LANGUAGE plpgsql AS $$ BEGIN PERFORM evil.called('nextval()'); RETURN NULL; END $$;
CREATE FUNCTION evil.dba_label(text) RETURNS text
LANGUAGE plpgsql AS $$ BEGIN PERFORM evil.called('dba_label()'); RETURN NULL; END $$;
CREATE FUNCTION evil.text_eq(text, text) RETURNS boolean
LANGUAGE plpgsql AS $$ BEGIN RETURN evil.called('= for text'); END $$;
CREATE OPERATOR evil.= (LEFTARG = text, RIGHTARG = text, FUNCTION = evil.text_eq);
CREATE FUNCTION evil.enum_eq(anyenum, anyenum) RETURNS boolean
LANGUAGE plpgsql AS $$ BEGIN RETURN evil.called('= for enums'); END $$;
CREATE OPERATOR evil.= (LEFTARG = anyenum, RIGHTARG = anyenum, FUNCTION = evil.enum_eq);
-- The look-alikes work: a call would show.
SET search_path = evil, public, pg_catalog;
SELECT 'a' = 'b' AS planted_equality;
SELECT lower('A') AS planted_lower;
RESET search_path;

-- The ledger as installed.
CREATE FUNCTION hostile_round(k text) RETURNS text
LANGUAGE plpgsql SET search_path = evil, public, pg_catalog AS $$
DECLARE
    answers text[];
    claim pay_claim;
BEGIN
    -- new payment, retried, settled; a second one failed, then claimed again
    answers := answers || pay_begin(k || '-1', 10, 'EUR')::text;
    answers := answers || pay_begin(k || '-1')::text;
    claim := pay_claim(k || '-1');
    answers := answers || (claim.action::text || ' attempt ' || claim.attempt);
    answers := answers || pay_succeed(k || '-1', k || '-BANK-1', 1)::text;
    answers := answers || pay_succeed(k || '-1', k || '-BANK-1', 1)::text;
    claim := pay_claim(k || '-1');
    answers := answers || (claim.action::text || ' ' || claim.channel_ref);
    claim := pay_claim(k || '-2', 20, 'USD');
    answers := answers || (claim.action::text || ' attempt ' || claim.attempt);
    answers := answers || pay_fail(k || '-2', 'card declined', 1)::text;
    answers := answers || pay_fail(k || '-2', 'card declined', 1)::text;
    claim := pay_claim(k || '-2');
    answers := answers || (claim.action::text || ' attempt ' || claim.attempt);
    answers := answers || pay_fail(k || '-2', 'declined again', 2)::text;
    RETURN array_to_string(answers, ', ');
END
$$;
SELECT hostile_round('D-EVIL') AS answers;
SELECT bizno, from_status, to_status, attempt, amount, currency, note
FROM pay_journal WHERE bizno LIKE 'D-EVIL-%' ORDER BY seq;
SELECT bizno, status, attempt, channel_ref, last_error FROM pay_ledger WHERE bizno LIKE 'D-EVIL-%' ORDER BY bizno;

-- A DBA's trigger and default on the ledger, written with unqualified
-- names, run on the extension's path too: dba_label, lower and = for
-- pay_status are the DBA's and pg_catalog's, never the look-alikes.
CREATE FUNCTION dba_label(text) RETURNS text LANGUAGE sql IMMUTABLE AS $$ SELECT 'seen ' || $1 $$;
CREATE FUNCTION dba_mark() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.marked := dba_label(lower(NEW.status::text));
    IF NEW.status = 'SUCCESS' THEN
        NEW.marked := NEW.marked || ' (paid)';
    END IF;
    RETURN NEW;
END
$$;
CREATE FUNCTION dba_origin() RETURNS text LANGUAGE sql STABLE AS $$ SELECT dba_label('by default') $$;
ALTER TABLE pay_ledger ADD COLUMN marked text, ADD COLUMN origin text DEFAULT dba_origin();
CREATE TRIGGER dba_mark BEFORE INSERT OR UPDATE ON pay_ledger FOR EACH ROW EXECUTE FUNCTION dba_mark();
SELECT hostile_round('D-EVIL-T') AS answers;
SELECT bizno, from_status, to_status, attempt, note
FROM pay_journal WHERE bizno LIKE 'D-EVIL-T-%' ORDER BY seq;
SELECT bizno, status, attempt, channel_ref, marked, origin FROM pay_ledger WHERE bizno LIKE 'D-EVIL-T-%' ORDER BY bizno;
DROP TRIGGER dba_mark ON pay_ledger;
ALTER TABLE pay_ledger DROP COLUMN marked, DROP COLUMN origin;
DROP FUNCTION dba_mark(), dba_origin(), dba_label(text);
DROP FUNCTION hostile_round(text);
DROP SCHEMA evil CASCADE;

-- 6. A DBA's BEFORE UPDATE trigger that skips some rows: settling such a
-- payment is refused (55000 pay_write_suppressed) and changes nothing;
-- the other payments settle.
SELECT pay_begin('D-HOLD-1', 10, 'EUR') AS hold_1, pay_begin('D-HOLD-2', 10, 'EUR') AS hold_2,
       pay_begin('D-PASS-1', 10, 'EUR') AS pass_1;
CREATE FUNCTION dba_hold() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.bizno LIKE 'D-HOLD-%' THEN
        RETURN NULL;
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER dba_hold BEFORE UPDATE ON pay_ledger FOR EACH ROW EXECUTE FUNCTION dba_hold();
SET statement_timeout = '10s';
SELECT table_rows() AS before \gset
SELECT outcome($$SELECT pay_succeed('D-HOLD-1', 'H1', 1)$$) AS succeed_held,
       outcome($$SELECT pay_fail('D-HOLD-2', 'declined', 1)$$) AS fail_held;
SELECT error_message($$SELECT pay_succeed('D-HOLD-1', 'H1', 1)$$) AS message;
SELECT table_rows() = :'before' AS nothing_written,
       standing('D-HOLD-1') AS hold_1, standing('D-HOLD-2') AS hold_2;
SELECT pay_succeed('D-PASS-1', 'P1', 1) AS pass_1;
RESET statement_timeout;
DROP TRIGGER dba_hold ON pay_ledger;
DROP FUNCTION dba_hold();
SELECT pay_succeed('D-HOLD-1', 'H1', 1) AS hold_1, pay_fail('D-HOLD-2', 'declined', 1) AS hold_2;

-- A read-only transaction (as every transaction on a hot standby is)
-- refuses the API's writes as it refuses any write: 25006, before anything
-- is written -- also a settlement that would find nothing to change.
SELECT pay_begin('D-READONLY-1', 10, 'EUR') AS begin;
SELECT table_rows() AS before \gset
BEGIN READ ONLY;
SELECT outcome($$SELECT pay_begin('D-READONLY-2', 10, 'EUR')$$) AS new_payment,
       outcome($$SELECT pay_succeed('D-READONLY-1', 'R1', 1)$$) AS settlement,
       outcome($$SELECT pay_succeed('D-READONLY-9', 'R9', 1)$$) AS settlement_of_nothing;
SELECT error_message($$SELECT pay_begin('D-READONLY-2', 10, 'EUR')$$) AS message;
ROLLBACK;
SELECT table_rows() = :'before' AS nothing_written, standing('D-READONLY-1') AS still;

-- 8. The executor's guarantees, each as the executor gives them.
-- Privileges: a write needs every privilege its statement would need, not
-- one of them.  With pay_succeed owned by a role that may read the ledger
-- but not update it, the settlement is refused (42501), as its UPDATE
-- would be; with pay_claim owned by a role that may not read the ledger,
-- so is the probe of a claim, as its SELECT would be.
SELECT proowner::regrole AS api_owner FROM pg_proc
WHERE oid = 'pay_succeed(text, text, bigint, jsonb)'::regprocedure \gset
CREATE ROLE d_api_owner;
GRANT SELECT ON pay_ledger TO d_api_owner;
SELECT pay_begin('D-PRIV-1', 10, 'EUR') AS begin;
ALTER FUNCTION pay_succeed(text, text, bigint, jsonb) OWNER TO d_api_owner;
SELECT outcome($$SELECT pay_succeed('D-PRIV-1', 'R-PRIV', 1)$$) AS select_without_update;
ALTER FUNCTION pay_succeed(text, text, bigint, jsonb) OWNER TO :"api_owner";
SELECT standing('D-PRIV-1') AS still_processing;
REVOKE SELECT ON pay_ledger FROM d_api_owner;
ALTER FUNCTION pay_claim(text, numeric, text) OWNER TO d_api_owner;
SELECT outcome($$SELECT (pay_claim('D-PRIV-1')).action$$) AS probe_without_select;
ALTER FUNCTION pay_claim(text, numeric, text) OWNER TO :"api_owner";
DROP ROLE d_api_owner;
SELECT pay_succeed('D-PRIV-1', 'R-PRIV', 1) AS settled_by_its_owner;

-- Collation: with bizno in a case-insensitive collation, the key the probe
-- finds is the key the settlement matches, as the WHERE clause would.
-- (pay_stats reads bizno, so the view is set aside while the column's type
-- changes.)
SELECT pg_get_viewdef('pay_stats'::regclass) AS stats_view \gset
ALTER EXTENSION idempotent_pay DROP VIEW pay_stats;
DROP VIEW pay_stats;
CREATE COLLATION d_case_insensitive (provider = icu, locale = 'und-u-ks-level2', deterministic = false);
ALTER TABLE pay_ledger ALTER COLUMN bizno TYPE text COLLATE d_case_insensitive;
SELECT (pay_claim('Ord-1', 10, 'EUR')).action AS claimed;
SELECT pay_succeed('ORD-1', 'R1', 1) AS settled_in_the_other_case;
SELECT standing('Ord-1') AS settled;
ALTER TABLE pay_ledger ALTER COLUMN bizno TYPE text COLLATE "default";
-- The probe of a business action, through the index on (prefix, biz_id),
-- compares as its WHERE clause does, in biz_id's collation: with biz_id
-- case-insensitive, another case is the same business action.
ALTER TABLE pay_ledger ALTER COLUMN biz_id TYPE text COLLATE d_case_insensitive;
SELECT pay_open('DCOLL', 'Order-1', 10, 'EUR') = pay_open('DCOLL', 'ORDER-1', 10, 'EUR')
    AS one_business_action;
ALTER TABLE pay_ledger ALTER COLUMN biz_id TYPE text COLLATE "default";
-- An index in another collation than the column's is not read for it: in
-- the column's collation another case is another business action, which
-- that index then refuses (23505); the new case first, then the recorded
-- one, found as the column compares.
DROP INDEX pay_ledger_prefix_biz_id_key;
CREATE UNIQUE INDEX pay_ledger_prefix_biz_id_key
    ON pay_ledger (prefix, biz_id COLLATE d_case_insensitive) WHERE biz_id IS NOT NULL;
SELECT outcome($$SELECT pay_open('DCOLL', 'order-1', 10, 'EUR') IS NOT NULL$$) AS other_case,
       outcome($$SELECT pay_open('DCOLL', 'Order-1', 10, 'EUR') IS NOT NULL$$) AS recorded_case;
DROP INDEX pay_ledger_prefix_biz_id_key;
CREATE UNIQUE INDEX pay_ledger_prefix_biz_id_key ON pay_ledger (prefix, biz_id)
    WHERE biz_id IS NOT NULL;
DROP COLLATION d_case_insensitive;
CREATE VIEW pay_stats AS :stats_view
ALTER EXTENSION idempotent_pay ADD VIEW pay_stats;

-- Many triggers: six more BEFORE UPDATE guards of the extension's own
-- (pay_guard, which a direct write fires itself) on the ledger, eleven
-- triggers in all: the API works on (a fixed table of eight once gave
-- XX000).
SELECT count(*) AS triggers_before FROM pg_trigger WHERE tgrelid = 'pay_ledger'::regclass;
DO $$
BEGIN
    FOR i IN 1 .. 6 LOOP
        EXECUTE format('CREATE TRIGGER d_guard_%s BEFORE UPDATE ON pay_ledger FOR EACH ROW '
                       'EXECUTE FUNCTION pay_guard(%L, %L, %L)', i, 'status', 'amount', 'currency');
    END LOOP;
END
$$;
SELECT pay_begin('D-MANY-1', 10, 'EUR') AS begin, pay_succeed('D-MANY-1', 'R-MANY', 1) AS succeed;
DO $$
BEGIN
    FOR i IN 1 .. 6 LOOP
        EXECUTE format('DROP TRIGGER d_guard_%s ON pay_ledger', i);
    END LOOP;
END
$$;

-- The journal's attempt made an identity column GENERATED ALWAYS: the
-- journal's INSERT, which names every column, is refused (428C9), so every
-- write of the API that journals is refused and writes nothing -- never a
-- value stored in a column only PostgreSQL may fill.
ALTER TABLE pay_journal ALTER COLUMN attempt ADD GENERATED ALWAYS AS IDENTITY;
SELECT outcome($$SELECT pay_begin('D-IDENT-1', 10, 'EUR')$$) AS begin_journal_identity;
SELECT count(*) AS written FROM pay_ledger WHERE bizno = 'D-IDENT-1';
ALTER TABLE pay_journal ALTER COLUMN attempt DROP IDENTITY;
SELECT pay_begin('D-IDENT-1', 10, 'EUR') AS begin_after;

-- 7. Ledger and journal agree, and the ledger is as installed again: no
-- column, constraint, trigger, index or domain check of this file is left.
SELECT * FROM pay_verify();
SELECT count(*) AS columns FROM pg_attribute
WHERE attrelid = 'pay_ledger'::regclass AND attnum > 0 AND NOT attisdropped;
SELECT count(*) AS check_constraints FROM pg_constraint WHERE conrelid = 'pay_ledger'::regclass AND contype = 'c';
SELECT tgname FROM pg_trigger WHERE tgrelid = 'pay_ledger'::regclass ORDER BY 1;
SELECT indexrelid::regclass::text AS index FROM pg_index WHERE indrelid = 'pay_ledger'::regclass ORDER BY 1;
SELECT conname FROM pg_constraint WHERE contypid IN ('pay_amount'::regtype, 'pay_currency'::regtype) ORDER BY 1;
DROP FUNCTION table_rows();

RESET idempotent_pay.maintenance;
