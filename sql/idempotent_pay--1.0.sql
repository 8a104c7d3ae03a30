/* idempotent_pay 1.0: business serial numbers and the payment state machine */

\echo Use "CREATE EXTENSION idempotent_pay" to load this file. \quit

-- bizNo: generation, validation, parsing (src/bizno.c, src/bizno_format.c)

CREATE FUNCTION @extschema@.pay_bizno(prefix text, biz_id text)
RETURNS text
AS 'MODULE_PATHNAME', 'pay_bizno'
LANGUAGE C VOLATILE PARALLEL SAFE;

COMMENT ON FUNCTION @extschema@.pay_bizno(text, text) IS
'A new, cluster-unique business serial number: PREFIX-BIZID-YYYYMMDDHHMMSSmmm-NODE-UNIQUE+check';

CREATE FUNCTION @extschema@.pay_bizno_valid(bizno text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'pay_bizno_valid'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION @extschema@.pay_bizno_valid(text) IS
'Whether a text is a well-formed bizNo whose check character is right; never raises';

CREATE FUNCTION @extschema@.pay_bizno_parse(bizno text,
	OUT prefix text, OUT biz_id text, OUT issued_at timestamptz, OUT node_id integer)
RETURNS record
AS 'MODULE_PATHNAME', 'pay_bizno_parse'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION @extschema@.pay_bizno_parse(text) IS
'Splits a bizNo into prefix, biz_id, issue time and node id; 22P02 when malformed';

-- The state machine (src/machine.c): states, actions, the legal transitions

CREATE TYPE @extschema@.pay_status AS ENUM ('INIT', 'PROCESSING', 'SUCCESS', 'FAILED');

COMMENT ON TYPE @extschema@.pay_status IS
'The state of a payment: INIT -> PROCESSING -> SUCCESS | FAILED, FAILED -> INIT by reset';

CREATE TYPE @extschema@.pay_action AS ENUM ('PROCEED', 'ALREADY_SUCCEEDED', 'IN_PROGRESS', 'NEEDS_RESET');

COMMENT ON TYPE @extschema@.pay_action IS
'What pay_begin tells the caller: charge now, answer the earlier success, wait or ask the bank, or reset first';

CREATE FUNCTION @extschema@.pay_allowed(from_status @extschema@.pay_status, to_status @extschema@.pay_status)
RETURNS boolean
AS 'MODULE_PATHNAME', 'pay_allowed'
LANGUAGE C IMMUTABLE PARALLEL SAFE;

COMMENT ON FUNCTION @extschema@.pay_allowed(@extschema@.pay_status, @extschema@.pay_status) IS
'Whether from -> to is a legal transition (a NULL from is a new row); the same state again is a no-op, not a transition';

CREATE VIEW @extschema@.pay_transitions AS
    SELECT f.from_status, t.to_status
    FROM (SELECT NULL::@extschema@.pay_status AS from_status
          UNION ALL
          SELECT s FROM pg_catalog.unnest(pg_catalog.enum_range(NULL::@extschema@.pay_status)) AS s) AS f
    CROSS JOIN pg_catalog.unnest(pg_catalog.enum_range(NULL::@extschema@.pay_status)) AS t(to_status)
    WHERE @extschema@.pay_allowed(f.from_status, t.to_status)
    ORDER BY f.from_status NULLS FIRST, t.to_status;

COMMENT ON VIEW @extschema@.pay_transitions IS
'The legal edges of the payment state machine; from_status NULL is a new row';

-- The guard (src/guard.c), shared by the ledger, the journal and user tables

CREATE FUNCTION @extschema@.pay_guard()
RETURNS trigger
AS 'MODULE_PATHNAME', 'pay_guard'
LANGUAGE C;

COMMENT ON FUNCTION @extschema@.pay_guard() IS
'Trigger enforcing the payment state machine: pay_guard(status_column, frozen_column...); with no arguments the table is append-only';

-- Guarding tables that already exist

CREATE FUNCTION @extschema@.pay_protect(tbl regclass, status_column name DEFAULT 'status',
                                        frozen_columns name[] DEFAULT '{}')
RETURNS void
AS $$
DECLARE
    status_type regtype;
    column_name name;
    offending text;
    offending_found boolean;
BEGIN
    IF tbl IS NULL OR status_column IS NULL OR frozen_columns IS NULL THEN
        RAISE EXCEPTION 'tbl, status_column and frozen_columns must not be null' USING ERRCODE = '22004';
    END IF;
    IF (SELECT c.relkind FROM pg_catalog.pg_class AS c WHERE c.oid OPERATOR(pg_catalog.=) tbl)
       OPERATOR(pg_catalog.<>) ALL (ARRAY['r', 'p']::"char"[]) THEN
        RAISE EXCEPTION '% is not a table', tbl USING ERRCODE = '42809';
    END IF;

    -- No row may change between the check of its label and the guard.
    EXECUTE pg_catalog.format('LOCK TABLE %s IN SHARE ROW EXCLUSIVE MODE', tbl);

    FOREACH column_name IN ARRAY pg_catalog.array_prepend(status_column, frozen_columns) LOOP
        IF NOT EXISTS (SELECT FROM pg_catalog.pg_attribute AS a
                       WHERE a.attrelid OPERATOR(pg_catalog.=) tbl
                         AND a.attname OPERATOR(pg_catalog.=) column_name
                         AND a.attnum OPERATOR(pg_catalog.>) 0 AND NOT a.attisdropped) THEN
            RAISE EXCEPTION 'column "%" of relation % does not exist', column_name, tbl
                USING ERRCODE = '42703';
        END IF;
    END LOOP;

    SELECT a.atttypid::regtype INTO status_type
    FROM pg_catalog.pg_attribute AS a
    WHERE a.attrelid OPERATOR(pg_catalog.=) tbl AND a.attname OPERATOR(pg_catalog.=) status_column;
    IF status_type OPERATOR(pg_catalog.<>) ALL (ARRAY['@extschema@.pay_status', 'pg_catalog.text',
                                                      'pg_catalog.varchar']::regtype[]) THEN
        RAISE EXCEPTION 'status column "%" of relation % is of type %', status_column, tbl, status_type
            USING ERRCODE = '42804',
                  HINT = 'A guarded status column is of type pay_status, text or varchar.';
    END IF;

    EXECUTE pg_catalog.format(
        'SELECT %1$I::pg_catalog.text, true FROM %2$s '
        'WHERE %1$I IS NULL OR %1$I::pg_catalog.text OPERATOR(pg_catalog.<>) ALL '
        '(ARRAY[''INIT'', ''PROCESSING'', ''SUCCESS'', ''FAILED'']) LIMIT 1',
        status_column, tbl)
    INTO offending, offending_found;
    IF offending_found THEN
        RAISE EXCEPTION 'invalid payment status % in column "%" of relation %',
            coalesce(pg_catalog.quote_literal(offending), 'NULL'), status_column, tbl
            USING ERRCODE = '22P02',
                  HINT = 'A payment status is INIT, PROCESSING, SUCCESS or FAILED; fix the rows, then protect the table.';
    END IF;

    -- Protecting again replaces the guard, e.g. with other frozen columns.
    PERFORM @extschema@.pay_unprotect(tbl);
    EXECUTE pg_catalog.format(
        'CREATE TRIGGER pay_guard BEFORE INSERT OR UPDATE OR DELETE ON %s '
        'FOR EACH ROW EXECUTE FUNCTION @extschema@.pay_guard(%s)',
        tbl, (SELECT pg_catalog.string_agg(pg_catalog.quote_literal(c), ', ')
              FROM pg_catalog.unnest(pg_catalog.array_prepend(status_column, frozen_columns)) AS c));
    EXECUTE pg_catalog.format(
        'CREATE TRIGGER pay_guard_truncate BEFORE TRUNCATE ON %s '
        'FOR EACH STATEMENT EXECUTE FUNCTION @extschema@.pay_guard(%L)', tbl, status_column);
    EXECUTE pg_catalog.format('ALTER TABLE %s ENABLE ALWAYS TRIGGER pay_guard', tbl);
    EXECUTE pg_catalog.format('ALTER TABLE %s ENABLE ALWAYS TRIGGER pay_guard_truncate', tbl);

    IF NOT (SELECT r.rolsuper FROM pg_catalog.pg_class AS c
            JOIN pg_catalog.pg_roles AS r ON r.oid OPERATOR(pg_catalog.=) c.relowner
            WHERE c.oid OPERATOR(pg_catalog.=) tbl) THEN
        RAISE WARNING 'the owner of % can disable its guard', tbl
            USING DETAIL = 'A table owner may ALTER TABLE ... DISABLE TRIGGER.',
                  HINT = 'Let a role the application does not use own the table.';
    END IF;
END
$$
LANGUAGE plpgsql VOLATILE SET search_path = @extschema@, pg_temp;

COMMENT ON FUNCTION @extschema@.pay_protect(regclass, name, name[]) IS
'Guard an existing table with the payment state machine: transitions, frozen columns, protected rows';

CREATE FUNCTION @extschema@.pay_unprotect(tbl regclass)
RETURNS void
AS $$
DECLARE
    trigger_name name;
BEGIN
    IF tbl IS NULL THEN
        RAISE EXCEPTION 'tbl must not be null' USING ERRCODE = '22004';
    END IF;
    IF tbl OPERATOR(pg_catalog.=) ANY (ARRAY['@extschema@.pay_ledger', '@extschema@.pay_journal']::regclass[]) THEN
        RAISE EXCEPTION 'the guard of % cannot be removed', tbl USING ERRCODE = '42501';
    END IF;
    FOR trigger_name IN
        SELECT t.tgname FROM pg_catalog.pg_trigger AS t
        WHERE t.tgrelid OPERATOR(pg_catalog.=) tbl
          AND t.tgname OPERATOR(pg_catalog.=) ANY (ARRAY['pay_guard', 'pay_guard_truncate']::name[])
    LOOP
        EXECUTE pg_catalog.format('DROP TRIGGER %I ON %s', trigger_name, tbl);
    END LOOP;
END
$$
LANGUAGE plpgsql VOLATILE SET search_path = @extschema@, pg_temp;

COMMENT ON FUNCTION @extschema@.pay_unprotect(regclass) IS
'Remove the guard pay_protect installed';

CREATE VIEW @extschema@.pay_guards AS
    SELECT t.tgrelid::pg_catalog.regclass AS table_name,
           t.tgname AS trigger_name,
           CASE WHEN t.tgnargs OPERATOR(pg_catalog.>) 0 THEN args[1] END AS status_column,
           args[2:t.tgnargs] AS frozen_columns,
           CASE t.tgenabled WHEN 'A' THEN 'always' WHEN 'O' THEN 'origin only'
                            WHEN 'R' THEN 'replica only' ELSE 'disabled' END AS enabled
    FROM pg_catalog.pg_trigger AS t,
         LATERAL (SELECT pg_catalog.string_to_array(
                      pg_catalog.encode(t.tgargs, 'escape'), '\000') AS args) AS a
    WHERE t.tgfoid OPERATOR(pg_catalog.=) '@extschema@.pay_guard()'::pg_catalog.regprocedure
      AND NOT t.tgisinternal;

COMMENT ON VIEW @extschema@.pay_guards IS
'Every pay_guard trigger and whether it fires always; any other value means a guard was weakened';

-- The ledger and the journal (src/journal.c)

CREATE TABLE @extschema@.pay_ledger (
    bizno               text PRIMARY KEY,
    prefix              text,
    biz_id              text,
    status              @extschema@.pay_status NOT NULL DEFAULT 'INIT',
    amount              numeric CHECK (amount OPERATOR(pg_catalog.>) 0),
    currency            text CHECK (currency OPERATOR(pg_catalog.~) '^[A-Z]{3}$'),
    attempt             integer NOT NULL DEFAULT 0,
    channel_ref         text,
    last_error          text,
    created_at          timestamptz NOT NULL DEFAULT pg_catalog.now(),
    updated_at          timestamptz NOT NULL DEFAULT pg_catalog.now(),
    processing_since    timestamptz,
    CONSTRAINT pay_ledger_prefix_biz_id_key UNIQUE (prefix, biz_id)
) WITH (fillfactor = 90);

COMMENT ON TABLE @extschema@.pay_ledger IS
'One row per bizNo: its state, amount and attempts; written through the pay_* functions';
COMMENT ON COLUMN @extschema@.pay_ledger.attempt IS
'How many times the payment entered PROCESSING; kept by the ledger';
COMMENT ON COLUMN @extschema@.pay_ledger.processing_since IS
'When the payment last entered PROCESSING; kept by the ledger';

CREATE TABLE @extschema@.pay_journal (
    seq                 bigserial PRIMARY KEY,
    bizno               text NOT NULL,
    attempt             integer NOT NULL,
    from_status         @extschema@.pay_status,
    to_status           @extschema@.pay_status NOT NULL,
    amount              numeric,
    currency            text,
    at                  timestamptz NOT NULL DEFAULT pg_catalog.now(),
    txid                xid8 NOT NULL DEFAULT pg_catalog.pg_current_xact_id(),
    actor               text NOT NULL DEFAULT CURRENT_USER,
    note                text
);

CREATE INDEX pay_journal_bizno_seq_idx ON @extschema@.pay_journal (bizno, seq);

COMMENT ON TABLE @extschema@.pay_journal IS
'Append-only: one row per transition and per amount change of a ledger row, written by the ledger''s trigger';
COMMENT ON COLUMN @extschema@.pay_journal.from_status IS
'NULL when the ledger row was created';
COMMENT ON COLUMN @extschema@.pay_journal.actor IS
'The role that made the change (the session''s role, not the owner the API runs as)';

CREATE FUNCTION @extschema@.pay_ledger_bookkeeping()
RETURNS trigger
AS 'MODULE_PATHNAME', 'pay_ledger_bookkeeping'
LANGUAGE C;

COMMENT ON FUNCTION @extschema@.pay_ledger_bookkeeping() IS
'Trigger keeping the ledger''s derived columns: prefix, biz_id, attempt, timestamps';

CREATE FUNCTION @extschema@.pay_ledger_journal()
RETURNS trigger
AS 'MODULE_PATHNAME', 'pay_ledger_journal'
LANGUAGE C;

COMMENT ON FUNCTION @extschema@.pay_ledger_journal() IS
'Trigger appending one journal row per transition and amount change of the ledger';

CREATE TRIGGER pay_ledger_guard
    BEFORE INSERT OR UPDATE OR DELETE ON @extschema@.pay_ledger
    FOR EACH ROW EXECUTE FUNCTION @extschema@.pay_guard('status', 'amount', 'currency');
CREATE TRIGGER pay_ledger_guard_truncate
    BEFORE TRUNCATE ON @extschema@.pay_ledger
    FOR EACH STATEMENT EXECUTE FUNCTION @extschema@.pay_guard('status', 'amount', 'currency');
ALTER TABLE @extschema@.pay_ledger ENABLE ALWAYS TRIGGER pay_ledger_guard;
ALTER TABLE @extschema@.pay_ledger ENABLE ALWAYS TRIGGER pay_ledger_guard_truncate;

CREATE TRIGGER pay_ledger_bookkeeping
    BEFORE INSERT OR UPDATE ON @extschema@.pay_ledger
    FOR EACH ROW EXECUTE FUNCTION @extschema@.pay_ledger_bookkeeping();
CREATE TRIGGER pay_ledger_journal_insert
    AFTER INSERT ON @extschema@.pay_ledger
    FOR EACH ROW EXECUTE FUNCTION @extschema@.pay_ledger_journal();
CREATE TRIGGER pay_ledger_journal_update
    AFTER UPDATE ON @extschema@.pay_ledger
    FOR EACH ROW
    WHEN (OLD.status IS DISTINCT FROM NEW.status
          OR OLD.amount IS DISTINCT FROM NEW.amount
          OR OLD.currency IS DISTINCT FROM NEW.currency)
    EXECUTE FUNCTION @extschema@.pay_ledger_journal();

CREATE TRIGGER pay_journal_guard
    BEFORE UPDATE OR DELETE ON @extschema@.pay_journal
    FOR EACH ROW EXECUTE FUNCTION @extschema@.pay_guard();
CREATE TRIGGER pay_journal_guard_truncate
    BEFORE TRUNCATE ON @extschema@.pay_journal
    FOR EACH STATEMENT EXECUTE FUNCTION @extschema@.pay_guard();
ALTER TABLE @extschema@.pay_journal ENABLE ALWAYS TRIGGER pay_journal_guard;
ALTER TABLE @extschema@.pay_journal ENABLE ALWAYS TRIGGER pay_journal_guard_truncate;

SELECT pg_catalog.pg_extension_config_dump('@extschema@.pay_ledger', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.pay_journal', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.pay_journal_seq_seq', '');

REVOKE ALL ON @extschema@.pay_ledger, @extschema@.pay_journal FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.pay_guard(), @extschema@.pay_ledger_bookkeeping(),
    @extschema@.pay_ledger_journal() FROM PUBLIC;

-- The payment API (src/ledger.c): runs as the extension owner

CREATE FUNCTION @extschema@.pay_open(prefix text, biz_id text, amount numeric, currency text DEFAULT NULL)
RETURNS text
AS 'MODULE_PATHNAME', 'pay_open'
LANGUAGE C VOLATILE SECURITY DEFINER SET search_path = @extschema@, pg_temp;

COMMENT ON FUNCTION @extschema@.pay_open(text, text, numeric, text) IS
'The bizNo of business action (prefix, biz_id): the recorded one, or a new one recorded as INIT';

CREATE FUNCTION @extschema@.pay_begin(bizno text, amount numeric DEFAULT NULL, currency text DEFAULT NULL)
RETURNS @extschema@.pay_action
AS 'MODULE_PATHNAME', 'pay_begin'
LANGUAGE C VOLATILE SECURITY DEFINER SET search_path = @extschema@, pg_temp;

COMMENT ON FUNCTION @extschema@.pay_begin(text, numeric, text) IS
'Decide a charge: PROCEED (now PROCESSING), ALREADY_SUCCEEDED, IN_PROGRESS (never charge again) or NEEDS_RESET';

CREATE FUNCTION @extschema@.pay_succeed(bizno text, channel_ref text DEFAULT NULL, attempt integer DEFAULT NULL)
RETURNS @extschema@.pay_status
AS 'MODULE_PATHNAME', 'pay_succeed'
LANGUAGE C VOLATILE SECURITY DEFINER SET search_path = @extschema@, pg_temp;

COMMENT ON FUNCTION @extschema@.pay_succeed(text, text, integer) IS
'PROCESSING -> SUCCESS; a no-op on SUCCESS; attempt, when given, must be the current one';

CREATE FUNCTION @extschema@.pay_fail(bizno text, reason text DEFAULT NULL, attempt integer DEFAULT NULL)
RETURNS @extschema@.pay_status
AS 'MODULE_PATHNAME', 'pay_fail'
LANGUAGE C VOLATILE SECURITY DEFINER SET search_path = @extschema@, pg_temp;

COMMENT ON FUNCTION @extschema@.pay_fail(text, text, integer) IS
'PROCESSING -> FAILED; a no-op on FAILED; attempt, when given, must be the current one';

CREATE FUNCTION @extschema@.pay_reset(bizno text, note text)
RETURNS @extschema@.pay_status
AS 'MODULE_PATHNAME', 'pay_reset'
LANGUAGE C VOLATILE SECURITY DEFINER SET search_path = @extschema@, pg_temp;

COMMENT ON FUNCTION @extschema@.pay_reset(text, text) IS
'FAILED -> INIT, with a note saying why; a no-op on INIT';

CREATE FUNCTION @extschema@.pay_transition(bizno text, target @extschema@.pay_status, note text DEFAULT NULL)
RETURNS @extschema@.pay_status
AS 'MODULE_PATHNAME', 'pay_transition'
LANGUAGE C VOLATILE SECURITY DEFINER SET search_path = @extschema@, pg_temp;

COMMENT ON FUNCTION @extschema@.pay_transition(text, @extschema@.pay_status, text) IS
'The generic guarded transition of a payment to target';

CREATE FUNCTION @extschema@.pay_get(bizno text)
RETURNS @extschema@.pay_ledger
AS $$
    SELECT l FROM @extschema@.pay_ledger AS l WHERE l.bizno OPERATOR(pg_catalog.=) $1
$$
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = @extschema@, pg_temp;

COMMENT ON FUNCTION @extschema@.pay_get(text) IS
'The ledger row of a bizNo, NULL when unknown';

CREATE FUNCTION @extschema@.pay_stuck(older_than interval DEFAULT '1 minute', max_rows integer DEFAULT 100)
RETURNS SETOF @extschema@.pay_ledger
AS $$
BEGIN
    IF older_than IS NULL OR max_rows IS NULL THEN
        RAISE EXCEPTION 'older_than and max_rows must not be null' USING ERRCODE = '22004';
    END IF;
    IF max_rows OPERATOR(pg_catalog.<) 1 THEN
        RAISE EXCEPTION 'max_rows must be at least 1, not %', max_rows USING ERRCODE = '22023';
    END IF;
    RETURN QUERY
        SELECT * FROM @extschema@.pay_ledger AS l
        WHERE l.status OPERATOR(pg_catalog.=) 'PROCESSING'::@extschema@.pay_status
          AND l.processing_since OPERATOR(pg_catalog.<=) (pg_catalog.now() OPERATOR(pg_catalog.-) older_than)
        ORDER BY l.processing_since
        LIMIT max_rows
        FOR UPDATE SKIP LOCKED;
END
$$
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = @extschema@, pg_temp;

COMMENT ON FUNCTION @extschema@.pay_stuck(interval, integer) IS
'PROCESSING payments older than older_than, oldest first, locked FOR UPDATE SKIP LOCKED for one reconciler';

CREATE FUNCTION @extschema@.pay_verify()
RETURNS TABLE (bizno text, problem text)
AS $$
    WITH entries AS (
        SELECT j.bizno, j.seq, j.from_status, j.to_status,
               pg_catalog.lag(j.to_status) OVER w AS previous_status,
               pg_catalog.count(*) FILTER (WHERE j.from_status IS NULL) OVER w AS life
        FROM @extschema@.pay_journal AS j
        WINDOW w AS (PARTITION BY j.bizno ORDER BY j.seq)
    ), latest_life AS (
        SELECT DISTINCT ON (e.bizno) e.bizno, e.life, e.to_status
        FROM entries AS e
        ORDER BY e.bizno, e.seq DESC
    ), summary AS (
        SELECT ll.bizno, ll.to_status AS last_status,
               pg_catalog.count(*) FILTER (
                   WHERE e.to_status OPERATOR(pg_catalog.=) 'PROCESSING'::@extschema@.pay_status
                     AND e.from_status IS DISTINCT FROM e.to_status) AS entries_into_processing
        FROM latest_life AS ll
        JOIN entries AS e ON e.bizno OPERATOR(pg_catalog.=) ll.bizno
                         AND e.life OPERATOR(pg_catalog.=) ll.life
        GROUP BY ll.bizno, ll.to_status
    )
    SELECT l.bizno, 'the journal has no entry for this payment'
    FROM @extschema@.pay_ledger AS l
    LEFT JOIN summary AS s ON s.bizno OPERATOR(pg_catalog.=) l.bizno
    WHERE s.bizno IS NULL
    UNION ALL
    SELECT l.bizno, pg_catalog.format('the ledger says %s, the latest journal entry says %s',
                                      l.status, s.last_status)
    FROM @extschema@.pay_ledger AS l
    JOIN summary AS s ON s.bizno OPERATOR(pg_catalog.=) l.bizno
    WHERE l.status OPERATOR(pg_catalog.<>) s.last_status
    UNION ALL
    SELECT l.bizno, pg_catalog.format('attempt is %s, the journal shows %s entries into PROCESSING',
                                      l.attempt, s.entries_into_processing)
    FROM @extschema@.pay_ledger AS l
    JOIN summary AS s ON s.bizno OPERATOR(pg_catalog.=) l.bizno
    WHERE l.attempt OPERATOR(pg_catalog.<>) s.entries_into_processing
    UNION ALL
    SELECT e.bizno, pg_catalog.format('journal entry %s goes from %s, but the entry before it ended in %s',
                                      e.seq, e.from_status, e.previous_status)
    FROM entries AS e
    WHERE e.from_status IS NOT NULL
      AND e.from_status IS DISTINCT FROM e.previous_status
$$
LANGUAGE sql STABLE SET search_path = @extschema@, pg_temp;

COMMENT ON FUNCTION @extschema@.pay_verify() IS
'Every violation of the ledger/journal invariants; no rows when all hold';

CREATE FUNCTION @extschema@.pay_grant(role regrole)
RETURNS void
AS $$
BEGIN
    IF role IS NULL THEN
        RAISE EXCEPTION 'role must not be null' USING ERRCODE = '22004';
    END IF;
    EXECUTE pg_catalog.format('GRANT USAGE ON SCHEMA @extschema@ TO %s', role);
    EXECUTE pg_catalog.format('GRANT SELECT ON @extschema@.pay_ledger, @extschema@.pay_journal TO %s', role);
    EXECUTE pg_catalog.format(
        'GRANT EXECUTE ON FUNCTION '
        '@extschema@.pay_open(text, text, numeric, text), '
        '@extschema@.pay_begin(text, numeric, text), '
        '@extschema@.pay_succeed(text, text, integer), '
        '@extschema@.pay_fail(text, text, integer), '
        '@extschema@.pay_reset(text, text), '
        '@extschema@.pay_transition(text, @extschema@.pay_status, text), '
        '@extschema@.pay_get(text), '
        '@extschema@.pay_stuck(interval, integer) '
        'TO %s', role);
END
$$
LANGUAGE plpgsql VOLATILE SET search_path = @extschema@, pg_temp;

COMMENT ON FUNCTION @extschema@.pay_grant(regrole) IS
'Give an application role exactly what paying needs: EXECUTE on the API, SELECT on ledger and journal';

REVOKE ALL ON FUNCTION
    @extschema@.pay_open(text, text, numeric, text),
    @extschema@.pay_begin(text, numeric, text),
    @extschema@.pay_succeed(text, text, integer),
    @extschema@.pay_fail(text, text, integer),
    @extschema@.pay_reset(text, text),
    @extschema@.pay_transition(text, @extschema@.pay_status, text),
    @extschema@.pay_get(text),
    @extschema@.pay_stuck(interval, integer),
    @extschema@.pay_verify(),
    @extschema@.pay_grant(regrole),
    @extschema@.pay_protect(regclass, name, name[]),
    @extschema@.pay_unprotect(regclass)
FROM PUBLIC;
