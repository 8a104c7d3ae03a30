/* idempotent_pay 1.3 -> 1.4: the caller's ordinary mistakes refused */

\echo Use "ALTER EXTENSION idempotent_pay UPDATE TO '1.4'" to load this file. \quit


-- A claim is durable before it is acted on: pay_claim, pay_open_claim and
-- pay_begin refuse to run inside a transaction block (25001
-- pay_claim_in_transaction) unless idempotent_pay.claim_in_transaction =
-- allow.  1.3's entry points keep claiming there for installations not yet
-- updated.
CREATE OR REPLACE FUNCTION @extschema@.pay_claim(bizno text, amount numeric DEFAULT NULL, currency text DEFAULT NULL)
RETURNS @extschema@.pay_claim
AS 'MODULE_PATHNAME', 'pay_claim_1_4'
LANGUAGE C VOLATILE SECURITY DEFINER;

CREATE OR REPLACE FUNCTION @extschema@.pay_open_claim(prefix text, biz_id text, amount numeric, currency text DEFAULT NULL,
    OUT bizno text, OUT action @extschema@.pay_action, OUT attempt integer, OUT status @extschema@.pay_status,
    OUT channel_ref text, OUT response jsonb)
RETURNS record
AS 'MODULE_PATHNAME', 'pay_open_claim_1_4'
LANGUAGE C VOLATILE SECURITY DEFINER SET search_path = @extschema@, pg_temp;

CREATE OR REPLACE FUNCTION @extschema@.pay_begin(bizno text, amount numeric DEFAULT NULL, currency text DEFAULT NULL)
RETURNS @extschema@.pay_action
AS 'MODULE_PATHNAME', 'pay_begin_1_4'
LANGUAGE C VOLATILE SECURITY DEFINER;

-- pay_get and pay_find: no row reads as "not paid" (src/api_lookup.c).
-- 1.3's read the ledger alone, and gave no row for an archived payment and
-- for a mistyped bizNo; these answer from the archive when the ledger has
-- no row, 55000 pay_archived once the month is dropped, 22P02 for a bizNo
-- whose check character fails.  CREATE OR REPLACE keeps their grants.
CREATE OR REPLACE FUNCTION @extschema@.pay_get(bizno text)
RETURNS SETOF @extschema@.pay_ledger
AS 'MODULE_PATHNAME', 'pay_get_1_4'
LANGUAGE C STABLE STRICT SECURITY DEFINER ROWS 1 SET search_path = @extschema@, pg_temp;

COMMENT ON FUNCTION @extschema@.pay_get(text) IS
'The row of a bizNo: the ledger''s, else the archive''s (55000 pay_archived once its month is dropped); 22P02 for a mistyped bizNo; no row when unknown';

CREATE OR REPLACE FUNCTION @extschema@.pay_find(prefix text, biz_id text)
RETURNS SETOF @extschema@.pay_ledger
AS 'MODULE_PATHNAME', 'pay_find_1_4'
LANGUAGE C STABLE STRICT SECURITY DEFINER ROWS 1 SET search_path = @extschema@, pg_temp;

COMMENT ON FUNCTION @extschema@.pay_find(text, text) IS
'The row of business action (prefix, biz_id): the ledger''s, else the archive''s (55000 pay_archived once its month is dropped); no row when it has none. Creates nothing';


-- Last: the initial privileges (pg_init_privs) back to what the complete
-- script records, the owner's and PUBLIC's alone.  PostgreSQL records the
-- whole ACL of every object an update script creates or replaces among its
-- initial privileges, the grants of the DBA's roles with it, and pg_dump
-- leaves those out of a dump: without this a restored application could
-- claim payments it could not settle (the reasoning in full is with the
-- same step of idempotent_pay--1.2--1.3.sql).
DO $$
DECLARE
    entry record;
BEGIN
    FOR entry IN
        SELECT i.classoid, i.objoid, i.objsubid, i.initprivs,
               ARRAY(SELECT k.item
                     FROM pg_catalog.unnest(i.initprivs) WITH ORDINALITY AS k(item, n)
                     WHERE EXISTS (SELECT FROM pg_catalog.aclexplode(ARRAY[k.item]) AS a
                                   WHERE a.grantee OPERATOR(pg_catalog.=) 0
                                      OR a.grantee OPERATOR(pg_catalog.=) a.grantor)
                     ORDER BY k.n) AS kept
        FROM pg_catalog.pg_init_privs AS i
        WHERE EXISTS (SELECT FROM pg_catalog.pg_depend AS d, pg_catalog.pg_extension AS e
                      WHERE d.classid OPERATOR(pg_catalog.=) i.classoid
                        AND d.objid OPERATOR(pg_catalog.=) i.objoid
                        AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass
                        AND d.refobjid OPERATOR(pg_catalog.=) e.oid
                        AND d.deptype OPERATOR(pg_catalog.=) 'e'
                        AND e.extname OPERATOR(pg_catalog.=) 'idempotent_pay')
           OR (i.classoid OPERATOR(pg_catalog.=) 'pg_catalog.pg_namespace'::pg_catalog.regclass
               AND i.objoid OPERATOR(pg_catalog.=) '@extschema@'::pg_catalog.regnamespace)
    LOOP
        CONTINUE WHEN entry.kept OPERATOR(pg_catalog.=) entry.initprivs;
        IF pg_catalog.cardinality(entry.kept) OPERATOR(pg_catalog.=) 0 THEN
            DELETE FROM pg_catalog.pg_init_privs AS i
            WHERE i.classoid OPERATOR(pg_catalog.=) entry.classoid AND i.objoid OPERATOR(pg_catalog.=) entry.objoid
              AND i.objsubid OPERATOR(pg_catalog.=) entry.objsubid;
        ELSE
            UPDATE pg_catalog.pg_init_privs AS i SET initprivs = entry.kept
            WHERE i.classoid OPERATOR(pg_catalog.=) entry.classoid AND i.objoid OPERATOR(pg_catalog.=) entry.objoid
              AND i.objsubid OPERATOR(pg_catalog.=) entry.objsubid;
        END IF;
        DELETE FROM pg_catalog.pg_shdepend AS s
        WHERE s.dbid OPERATOR(pg_catalog.=) (SELECT d.oid FROM pg_catalog.pg_database AS d
                                             WHERE d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database())
          AND s.classid OPERATOR(pg_catalog.=) entry.classoid AND s.objid OPERATOR(pg_catalog.=) entry.objoid
          AND s.objsubid OPERATOR(pg_catalog.=) entry.objsubid
          AND s.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_authid'::pg_catalog.regclass
          AND s.deptype OPERATOR(pg_catalog.=) 'i'
          AND NOT s.refobjid OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT a.grantee FROM pg_catalog.aclexplode(entry.kept) AS a
                                                               UNION ALL
                                                               SELECT a.grantor FROM pg_catalog.aclexplode(entry.kept) AS a));
    END LOOP;
END
$$;
