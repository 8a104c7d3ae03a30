-- The write policy of doc/reference.md ("Write policy"), held to the code:
-- every table of the extension (from the catalog, so a table added later
-- joins) and every month partition of the archive, written by the
-- superuser with raw SQL -- INSERT, an UPDATE of each column (from
-- pg_attribute, so a column added later joins), DELETE, TRUNCATE and COPY
-- FROM -- in a normal session and under session_replication_role =
-- replica.  Each write runs in a subtransaction that is rolled back, with
-- every deferred constraint checked inside it.  A write that passes is
-- followed by pay_verify(): "ok, detected" when it reports a problem it did
-- not report before, "ok" when nothing notices.  The policy's cells are
-- data below; only the cells where the code disagrees with them are
-- printed, with how many were checked.
--
-- COPY ... FROM STDIN cannot run inside a function, so COPY is COPY FROM
-- PROGRAM of the same row as the INSERT (a superuser's, through printf): it
-- fires the same row triggers as an INSERT, and the matrix shows that it
-- gets no other answer.

-- Rows for every UPDATE and DELETE to find: a payment in each state, two
-- archived into a month of their own, a month a replica's apply received
-- into the default partitions, a fold of the counts, a deletion since the
-- fold, a maintenance log entry.
SELECT payment_in('WP-INIT', 'INIT'), payment_in('WP-PROCESSING', 'PROCESSING'),
       payment_in('WP-SUCCESS', 'SUCCESS'), payment_in('WP-FAILED', 'FAILED'),
       payment_in('WP-OLD-1', 'SUCCESS'), payment_in('WP-OLD-2', 'FAILED'),
       payment_in('WP-APPLIED', 'SUCCESS');
SET session_replication_role = replica;
UPDATE pay_ledger SET updated_at = '2024-11-10 12:00+00' WHERE bizno IN ('WP-OLD-1', 'WP-OLD-2');
RESET session_replication_role;
-- The counts are counted again from the ledger and the journal (what the
-- files before wrote in replica mode left them apart), so that pay_verify
-- starts with nothing to say of them.
DELETE FROM pay_stats_state;
SELECT pay_stats_refresh() AS folded;
SELECT pay_archive('2024-12-01') AS archived;
SELECT to_regclass('pay_ledger_archive_2024_11') IS NOT NULL AS month_partition;

-- A replica's apply of pay_archive's transaction on the publisher: the rows
-- come through the partitioned tables, into the default partitions where
-- the subscriber has no partition of their month, with the hash and the
-- month's record; the deletions then pass the guard.
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';
BEGIN;
SET LOCAL session_replication_role = replica;
INSERT INTO pay_ledger_archive
SELECT l.bizno, l.prefix, l.biz_id, l.status, l.amount, l.currency, l.attempt, l.channel_ref,
       l.last_error, l.created_at, l.updated_at, l.processing_since, l.note, l.parent,
       l.refund_key, l.response, '2030-05-01', now()
FROM pay_ledger AS l WHERE l.bizno = 'WP-APPLIED';
INSERT INTO pay_journal_archive
SELECT j.seq, j.bizno, j.attempt, j.from_status, j.to_status, j.amount, j.currency, j.at, j.txid,
       j.actor, j.note, j.channel_ref, j.second_charge, '2030-05-01'
FROM pay_journal AS j WHERE j.bizno = 'WP-APPLIED';
SELECT pay_archive_add_keys(ARRAY[pay_archive_key_hash('WP-APPLIED')]);
INSERT INTO pay_archive_months
SELECT '2030-05-01', 1, count(*), (SELECT count(*) FROM pay_journal_archive_default WHERE month = '2030-05-01'),
       sum(hashtextextended(a::text COLLATE "C", 0)::numeric),
       (SELECT sum(hashtextextended(a::text COLLATE "C", 0)::numeric)
        FROM pay_journal_archive AS a WHERE month = '2030-05-01')
FROM pay_ledger_archive AS a WHERE month = '2030-05-01';
DELETE FROM pay_journal WHERE bizno = 'WP-APPLIED';
DELETE FROM pay_ledger WHERE bizno = 'WP-APPLIED';
COMMIT;
RESET TimeZone;
RESET DateStyle;
SELECT (SELECT count(*) FROM pay_ledger_archive_default) AS default_ledger_rows,
       (SELECT count(*) FROM pay_journal_archive_default) > 0 AS default_journal_rows;

SELECT pay_stats_refresh() IS NOT NULL AS folded_again;
SELECT payment_in('WP-DELETED', 'INIT');
DELETE FROM pay_ledger WHERE bizno = 'WP-DELETED';
BEGIN;
SET LOCAL idempotent_pay.maintenance = on;
ALTER TABLE pay_ledger DISABLE TRIGGER pay_ledger_bookkeeping;
ALTER TABLE pay_ledger ENABLE TRIGGER pay_ledger_bookkeeping;
COMMIT;
SELECT (SELECT count(*) FROM pay_stats_deletions) > 0 AS a_deletion,
       (SELECT count(*) FROM pay_maintenance_log) > 0 AS a_maintenance_entry;

-- The tables: the extension's own, and each month partition of the archive
-- (a table of its own, for pg_dump), as "pay_ledger_archive_YYYY_MM".  The
-- ledger's UPDATE and DELETE are decided by the state of the row, so it is
-- written in each state.
CREATE TABLE wp_targets AS
SELECT c.oid::regclass AS relid, c.relname::text AS kind, NULL::text AS row_filter,
       NULL::text AS row_order
FROM pg_depend AS d
JOIN pg_class AS c ON c.oid = d.objid AND d.classid = 'pg_class'::regclass
WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e' AND c.relkind IN ('r', 'p')
  AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'idempotent_pay')
UNION ALL
SELECT c.oid::regclass, regexp_replace(c.relname, '_\d{4}_\d{2}$', '_YYYY_MM'), NULL, NULL
FROM pg_inherits AS i JOIN pg_class AS c ON c.oid = i.inhrelid
WHERE i.inhparent IN ('pay_ledger_archive'::regclass, 'pay_journal_archive'::regclass)
  AND c.relname ~ '_\d{4}_\d{2}$';
-- the rows this file made, where the row decides the answer
UPDATE wp_targets SET row_order = 'length(hashes) DESC' WHERE kind = 'pay_archive_keys';
UPDATE wp_targets SET row_filter = $$month = '2024-11-01'$$ WHERE kind = 'pay_archive_months';
UPDATE wp_targets SET row_filter = $$from_status = 'PROCESSING' AND to_status = 'SUCCESS' AND NOT refund
                                     AND second_charge IS NULL AND kind IS NULL$$
WHERE kind IN ('pay_stats_counts', 'pay_archive_counts');
INSERT INTO wp_targets
SELECT 'pay_ledger', format('pay_ledger %s row', s), format('bizno = %L', 'WP-' || s), NULL
FROM unnest(ARRAY['INIT', 'PROCESSING', 'SUCCESS', 'FAILED']) AS s;

-- The statements.  INSERT and COPY of a plausible new row, one or more per
-- table (the ledger's: a new payment, a new settled one, an archived
-- payment's key; the journal's: a step, a second charge confirmed).
-- {month} is the month of the partition written.
CREATE TABLE wp_rows (kind text, variant text, query text);
INSERT INTO wp_rows VALUES
('pay_ledger', 'new payment', $$SELECT 'WP-NEW' AS bizno, 'INIT'::pay_status AS status, 10 AS amount, 'EUR' AS currency$$),
('pay_ledger', 'new payment SUCCESS', $$SELECT 'WP-NEW-PAID' AS bizno, 'SUCCESS'::pay_status AS status, 10 AS amount,
   'EUR' AS currency, 1 AS attempt, 'BANK-NEW' AS channel_ref$$),
('pay_ledger', 'archived key', $$SELECT 'WP-OLD-1' AS bizno, 'INIT'::pay_status AS status, 10 AS amount, 'EUR' AS currency$$),
('pay_journal', 'a step', $$SELECT 'WP-SUCCESS' AS bizno, 1 AS attempt, 'SUCCESS'::pay_status AS from_status,
   'INIT'::pay_status AS to_status, 10 AS amount, 'EUR' AS currency$$),
('pay_journal', 'second charge confirmed', $$SELECT 'WP-SUCCESS' AS bizno, 1 AS attempt, 'SUCCESS'::pay_status AS from_status,
   'SUCCESS'::pay_status AS to_status, 10 AS amount, 'EUR' AS currency, 'BANK-FORGED' AS channel_ref,
   'confirmed' AS second_charge$$),
('pay_stats_counts', 'a count', $$SELECT 'SUCCESS'::pay_status AS from_status, 'SUCCESS'::pay_status AS to_status,
   true AS refund, 'late report' AS second_charge, 1 AS n$$),
('pay_stats_deletions', 'a deletion', $$SELECT 'WP-GONE' AS bizno, 'INIT'::pay_status AS status, false AS refund$$),
('pay_stats_processing', 'a stuck payment', $$SELECT 'WP-STUCK' AS bizno, now() - interval '1 hour' AS since, 1000 AS ordinal$$),
('pay_stats_state', 'a second state', $$SELECT * FROM pay_stats_state$$),
('pay_ledger_archive', 'an archived row', $$SELECT 'WP-ARCH-NEW' AS bizno, 'SUCCESS'::pay_status AS status, 10 AS amount,
   'EUR' AS currency, 1 AS attempt, 'BANK-A' AS channel_ref, now() AS created_at, now() AS updated_at,
   '2024-11-01'::date AS month, now() AS archived_at$$),
('pay_ledger_archive_default', 'an archived row', $$SELECT 'WP-ARCH-NEW' AS bizno, 'SUCCESS'::pay_status AS status, 10 AS amount,
   'EUR' AS currency, 1 AS attempt, 'BANK-A' AS channel_ref, now() AS created_at, now() AS updated_at,
   '2030-05-01'::date AS month, now() AS archived_at$$),
('pay_ledger_archive_YYYY_MM', 'an archived row', $$SELECT 'WP-ARCH-NEW' AS bizno, 'SUCCESS'::pay_status AS status, 10 AS amount,
   'EUR' AS currency, 1 AS attempt, 'BANK-A' AS channel_ref, now() AS created_at, now() AS updated_at,
   {month}::date AS month, now() AS archived_at$$),
('pay_journal_archive', 'an archived row', $$SELECT 999999999 AS seq, 'WP-OLD-1' AS bizno, 1 AS attempt,
   'SUCCESS'::pay_status AS to_status, now() AS at, '1'::xid8 AS txid, 'forger' AS actor, '2024-11-01'::date AS month$$),
('pay_journal_archive_default', 'an archived row', $$SELECT 999999999 AS seq, 'WP-APPLIED' AS bizno, 1 AS attempt,
   'SUCCESS'::pay_status AS to_status, now() AS at, '1'::xid8 AS txid, 'forger' AS actor, '2030-05-01'::date AS month$$),
('pay_journal_archive_YYYY_MM', 'an archived row', $$SELECT 999999999 AS seq, 'WP-OLD-1' AS bizno, 1 AS attempt,
   'SUCCESS'::pay_status AS to_status, now() AS at, '1'::xid8 AS txid, 'forger' AS actor, {month}::date AS month$$),
('pay_archive_keys', 'a range below', $$SELECT min(lo) - 10 AS lo, min(lo) - 1 AS hi, '\x'::bytea AS hashes FROM pay_archive_keys$$),
('pay_archive_months', 'a month', $$SELECT '2020-01-01'::date AS month, 0 AS payments, 0 AS ledger_rows, 0 AS journal_rows,
   0 AS ledger_digest, 0 AS journal_digest$$),
('pay_archive_runs', 'a run', $$SELECT now() AS before, 0 AS payments, 0 AS ledger_rows, 0 AS journal_rows$$),
('pay_archive_counts', 'a count', $$SELECT 'FAILED'::pay_status AS from_status, 'FAILED'::pay_status AS to_status,
   true AS refund, 'found' AS second_charge, 1 AS n$$),
('pay_maintenance_log', 'an entry', $$SELECT 'forger' AS actor, 'ALTER TABLE' AS command_tag, 'pay_ledger' AS object$$);

-- Another value of a column's type, as an expression of the column's own;
-- NULL for a type it does not know, which shows as a disagreement.
CREATE FUNCTION wp_other_value(col name, typ regtype) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
    RETURN CASE typ
        WHEN 'text'::regtype THEN format('coalesce(%I || ''-forged'', ''forged'')', col)
        WHEN 'integer'::regtype THEN format('%I - 1', col)
        WHEN 'bigint'::regtype THEN format('%I - 1', col)
        WHEN 'numeric'::regtype THEN format('%I + 1', col)
        WHEN 'boolean'::regtype THEN format('NOT %I', col)
        WHEN 'date'::regtype THEN format('(%I - interval ''1 month'')::date', col)
        WHEN 'timestamptz'::regtype THEN format('coalesce(%I, now()) - interval ''1 day''', col)
        WHEN 'interval'::regtype THEN format('coalesce(%I, interval ''1 day'') + interval ''1 day''', col)
        WHEN 'pay_amount'::regtype THEN format('%I + 1', col)
        WHEN 'pay_currency'::regtype THEN format('CASE WHEN %I = ''USD'' THEN ''EUR'' ELSE ''USD'' END', col)
        -- the step back a forger wants: SUCCESS to INIT; a legal one otherwise
        WHEN 'pay_status'::regtype THEN format('CASE %I WHEN ''SUCCESS'' THEN ''INIT'' WHEN ''INIT'' THEN ''PROCESSING''
                                                WHEN ''PROCESSING'' THEN ''FAILED'' ELSE ''INIT'' END::pay_status', col)
        WHEN 'jsonb'::regtype THEN '''{"forged": true}''::jsonb'
        -- a row of pay_archive_keys holding its lo alone
        WHEN 'bytea'::regtype THEN '''\x''::bytea'
        WHEN 'xid8'::regtype THEN format('(%I::text::bigint - 1)::text::xid8', col)
        WHEN 'pg_snapshot'::regtype THEN 'pg_current_snapshot()'
        WHEN 'text[]'::regtype THEN format('%I || ''forged''::text', col)
    END;
END
$$;

CREATE TABLE wp_statements AS
SELECT t.relid, t.kind, 'INSERT ' || r.variant AS statement, 'INSERT' AS verb, r.query, NULL::name AS col
FROM wp_targets AS t JOIN wp_rows AS r ON r.kind = t.kind
UNION ALL
SELECT t.relid, t.kind, 'COPY ' || r.variant, 'COPY', r.query, NULL
FROM wp_targets AS t JOIN wp_rows AS r ON r.kind = t.kind
UNION ALL
SELECT t.relid, t.kind, 'UPDATE ' || a.attname, 'UPDATE', wp_other_value(a.attname, a.atttypid::regtype), a.attname
FROM wp_targets AS t
JOIN pg_attribute AS a ON a.attrelid = t.relid AND a.attnum > 0 AND NOT a.attisdropped
WHERE t.relid <> 'pay_ledger'::regclass OR t.row_filter IS NOT NULL
UNION ALL
SELECT t.relid, t.kind, 'DELETE', 'DELETE', NULL, NULL
FROM wp_targets AS t WHERE t.relid <> 'pay_ledger'::regclass OR t.row_filter IS NOT NULL
UNION ALL
SELECT t.relid, t.kind, 'TRUNCATE', 'TRUNCATE', NULL, NULL
FROM wp_targets AS t WHERE t.row_filter IS NULL;

-- What pay_verify reports before any write.
CREATE TABLE wp_verified AS SELECT bizno, problem FROM pay_verify();

-- One write in its mode, in a subtransaction rolled back: 'ok' or 'ok,
-- detected' (see above), 'ok, no row' when it wrote nothing, or the
-- SQLSTATE and constraint name of its refusal.
CREATE FUNCTION wp_outcome(s wp_statements, row_filter text, row_order text, mode text) RETURNS text
LANGUAGE plpgsql AS $f$
DECLARE
    target_oid oid;
    target_ctid tid;
    month text;
    query text := s.query;
    columns text;
    line text;
    rows bigint;
    wanted text;
    got text;
    result text;
    state text;
    constraint_name text;
BEGIN
    IF s.verb IN ('INSERT', 'COPY') THEN
        month := quote_literal(to_date(substring(s.relid::text from '\d{4}_\d{2}$'), 'YYYY_MM'));
        query := replace(query, '{month}', coalesce(month, 'NULL'));
    ELSIF s.verb IN ('UPDATE', 'DELETE') THEN
        EXECUTE format('SELECT tableoid, ctid FROM %s AS t WHERE %s ORDER BY %s LIMIT 1',
                       s.relid, coalesce(row_filter, 'true'), coalesce(row_order, 'ctid'))
        INTO target_oid, target_ctid;
        IF target_oid IS NULL THEN
            RETURN 'no row to write';
        END IF;
    END IF;
    IF s.verb = 'UPDATE' AND query IS NULL THEN
        RETURN 'no other value of its type';
    END IF;
    IF s.verb IN ('INSERT', 'COPY') THEN
        -- the row's columns, and its values in COPY's text format
        EXECUTE format('SELECT string_agg(quote_ident(wp_k), '', '' ORDER BY wp_n), '
                       '       string_agg(format(''(q.%%I)::text'', wp_k), '', '' ORDER BY wp_n) '
                       'FROM (%s) AS q, json_object_keys(row_to_json(q)) WITH ORDINALITY AS c(wp_k, wp_n)', query)
        INTO columns, line;
        EXECUTE format('SELECT string_agg(coalesce(replace(replace(replace(wp_v, ''\'', ''\\''), E''\t'', ''\t''), '
                       '                           E''\n'', ''\n''), ''\N''), E''\t'' ORDER BY wp_n) '
                       'FROM (%s) AS q, unnest(ARRAY[%s]) WITH ORDINALITY AS c(wp_v, wp_n)', query, line)
        INTO line;
    ELSIF s.verb = 'UPDATE' THEN
        EXECUTE format('SELECT (%s)::text FROM %s AS t WHERE t.tableoid = $1 AND t.ctid = $2', query, s.relid)
        INTO wanted USING target_oid, target_ctid;
    END IF;
    BEGIN
        PERFORM set_config('session_replication_role', mode, true);
        IF s.verb = 'INSERT' THEN
            EXECUTE format('INSERT INTO %s (%s) SELECT %s FROM (%s) AS q', s.relid, columns, columns, query);
        ELSIF s.verb = 'COPY' THEN
            EXECUTE format('COPY %s (%s) FROM PROGRAM %L', s.relid, columns,
                           'printf ''%s\n'' ''' || replace(line, '''', '''\''''') || '''');
        ELSIF s.verb = 'UPDATE' THEN
            EXECUTE format('UPDATE %s AS t SET %I = %s WHERE t.tableoid = $1 AND t.ctid = $2 RETURNING (t.%I)::text',
                           s.relid, s.col, query, s.col)
            INTO got USING target_oid, target_ctid;
        ELSIF s.verb = 'DELETE' THEN
            EXECUTE format('DELETE FROM %s AS t WHERE t.tableoid = $1 AND t.ctid = $2', s.relid)
            USING target_oid, target_ctid;
        ELSE
            EXECUTE format('TRUNCATE %s', s.relid);
        END IF;
        GET DIAGNOSTICS rows = ROW_COUNT;
        IF rows = 0 AND s.verb <> 'TRUNCATE' THEN
            result := 'ok, no row';
        ELSIF got IS DISTINCT FROM wanted THEN
            result := 'ok, derived';
        ELSE
            PERFORM set_config('session_replication_role', 'origin', true);
            result := CASE WHEN EXISTS (SELECT bizno, problem FROM pay_verify()
                                        EXCEPT SELECT bizno, problem FROM wp_verified)
                           THEN 'ok, detected' ELSE 'ok' END;
        END IF;
        RAISE EXCEPTION USING ERRCODE = 'P0003';
    EXCEPTION
        WHEN SQLSTATE 'P0003' THEN
            RETURN result;
        WHEN OTHERS THEN
            GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, constraint_name = CONSTRAINT_NAME;
            RETURN state || coalesce(' ' || nullif(constraint_name, ''), '');
    END;
END
$f$;

BEGIN;
SET CONSTRAINTS ALL IMMEDIATE;
CREATE TEMP TABLE wp_cells AS
SELECT s.kind, s.statement, m.mode, wp_outcome(s, t.row_filter, t.row_order, m.mode) AS outcome
FROM wp_statements AS s
JOIN wp_targets AS t ON t.relid = s.relid AND t.kind = s.kind
CROSS JOIN unnest(ARRAY['origin', 'replica']) AS m(mode);
COMMIT;
SHOW session_replication_role;

-- The policy, as doc/reference.md states it: per table (a LIKE pattern)
-- and statement (COPY is held to its INSERT's row; "UPDATE %" is every
-- column no row of its own names), the outcome in a normal session and in
-- replica mode.  A cell takes the row naming its statement exactly before a
-- pattern, then the row naming its table exactly.
CREATE TABLE wp_policy (kind text, statement text, origin text, replica text);
INSERT INTO wp_policy VALUES
-- the ledger: what decides a charge is the guard's, in every mode
('pay_ledger', 'INSERT new payment', 'ok', 'ok, detected'),
('pay_ledger', 'INSERT new payment SUCCESS', '23514 pay_status_transition', 'ok, detected'),
('pay_ledger', 'INSERT archived key', '55000 pay_archived', '55000 pay_archived'),
('pay_ledger', 'TRUNCATE', '23514 pay_protected_row', '23514 pay_protected_row'),
('pay_ledger % row', 'UPDATE bizno', '23514 pay_immutable_column', '23514 pay_immutable_column'),
('pay_ledger % row', 'UPDATE prefix', '23514 pay_immutable_column', '23514 pay_immutable_column'),
('pay_ledger % row', 'UPDATE biz_id', '23514 pay_immutable_column', '23514 pay_immutable_column'),
('pay_ledger % row', 'UPDATE created_at', '23514 pay_immutable_column', '23514 pay_immutable_column'),
('pay_ledger % row', 'UPDATE parent', '23514 pay_immutable_column', '23514 pay_immutable_column'),
('pay_ledger % row', 'UPDATE refund_key', '23514 pay_immutable_column', '23514 pay_immutable_column'),
('pay_ledger % row', 'UPDATE attempt', 'ok, derived', '23514 pay_attempt_count'),
('pay_ledger % row', 'UPDATE processing_since', 'ok, derived', 'ok'),
('pay_ledger % row', 'UPDATE updated_at', 'ok, derived', 'ok'),
-- the card flow's columns: kind and expires_in held by the bookkeeping
-- (origin mode), expires_at derived
('pay_ledger % row', 'UPDATE kind', '23514 pay_immutable_column', 'ok, detected'),
('pay_ledger % row', 'UPDATE expires_in', '23514 pay_immutable_column', 'ok'),
('pay_ledger % row', 'UPDATE expires_at', 'ok, derived', 'ok'),
('pay_ledger % row', 'UPDATE amount', 'ok', 'ok'),
('pay_ledger % row', 'UPDATE currency', 'ok', 'ok'),
('pay_ledger % row', 'UPDATE channel_ref', 'ok', 'ok'),
('pay_ledger % row', 'UPDATE response', 'ok', 'ok'),
('pay_ledger % row', 'UPDATE last_error', 'ok', 'ok'),
('pay_ledger % row', 'UPDATE note', 'ok', 'ok'),
('pay_ledger % row', 'DELETE', 'ok', 'ok, detected'),
('pay_ledger INIT row', 'UPDATE status', 'ok', '23514 pay_attempt_count'),
('pay_ledger PROCESSING row', 'UPDATE status', 'ok', 'ok, detected'),
('pay_ledger FAILED row', 'UPDATE status', 'ok', 'ok, detected'),
('pay_ledger SUCCESS row', 'UPDATE status', '23514 pay_status_transition', '23514 pay_status_transition'),
('pay_ledger PROCESSING row', 'UPDATE amount', '23514 pay_frozen_column', '23514 pay_frozen_column'),
('pay_ledger PROCESSING row', 'UPDATE currency', '23514 pay_frozen_column', '23514 pay_frozen_column'),
('pay_ledger PROCESSING row', 'DELETE', '23514 pay_protected_row', '23514 pay_protected_row'),
('pay_ledger SUCCESS row', 'UPDATE amount', '23514 pay_frozen_column', '23514 pay_frozen_column'),
('pay_ledger SUCCESS row', 'UPDATE currency', '23514 pay_frozen_column', '23514 pay_frozen_column'),
('pay_ledger SUCCESS row', 'UPDATE channel_ref', '23514 pay_frozen_answer', '23514 pay_frozen_answer'),
('pay_ledger SUCCESS row', 'UPDATE response', '23514 pay_frozen_answer', '23514 pay_frozen_answer'),
('pay_ledger SUCCESS row', 'DELETE', '23514 pay_protected_row', '23514 pay_protected_row'),
-- the journal: appended to by the extension alone
('pay_journal', 'INSERT a step', '23514 pay_written_by_extension', '23514 pay_written_by_extension'),
('pay_journal', 'INSERT second charge confirmed', '23514 pay_written_by_extension', '23514 pay_written_by_extension'),
('pay_journal', 'UPDATE %', '23514 pay_append_only', '23514 pay_append_only'),
('pay_journal', 'DELETE', '23514 pay_append_only', '23514 pay_append_only'),
('pay_journal', 'TRUNCATE', '23514 pay_append_only', '23514 pay_append_only'),
-- the archive: append-only, its partitions too (a month goes with DROP TABLE)
('pay_%_archive%', 'INSERT an archived row', 'ok, detected', 'ok, detected'),
('pay_%_archive%', 'UPDATE %', '23514 pay_append_only', '23514 pay_append_only'),
('pay_%_archive%', 'DELETE', '23514 pay_append_only', '23514 pay_append_only'),
('pay_%_archive%', 'TRUNCATE', '23514 pay_append_only', '23514 pay_append_only'),
('pay_archive_keys', 'INSERT a range below', 'ok', 'ok'),
('pay_archive_keys', 'UPDATE lo', '23514 pay_archive_keys_kept', '23514 pay_archive_keys_kept'),
('pay_archive_keys', 'UPDATE hashes', '23514 pay_archive_keys_kept', '23514 pay_archive_keys_kept'),
('pay_archive_keys', 'UPDATE hi', 'ok', 'ok'),
('pay_archive_keys', 'DELETE', '23514 pay_archive_keys_kept', '23514 pay_archive_keys_kept'),
('pay_archive_keys', 'TRUNCATE', '23514 pay_append_only', '23514 pay_append_only'),
('pay_archive_months', 'INSERT a month', 'ok', 'ok'),
('pay_archive_months', 'UPDATE %', 'ok, detected', 'ok, detected'),
('pay_archive_months', 'UPDATE month', 'ok', 'ok'),
('pay_archive_months', 'UPDATE payments', 'ok', 'ok'),
('pay_archive_months', 'DELETE', 'ok', 'ok'),
('pay_archive_months', 'TRUNCATE', '23514 pay_append_only', '23514 pay_append_only'),
('pay_archive_runs', 'INSERT a run', 'ok', 'ok'),
('pay_archive_runs', 'UPDATE %', '23514 pay_append_only', '23514 pay_append_only'),
('pay_archive_runs', 'DELETE', '23514 pay_append_only', '23514 pay_append_only'),
('pay_archive_runs', 'TRUNCATE', '23514 pay_append_only', '23514 pay_append_only'),
('pay_archive_counts', 'INSERT a count', 'ok', 'ok'),
('pay_archive_counts', 'UPDATE %', 'ok, detected', 'ok, detected'),
-- the row flipped to a refund's is one the table has already
('pay_archive_counts', 'UPDATE refund', '23505 pay_archive_counts_key', '23505 pay_archive_counts_key'),
('pay_archive_counts', 'UPDATE second_charge', 'ok', 'ok'),
('pay_archive_counts', 'UPDATE kind', '23514 pay_archive_counts_kind', '23514 pay_archive_counts_kind'),
-- the row written is a payment's, which sums no amount and has no currency
('pay_archive_counts', 'UPDATE amount', 'ok', 'ok'),
('pay_archive_counts', 'UPDATE currency', 'ok', 'ok'),
('pay_archive_counts', 'DELETE', 'ok, detected', 'ok, detected'),
('pay_archive_counts', 'TRUNCATE', '23514 pay_append_only', '23514 pay_append_only'),
-- pay_stats' tables: the owner's to write; pay_verify compares the counts
('pay_stats_counts', 'INSERT a count', 'ok', 'ok'),
('pay_stats_counts', 'UPDATE %', 'ok, detected', 'ok, detected'),
('pay_stats_counts', 'UPDATE refund', '23505 pay_stats_counts_key', '23505 pay_stats_counts_key'),
('pay_stats_counts', 'UPDATE second_charge', '23514 pay_stats_counts_second_charge', '23514 pay_stats_counts_second_charge'),
('pay_stats_counts', 'UPDATE kind', '23514 pay_stats_counts_kind', '23514 pay_stats_counts_kind'),
('pay_stats_counts', 'UPDATE amount', 'ok', 'ok'),
('pay_stats_counts', 'UPDATE currency', 'ok', 'ok'),
('pay_stats_counts', 'DELETE', 'ok, detected', 'ok, detected'),
('pay_stats_counts', 'TRUNCATE', 'ok, detected', 'ok, detected'),
('pay_stats_deletions', 'INSERT a deletion', 'ok, detected', 'ok, detected'),
('pay_stats_deletions', 'UPDATE %', 'ok', 'ok'),
('pay_stats_deletions', 'UPDATE status', 'ok, detected', 'ok, detected'),
('pay_stats_deletions', 'DELETE', 'ok, detected', 'ok, detected'),
('pay_stats_deletions', 'TRUNCATE', 'ok, detected', 'ok, detected'),
('pay_stats_processing', '%', 'ok', 'ok'),
('pay_stats_state', 'INSERT a second state', '23505 pay_stats_state_pkey', '23505 pay_stats_state_pkey'),
('pay_stats_state', 'UPDATE %', 'ok', 'ok'),
('pay_stats_state', 'UPDATE counted', 'ok, detected', 'ok, detected'),
('pay_stats_state', 'UPDATE singleton', '23514 pay_stats_state_singleton_check', '23514 pay_stats_state_singleton_check'),
('pay_stats_state', 'DELETE', 'ok', 'ok'),
('pay_stats_state', 'TRUNCATE', 'ok', 'ok'),
-- the record of maintenance: append-only, written by the extension alone
('pay_maintenance_log', 'INSERT an entry', '23514 pay_written_by_extension', '23514 pay_written_by_extension'),
('pay_maintenance_log', 'UPDATE %', '23514 pay_append_only', '23514 pay_append_only'),
('pay_maintenance_log', 'DELETE', '23514 pay_append_only', '23514 pay_append_only'),
('pay_maintenance_log', 'TRUNCATE', '23514 pay_append_only', '23514 pay_append_only');

CREATE TEMP VIEW wp_judged AS
SELECT c.kind, c.statement, c.mode, c.outcome,
       (SELECT CASE c.mode WHEN 'origin' THEN p.origin ELSE p.replica END
        FROM wp_policy AS p
        WHERE c.kind LIKE p.kind AND regexp_replace(c.statement, '^COPY ', 'INSERT ') LIKE p.statement
        ORDER BY strpos(p.statement, '%') = 0 DESC, strpos(p.kind, '%') = 0 DESC
        LIMIT 1) AS policy
FROM wp_cells AS c;

-- The cells where the code and the policy disagree: none.
SELECT kind, statement, mode, policy, outcome FROM wp_judged
WHERE policy IS DISTINCT FROM outcome ORDER BY 1, 2, 3;
-- How many were checked: the month partitions count as one table each of
-- the ledger's and the journal's archive, however many months there are.
SELECT count(DISTINCT kind) AS tables, count(DISTINCT (kind, statement, mode)) AS cells,
       count(*) FILTER (WHERE policy IS DISTINCT FROM outcome) AS disagreements,
       count(DISTINCT kind) FILTER (WHERE kind LIKE '%YYYY_MM') = 2 AS month_partitions_checked
FROM wp_judged;

DROP VIEW wp_judged;
DROP TABLE wp_cells;
DROP FUNCTION wp_outcome(wp_statements, text, text, text), wp_other_value(name, regtype);
DROP TABLE wp_targets, wp_rows, wp_statements, wp_verified, wp_policy;
