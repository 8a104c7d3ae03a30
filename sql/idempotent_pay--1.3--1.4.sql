/* idempotent_pay 1.3 -> 1.4: the caller's ordinary mistakes refused */

\echo Use "ALTER EXTENSION idempotent_pay UPDATE TO '1.4'" to load this file. \quit


-- Keys are what they claim to be.  pay_open, pay_open_claim, pay_claim and
-- pay_begin bind 1.4's entry points: a key the ledger does not have starts
-- a payment only when it is a bizNo, or a key of another system under
-- idempotent_pay.foreign_keys = accept; a key shaped like a bizNo that is
-- none, or one that starts with a prefix this database issues, is 22P02; a
-- biz_id that is a bizNo is 22023.  Same signatures, so CREATE OR REPLACE
-- keeps grants and dependants.
CREATE OR REPLACE FUNCTION @extschema@.pay_open(prefix text, biz_id text, amount numeric, currency text DEFAULT NULL)
RETURNS text
AS 'MODULE_PATHNAME', 'pay_open_1_4'
LANGUAGE C VOLATILE SECURITY DEFINER SET search_path = @extschema@, pg_temp;

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
