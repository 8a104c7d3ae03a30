-- DDL on the extension's own objects: a rewrite of the ledger's status, an
-- enum label renamed, a trigger, rule or policy of one's own each could make
-- a settled payment payable again.  pay_refuse_ddl refuses them, superusers'
-- too (55000 pay_ddl_refused), except in the extension's scripts, in the
-- archive's, pg_repack's and trigger toggles' own forms, and under
-- idempotent_pay.maintenance, which records them.  What no event trigger
-- sees, pay_verify reports.  Every case runs in a transaction rolled back.

-- Claims here run inside transaction blocks or subtransactions on purpose
-- (rolled back, or caught); the refusal of that is claim_durable's test.
SET idempotent_pay.claim_in_transaction = allow;

SELECT payment_in('DDL-PAID', 'SUCCESS');

-- What a DDL statement does: ok, or the SQLSTATE and constraint name of
-- its refusal (ddl_outcome() wants a statement that returns a value).
CREATE FUNCTION ddl_outcome(statement text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    state text;
    constraint_name text;
BEGIN
    EXECUTE statement;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, constraint_name = CONSTRAINT_NAME;
    RETURN state || coalesce(' ' || nullif(constraint_name, ''), '');
END
$$;

-- the answer a retry of the settled payment gets
CREATE FUNCTION ddl_retry() RETURNS text
LANGUAGE sql AS $$
    SELECT c.action || '/' || c.attempt FROM pay_claim('DDL-PAID', 10, 'EUR') AS c
$$;

-- A BEFORE UPDATE trigger function of one's own that reopens a payment.
CREATE FUNCTION ddl_reopen() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    NEW.status := 'INIT';
    RETURN NEW;
END
$$;

-- 1. The three ways a superuser's DDL reopened a settled payment.
BEGIN;
SELECT ddl_outcome($$ALTER TABLE pay_ledger ALTER COLUMN status TYPE pay_status
                 USING (CASE WHEN status = 'SUCCESS' THEN 'INIT' ELSE status END::pay_status)$$) AS rewrite_status;
SELECT ddl_retry() AS retry_after_rewrite;
ROLLBACK;

BEGIN;
SELECT ddl_outcome($$ALTER TYPE pay_status RENAME VALUE 'SUCCESS' TO 'SWAPPED'$$) AS rename_success,
       ddl_outcome($$ALTER TYPE pay_status RENAME VALUE 'INIT' TO 'SUCCESS'$$) AS rename_init,
       ddl_outcome($$ALTER TYPE pay_status RENAME VALUE 'SWAPPED' TO 'INIT'$$) AS rename_swapped;
SELECT ddl_retry() AS retry_after_rename;
ROLLBACK;

BEGIN;
SELECT ddl_outcome($$CREATE TRIGGER zz_reopen BEFORE UPDATE ON pay_ledger
                 FOR EACH ROW EXECUTE FUNCTION ddl_reopen()$$) AS own_trigger;
SELECT outcome($$UPDATE pay_ledger SET note = 'touched' WHERE bizno = 'DDL-PAID' RETURNING status$$) AS touch;
SELECT ddl_retry() AS retry_after_trigger;
ROLLBACK;

-- 2. One form at a time on every table and every type of the extension, as
-- its catalog lists them (objects added later join), the archive's month
-- partitions with them.
BEGIN;
SELECT pay_archive_partitions('2024-01-01');
CREATE TEMP VIEW ddl_tables AS
    SELECT c.oid::regclass AS tbl,
           (SELECT a.attname FROM pg_attribute AS a
            WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
            ORDER BY a.attnum LIMIT 1) AS first_column
    FROM pg_class AS c
    WHERE c.relkind IN ('r', 'p')
      AND (c.oid IN (SELECT d.objid FROM pg_depend AS d
                     WHERE d.refclassid = 'pg_extension'::regclass
                       AND d.refobjid = (SELECT e.oid FROM pg_extension AS e WHERE e.extname = 'idempotent_pay')
                       AND d.classid = 'pg_class'::regclass AND d.deptype = 'e')
           OR c.oid IN (SELECT i.inhrelid FROM pg_inherits AS i
                        WHERE i.inhparent IN ('pay_ledger_archive'::regclass, 'pay_journal_archive'::regclass)));
CREATE TEMP VIEW ddl_types AS
    SELECT t.oid::regtype AS typ, t.typtype,
           (SELECT e.enumlabel FROM pg_enum AS e WHERE e.enumtypid = t.oid ORDER BY e.enumsortorder LIMIT 1) AS first_label,
           (SELECT n.conname FROM pg_constraint AS n WHERE n.contypid = t.oid ORDER BY n.conname LIMIT 1) AS first_constraint
    FROM pg_type AS t
    WHERE t.oid IN (SELECT d.objid FROM pg_depend AS d
                    WHERE d.refclassid = 'pg_extension'::regclass
                      AND d.refobjid = (SELECT e.oid FROM pg_extension AS e WHERE e.extname = 'idempotent_pay')
                      AND d.classid = 'pg_type'::regclass AND d.deptype = 'e')
      -- PostgreSQL 17 and 18 (not 15) also record a type's array type and a
      -- table's or view's row type as members: those are altered with
      -- what they belong to
      AND t.typelem = 0
      AND NOT EXISTS (SELECT FROM pg_class AS c WHERE c.oid = t.typrelid AND c.relkind <> 'c');

SELECT tbl,
       ddl_outcome(format('ALTER TABLE %s ADD COLUMN ddl_probe integer', tbl)) AS add_column,
       ddl_outcome(format('ALTER TABLE %s DROP COLUMN %I', tbl, first_column)) AS drop_column,
       ddl_outcome(format('ALTER TABLE %s RENAME COLUMN %I TO ddl_renamed', tbl, first_column)) AS rename_column,
       ddl_outcome(format('ALTER TABLE %s OWNER TO pg_database_owner', tbl)) AS owner,
       ddl_outcome(format('CREATE TRIGGER ddl_probe BEFORE INSERT ON %s FOR EACH ROW EXECUTE FUNCTION ddl_reopen()', tbl)) AS create_trigger,
       ddl_outcome(format('CREATE RULE ddl_probe AS ON INSERT TO %s DO INSTEAD NOTHING', tbl)) AS create_rule,
       ddl_outcome(format('CREATE POLICY ddl_probe ON %s USING (false)', tbl)) AS create_policy
FROM ddl_tables ORDER BY tbl::text;

SELECT typ, typtype,
       CASE typtype
           WHEN 'e' THEN ddl_outcome(format($$ALTER TYPE %s ADD VALUE 'DDL_PROBE'$$, typ))
           WHEN 'd' THEN ddl_outcome(format('ALTER DOMAIN %s DROP CONSTRAINT %I', typ, first_constraint))
           WHEN 'c' THEN ddl_outcome(format('ALTER TYPE %s ADD ATTRIBUTE ddl_probe integer', typ))
       END AS change,
       CASE typtype
           WHEN 'e' THEN ddl_outcome(format($$ALTER TYPE %s RENAME VALUE %L TO 'DDL_PROBE'$$, typ, first_label))
           WHEN 'd' THEN ddl_outcome(format('ALTER DOMAIN %s SET DEFAULT 1', typ))
           WHEN 'c' THEN ddl_outcome(format('ALTER TYPE %s RENAME ATTRIBUTE action TO ddl_probe', typ))
       END AS change_again,
       ddl_outcome(format('ALTER TYPE %s RENAME TO ddl_renamed', typ)) AS rename,
       ddl_outcome(format('ALTER TYPE %s OWNER TO pg_database_owner', typ)) AS owner
FROM ddl_types ORDER BY typ::text;
ROLLBACK;

-- the forms each refusal of pay_refuse_ddl names, one by one
BEGIN;
SELECT pay_archive_partitions('2024-01-01');
SELECT ddl_outcome($$CREATE RULE ddl_rule AS ON UPDATE TO pay_ledger DO INSTEAD NOTHING$$) AS create_rule,
       ddl_outcome($$CREATE POLICY ddl_policy ON pay_ledger USING (false)$$) AS create_policy,
       ddl_outcome($$ALTER TABLE pay_ledger ADD COLUMN ddl_probe integer$$) AS add_column,
       ddl_outcome($$ALTER TABLE pay_ledger DROP COLUMN note$$) AS drop_column,
       ddl_outcome($$ALTER TABLE pay_ledger_archive DETACH PARTITION pay_ledger_archive_2024_01$$) AS detach_month,
       ddl_outcome($$ALTER TABLE pay_ledger SET UNLOGGED$$) AS unlogged,
       ddl_outcome($$ALTER TABLE pay_ledger FORCE ROW LEVEL SECURITY$$) AS force_rls,
       ddl_outcome($$ALTER TRIGGER pay_ledger_guard ON pay_ledger RENAME TO zz_guard$$) AS rename_guard,
       ddl_outcome($$CREATE OR REPLACE TRIGGER pay_ledger_guard BEFORE INSERT ON pay_ledger
                 FOR EACH ROW EXECUTE FUNCTION ddl_reopen()$$) AS replace_guard;
SELECT ddl_outcome($$ALTER TYPE pay_status ADD VALUE 'REOPENED'$$) AS add_value,
       ddl_outcome($$ALTER TYPE pay_status RENAME VALUE 'SUCCESS' TO 'PAID'$$) AS rename_value,
       ddl_outcome($$ALTER DOMAIN pay_amount DROP CONSTRAINT pay_amount_check$$) AS drop_amount_check,
       ddl_outcome($$ALTER TABLE pay_ledger SET SCHEMA pg_temp$$) AS set_schema;
-- a trigger named as pg_repack names its own, but not pg_repack's
SELECT ddl_outcome($$CREATE TRIGGER repack_trigger AFTER INSERT OR DELETE OR UPDATE ON pay_ledger
                 FOR EACH ROW EXECUTE FUNCTION ddl_reopen()$$) AS not_pg_repack;
-- an error says what to do
SELECT error_message($$ALTER TABLE pay_ledger ADD COLUMN ddl_probe integer$$) AS message;
ROLLBACK;

-- 3. What passes: the archive's own DDL, and pg_dump's form of attaching a
-- month; enabling triggers (a guard enabled is made ALWAYS again), but not
-- disabling one, which needs maintenance as pg_restore --disable-triggers
-- does; storage parameters.
BEGIN;
SELECT outcome($$SELECT pay_archive_partitions('2024-01-01')::text$$) AS archive_partitions;
CREATE TABLE pay_ledger_archive_2024_02 (LIKE pay_ledger_archive);
CREATE TABLE pay_ledger_archive_other (LIKE pay_ledger_archive);
SELECT ddl_outcome($$ALTER TABLE ONLY pay_ledger_archive ATTACH PARTITION pay_ledger_archive_2024_02
                 FOR VALUES FROM ('2024-03-01') TO ('2024-04-01')$$) AS attach_wrong_month,
       ddl_outcome($$ALTER TABLE ONLY pay_ledger_archive ATTACH PARTITION pay_ledger_archive_other
                 FOR VALUES FROM ('2024-03-01') TO ('2024-04-01')$$) AS attach_other_name,
       ddl_outcome($$ALTER TABLE ONLY pay_ledger_archive ATTACH PARTITION pay_ledger_archive_2024_02
                 FOR VALUES FROM ('2024-02-01') TO ('2024-03-01')$$) AS attach_month,
       ddl_outcome($$ALTER TABLE ONLY pay_ledger_archive_2024_02 ADD CONSTRAINT pay_ledger_archive_2024_02_pkey
                 PRIMARY KEY (bizno)$$) AS month_primary_key;
SELECT ddl_outcome($$ALTER TABLE pay_ledger DISABLE TRIGGER pay_ledger_guard$$) AS disable_guard,
       ddl_outcome($$ALTER TABLE pay_ledger ENABLE REPLICA TRIGGER pay_ledger_guard$$) AS replica_only_guard;
SET LOCAL idempotent_pay.maintenance = on;
ALTER TABLE pay_ledger DISABLE TRIGGER pay_ledger_guard;
RESET idempotent_pay.maintenance;
SELECT tgenabled AS disabled FROM pg_trigger WHERE tgrelid = 'pay_ledger'::regclass AND tgname = 'pay_ledger_guard';
SELECT ddl_outcome($$ALTER TABLE pay_ledger ENABLE TRIGGER pay_ledger_guard$$) AS enable_guard;
SELECT tgenabled AS enabled FROM pg_trigger WHERE tgrelid = 'pay_ledger'::regclass AND tgname = 'pay_ledger_guard';
SELECT ddl_outcome($$ALTER TABLE pay_ledger SET (autovacuum_vacuum_scale_factor = 0.01)$$) AS storage_parameter,
       ddl_outcome($$ALTER DOMAIN pay_amount VALIDATE CONSTRAINT pay_amount_check$$) AS validate_domain;
ROLLBACK;

-- A user's tables are the user's, pay_protect'ed or not.
BEGIN;
CREATE TABLE ddl_orders (id integer PRIMARY KEY, status pay_status NOT NULL DEFAULT 'INIT', amount numeric);
SELECT outcome($$SELECT pay_protect('ddl_orders', 'status', ARRAY['amount'])::text$$) AS protect;
SELECT ddl_outcome($$ALTER TABLE ddl_orders ADD COLUMN note text$$) AS user_add_column,
       ddl_outcome($$CREATE TRIGGER ddl_user BEFORE UPDATE ON ddl_orders FOR EACH ROW EXECUTE FUNCTION ddl_reopen()$$) AS user_trigger,
       ddl_outcome($$CREATE POLICY ddl_user ON ddl_orders USING (true)$$) AS user_policy;
ROLLBACK;

-- 4. Maintenance: only a superuser turns it on; each statement it lets
-- through is recorded, and the record is append-only.
CREATE ROLE regress_ddl_user;
SET ROLE regress_ddl_user;
SELECT outcome($$SELECT set_config('idempotent_pay.maintenance', 'on', true)$$) AS user_sets_maintenance;
RESET ROLE;
DROP ROLE regress_ddl_user;
BEGIN;
SET LOCAL idempotent_pay.maintenance = on;
ALTER TABLE pay_ledger ADD COLUMN ddl_probe integer;
ALTER TYPE pay_action ADD VALUE 'DDL_PROBE';
ALTER TABLE pay_ledger DISABLE TRIGGER pay_ledger_bookkeeping;
ALTER TABLE pay_ledger ENABLE TRIGGER pay_ledger_bookkeeping;
SELECT actor = current_user AS by_me, command_tag, object, command
FROM pay_maintenance_log WHERE txid = pg_current_xact_id() ORDER BY command;
SELECT outcome($$DELETE FROM pay_maintenance_log$$) AS delete_log,
       outcome($$UPDATE pay_maintenance_log SET actor = 'nobody'$$) AS update_log,
       outcome($$TRUNCATE pay_maintenance_log$$) AS truncate_log;
RESET idempotent_pay.maintenance;
SELECT ddl_outcome($$ALTER TABLE pay_maintenance_log DISABLE TRIGGER USER$$) AS toggle_log_guards,
       ddl_outcome($$ALTER TABLE pay_maintenance_log ADD COLUMN ddl_probe integer$$) AS alter_log;
ROLLBACK;
SELECT has_table_privilege('public', 'pay_maintenance_log', 'SELECT') AS public_reads_log,
       (SELECT count(*) FROM pg_catalog.pg_extension AS e,
               unnest(e.extconfig) AS t(oid) WHERE t.oid = 'pay_maintenance_log'::regclass) AS log_dumped;

-- 5. What no trigger can refuse, pay_verify reports: a journal row of an
-- illegal step written by a superuser with a restore's settings, which the
-- journal's guard cannot tell from a restore's row, and a type's labels
-- swapped in the catalog by hand.
BEGIN;
SET LOCAL row_security = off;
SET LOCAL check_function_bodies = false;
INSERT INTO pay_journal (bizno, attempt, from_status, to_status)
    VALUES ('DDL-PAID', 1, 'SUCCESS', 'INIT');
RESET row_security;
RESET check_function_bodies;
SELECT bizno, regexp_replace(problem, 'entry \d+', 'entry #') AS problem
FROM pay_verify() WHERE bizno LIKE 'DDL-%' ORDER BY 1, 2;
ROLLBACK;

BEGIN;
UPDATE pg_enum SET enumlabel = 'SWAPPED' WHERE enumtypid = 'pay_status'::regtype AND enumlabel = 'SUCCESS';
UPDATE pg_enum SET enumlabel = 'SUCCESS' WHERE enumtypid = 'pay_status'::regtype AND enumlabel = 'INIT';
UPDATE pg_enum SET enumlabel = 'INIT' WHERE enumtypid = 'pay_status'::regtype AND enumlabel = 'SWAPPED';
SELECT bizno, regexp_replace(problem, 'entry \d+', 'entry #') AS problem
FROM pay_verify() WHERE bizno LIKE 'DDL-%' ORDER BY 1, 2;
ROLLBACK;

-- a legal history reports no step: a second charge's row is SUCCESS again,
-- an amount change INIT again
BEGIN;
SELECT pay_succeed('DDL-PAID', 'BANK-DDL-SECOND', 1);
SELECT payment_in('DDL-CHANGED', 'INIT');
UPDATE pay_ledger SET amount = 12 WHERE bizno = 'DDL-CHANGED';
SELECT standing('DDL-PAID') AS paid, standing('DDL-CHANGED') AS changed;
SELECT count(*) AS illegal_steps FROM pay_verify()
WHERE bizno LIKE 'DDL-%' AND problem LIKE '%state machine does not allow';
ROLLBACK;

DROP FUNCTION ddl_retry(), ddl_reopen(), ddl_outcome(text);
