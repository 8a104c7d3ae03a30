/* idempotent_pay 1.4, complete: every object of the extension in its final form */

\echo Use "CREATE EXTENSION idempotent_pay" to load this file. \quit

/*
 * CREATE EXTENSION idempotent_pay (version 1.4) runs this script alone.  An
 * installation of an earlier version reaches the same objects through the
 * update scripts idempotent_pay--1.0--1.1.sql, --1.1--1.2.sql, --1.2--1.3.sql
 * and --1.3--1.4.sql; sql/upgrade.sql compares the two, object by object,
 * and fails on any difference.  CREATE EXTENSION ... VERSION '1.3' (or
 * earlier) runs idempotent_pay--1.0.sql and the update scripts up to it.  A
 * later version changes objects in an update script from 1.4 (or in a
 * complete script of its own); this one stays as 1.4 is.
 *
 * Names, column order, constraint and trigger names are those the update
 * scripts leave behind, so that a dump of one installation restores into
 * the other.  The order of the script:
 *
 *    1. types and domains
 *    2. the tables: the ledger and the journal, their indexes
 *    3. the triggers: the guard, the ledger's bookkeeping and journal, and
 *       the event triggers that keep the ledger and its guards in place
 *    4. the bizNo and the state machine, as functions
 *    5. the payment API, called by applications
 *    6. the operator functions: repair, refunds, second charges,
 *       verification, reconciliation, stats, guarding user tables
 *    7. the views
 *    8. privileges, and pay_grant / pay_grant_operator
 *    9. what pg_dump dumps of the extension's tables
 *
 * C functions name their entry point in the library: an entry point whose
 * name ends in _1_3 or _1_4 is the behaviour of that version, which the
 * library keeps next to the older ones for installations not yet updated.
 */


/* 1. Types and domains ---------------------------------------------------- */

-- The states of a payment and of a refund, and the legal moves between them
-- (pay_allowed, the view pay_transitions).
CREATE TYPE @extschema@.pay_status AS ENUM ('INIT', 'PROCESSING', 'SUCCESS', 'FAILED');

COMMENT ON TYPE @extschema@.pay_status IS
'The state of a payment: INIT -> PROCESSING -> SUCCESS | FAILED, FAILED -> INIT by reset';

-- The decision pay_begin and pay_claim hand the caller before a charge.
CREATE TYPE @extschema@.pay_action AS ENUM ('PROCEED', 'ALREADY_SUCCEEDED', 'IN_PROGRESS', 'NEEDS_RESET');

COMMENT ON TYPE @extschema@.pay_action IS
'What pay_begin tells the caller: charge now, answer the earlier success, wait or ask the bank, or reset first';

-- pay_succeed's answer: a value every driver shows, where a second charge
-- announced as a WARNING would need a notice handler to be seen.
CREATE TYPE @extschema@.pay_settlement AS ENUM ('SUCCESS', 'SECOND_CHARGE');

COMMENT ON TYPE @extschema@.pay_settlement IS
'What pay_succeed answers: SUCCESS, or SECOND_CHARGE when the bank reported another charge of a payment that had succeeded (refund it)';

-- pay_claim's answer: the decision together with the fencing token (the
-- attempt) and, for a payment already settled, what to answer again.
CREATE TYPE @extschema@.pay_claim AS (
    action      @extschema@.pay_action,
    attempt     integer,
    status      @extschema@.pay_status,
    channel_ref text,
    response    jsonb
);

COMMENT ON TYPE @extschema@.pay_claim IS
'What pay_claim answers: the decision, the attempt to charge under or in flight, the status, and a success''s reference and response';

-- One rule for amounts and currencies (src/amount.c), applied alike by the
-- API's checks and by the domains of the ledger's columns: no NaN, no
-- Infinity, nothing at or below zero; three upper-case letters.
CREATE FUNCTION @extschema@.pay_amount_valid(amount numeric)
RETURNS boolean
AS 'MODULE_PATHNAME', 'pay_amount_valid'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION @extschema@.pay_amount_valid(numeric) IS
'Whether a number is a payment amount: finite and greater than 0 (not NaN, not Infinity)';

CREATE FUNCTION @extschema@.pay_currency_valid(currency text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'pay_currency_valid'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION @extschema@.pay_currency_valid(text) IS
'Whether a text is an ISO 4217 currency code: three upper-case letters';

-- The constraints carry the names the update to 1.2 gave them, where a DBA
-- may have had to VALIDATE them by hand.
CREATE DOMAIN @extschema@.pay_amount AS numeric
    CONSTRAINT pay_amount_check CHECK (@extschema@.pay_amount_valid(VALUE));

COMMENT ON DOMAIN @extschema@.pay_amount IS
'A payment amount: finite and greater than 0';

CREATE DOMAIN @extschema@.pay_currency AS text
    CONSTRAINT pay_currency_check CHECK (@extschema@.pay_currency_valid(VALUE));

COMMENT ON DOMAIN @extschema@.pay_currency IS
'An ISO 4217 currency code: three upper-case letters';


/* 2. The tables ----------------------------------------------------------- */

-- The ledger: one row per bizNo, a payment or a refund.  Written only through
-- the API (and by a DBA under the guard); its triggers keep the derived
-- columns and append the journal.  The columns are in the order an
-- installation updated from 1.0 has them (note, parent, refund_key and
-- response were added last), so that rows dumped from either restore into
-- the other.  Rows are updated in place a few times each: fillfactor 90
-- leaves room on the page for those updates.
CREATE TABLE @extschema@.pay_ledger (
    bizno               text PRIMARY KEY,
    prefix              text,
    biz_id              text,
    status              @extschema@.pay_status NOT NULL DEFAULT 'INIT',
    amount              @extschema@.pay_amount,
    currency            @extschema@.pay_currency,
    attempt             integer NOT NULL DEFAULT 0,
    channel_ref         text,
    last_error          text,
    created_at          timestamptz NOT NULL DEFAULT pg_catalog.now(),
    updated_at          timestamptz NOT NULL DEFAULT pg_catalog.now(),
    processing_since    timestamptz,
    note                text,
    parent              text,
    refund_key          text,
    response            jsonb,
    kind                text,
    expires_in          interval,
    expires_at          timestamptz
) WITH (fillfactor = 90);

COMMENT ON TABLE @extschema@.pay_ledger IS
'One row per bizNo: its state, amount and attempts; written through the pay_* functions';
COMMENT ON COLUMN @extschema@.pay_ledger.attempt IS
'How many times the payment entered PROCESSING; kept by the ledger';
COMMENT ON COLUMN @extschema@.pay_ledger.processing_since IS
'When the payment last entered PROCESSING; kept by the ledger';
COMMENT ON COLUMN @extschema@.pay_ledger.note IS
'The note of the latest write, journaled with it; NULL when that write set none (kept by the ledger)';
COMMENT ON COLUMN @extschema@.pay_ledger.parent IS
'A refund''s payment, the bizNo of the SUCCESS payment it pays back; NULL for a payment; never changes';
COMMENT ON COLUMN @extschema@.pay_ledger.refund_key IS
'A refund''s key among the refunds of its payment (pay_refund_open''s refund_key); never changes';
COMMENT ON COLUMN @extschema@.pay_ledger.response IS
'The first answer given with pay_succeed, replayed by every later claim; never changes once SUCCESS';
COMMENT ON COLUMN @extschema@.pay_ledger.kind IS
'The step of the card flow: AUTHORIZATION, or CAPTURE, FINAL_CAPTURE, VOID or INCREMENT of the authorization named by parent; NULL for a payment or a refund; never changes';
COMMENT ON COLUMN @extschema@.pay_ledger.expires_in IS
'An authorization''s life: its hold expires this long after it succeeded; never changes';
COMMENT ON COLUMN @extschema@.pay_ledger.expires_at IS
'When an authorization''s hold expires, fixed by the ledger when the authorization succeeds';

-- One business action, one bizNo.  Only a bizNo made by pay_bizno has a
-- (prefix, biz_id); keys of other systems have neither and need no entry.
CREATE UNIQUE INDEX pay_ledger_prefix_biz_id_key ON @extschema@.pay_ledger (prefix, biz_id)
    WHERE biz_id IS NOT NULL;

-- One refund per refund key of a payment; also the index a payment's refunds
-- are summed through.  Payments (parent NULL) need no entry.
CREATE UNIQUE INDEX pay_ledger_parent_refund_key_key ON @extschema@.pay_ledger (parent, refund_key)
    WHERE parent IS NOT NULL;

-- The holds, by when they expire: what pay_stats_holds reads instead of
-- the whole ledger.  expires_at is set by the ledger alone, when an
-- authorization enters SUCCESS: payments, refunds and steps have no entry,
-- and their updates, which leave it NULL, stay HOT.  A predicate on kind
-- would name the same rows, less the authorizations not yet held, but its
-- text comparison costs every payment's insert (some 6% of a new payment's
-- instructions on PostgreSQL 15); a null test costs nothing measurable.
CREATE INDEX pay_ledger_authorization_expires_at ON @extschema@.pay_ledger (expires_at)
    WHERE expires_at IS NOT NULL;

-- The journal: append-only, one row per transition and per change of amount
-- or currency of a ledger row, written by the ledger's trigger (a second
-- charge's by the API); nothing else writes it.  The entry into SUCCESS
-- names the answer settled with, its reference and a digest of the
-- response, which pay_verify holds the ledger to.  The refund limit,
-- pay_verify and pay_second_charges read it.
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
    note                text,
    channel_ref         text,
    second_charge       text,
    response_digest     bigint
);

-- A payment's history in order.
CREATE INDEX pay_journal_bizno_seq_idx ON @extschema@.pay_journal (bizno, seq);

COMMENT ON TABLE @extschema@.pay_journal IS
'Append-only: one row per transition and per amount change of a ledger row, written by the ledger''s trigger';
COMMENT ON COLUMN @extschema@.pay_journal.channel_ref IS
'The bank''s reference: on the entry into SUCCESS the success''s (since 1.4), on a second charge''s row the second charge''s';
COMMENT ON COLUMN @extschema@.pay_journal.response_digest IS
'On the entry into SUCCESS (since 1.4): jsonb_hash_extended(response, 0) of the response it settled with, NULL for none; pay_verify compares the ledger''s';
COMMENT ON COLUMN @extschema@.pay_journal.second_charge IS
'On the row of a second charge: reported (by a settlement) or confirmed (by a bank statement); written by the API alone, never read from a note';
COMMENT ON COLUMN @extschema@.pay_journal.from_status IS
'NULL when the ledger row was created';
COMMENT ON COLUMN @extschema@.pay_journal.actor IS
'The role that made the change (the session''s role, not the owner the API runs as)';

-- The counts pay_stats reads instead of scanning the ledger (the functions
-- that keep them follow pay_stats_counters).  The journal already holds
-- every transition, so the counts cost a payment nothing: pay_stats_refresh
-- folds the journal rows no count includes yet into pay_stats_counts, and a
-- reader adds the few rows written since.  pay_stats_state says which rows
-- are folded: every row visible in the snapshot "counted", and no row
-- numbered below counted_from is left out of it.  None of these tables is
-- dumped: a restore counts again from the ledger and the journal.
CREATE TABLE @extschema@.pay_stats_counts (
    from_status         @extschema@.pay_status,
    to_status           @extschema@.pay_status,
    refund              boolean NOT NULL,
    second_charge       text,
    n                   bigint NOT NULL,
    kind                text,
    currency            text,
    amount              numeric,
    CONSTRAINT pay_stats_counts_key UNIQUE NULLS NOT DISTINCT (from_status, to_status, refund, second_charge,
                                                               kind, currency),
    CONSTRAINT pay_stats_counts_second_charge
        CHECK (second_charge IN ('reported', 'confirmed', 'found', 'late report')),
    CONSTRAINT pay_stats_counts_kind
        CHECK (kind IN ('AUTHORIZATION', 'CAPTURE', 'FINAL_CAPTURE', 'VOID', 'INCREMENT'))
);

-- No primary key (a NULL status is part of the key): a publication FOR ALL
-- TABLES, which carries this table too, identifies a row by all of it.
ALTER TABLE @extschema@.pay_stats_counts REPLICA IDENTITY FULL;

COMMENT ON TABLE @extschema@.pay_stats_counts IS
'Journal rows folded into pay_stats, by transition (from_status NULL: created; to_status NULL: deleted), refund or payment, and kind of second charge; kept by pay_stats_refresh';
COMMENT ON COLUMN @extschema@.pay_stats_counts.kind IS
'The card flow''s kind of the rows counted (since 1.4); NULL for payments and refunds';
COMMENT ON COLUMN @extschema@.pay_stats_counts.currency IS
'For journal rows of the card flow (since 1.4): their currency, whose amounts amount sums; NULL otherwise';
COMMENT ON COLUMN @extschema@.pay_stats_counts.amount IS
'For journal rows of the card flow (since 1.4): the sum of their amounts; NULL otherwise';

-- The deletions of ledger rows (INIT and FAILED ones may be deleted), which
-- the journal does not record, numbered in the journal's sequence so that
-- they are folded with it; pay_stats_refresh removes them once folded.
CREATE TABLE @extschema@.pay_stats_deletions (
    seq                 bigint PRIMARY KEY
                        DEFAULT pg_catalog.nextval('@extschema@.pay_journal_seq_seq'::pg_catalog.regclass),
    bizno               text NOT NULL,
    status              @extschema@.pay_status NOT NULL,
    refund              boolean NOT NULL,
    txid                xid8 NOT NULL DEFAULT pg_catalog.pg_current_xact_id(),
    kind                text
);

COMMENT ON TABLE @extschema@.pay_stats_deletions IS
'Ledger rows deleted since pay_stats_refresh last folded the journal; written by the ledger''s journal trigger';
COMMENT ON COLUMN @extschema@.pay_stats_deletions.kind IS
'The card flow''s kind of the deleted row (since 1.4); NULL for a payment or refund';

-- The payments PROCESSING as of the fold, and since when: what pay_stats
-- reads stuck payments from.  ordinal is a row's place in the set ordered
-- by since, then bizno (1 for the first), kept by the fold: how many
-- entered PROCESSING before a time is then the ordinal of the last row
-- before it, one probe of the index, where counting them would walk every
-- stuck payment on every read.
CREATE TABLE @extschema@.pay_stats_processing (
    bizno               text PRIMARY KEY,
    since               timestamptz NOT NULL,
    ordinal             bigint NOT NULL
);

CREATE INDEX pay_stats_processing_since ON @extschema@.pay_stats_processing (since, bizno);

COMMENT ON TABLE @extschema@.pay_stats_processing IS
'The payments PROCESSING when pay_stats_refresh last folded the journal, when each entered PROCESSING, and its place in that order (ordinal, from 1; ties by bizno)';

CREATE TABLE @extschema@.pay_stats_state (
    singleton           boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    counted             pg_snapshot NOT NULL,
    counted_from        bigint NOT NULL,
    next_from           bigint NOT NULL,
    next_from_after     text[] NOT NULL,
    folded_at           timestamptz NOT NULL,
    system_identifier   bigint NOT NULL
);

COMMENT ON TABLE @extschema@.pay_stats_state IS
'Which journal rows pay_stats_counts includes: those visible in counted, none numbered below counted_from left out; counted_from becomes next_from once the transactions next_from_after have ended; system_identifier: the server whose transactions these are';

REVOKE ALL ON @extschema@.pay_stats_counts, @extschema@.pay_stats_deletions,
    @extschema@.pay_stats_processing, @extschema@.pay_stats_state FROM PUBLIC;

-- The archive (pay_archive): settled payments moved out of the ledger with
-- their journal rows and refunds, into a partition per month of the
-- payment's last change (UTC), created as needed and named
-- pay_ledger_archive_YYYY_MM and pay_journal_archive_YYYY_MM.  A DBA dumps
-- a month, checks it with pay_archive_verify and drops its two partitions
-- with DROP TABLE.  The archive is append-only (pay_guard) and notes each
-- row it receives (pay_archive_moved), the one way the guard lets a settled
-- payment and its journal rows leave the ledger and the journal.  The
-- partitions are tables of their own, not of the extension: pg_dump dumps
-- them, rows and all.
CREATE TABLE @extschema@.pay_ledger_archive (
    bizno               text NOT NULL,
    prefix              text,
    biz_id              text,
    status              @extschema@.pay_status NOT NULL,
    amount              numeric,
    currency            text,
    attempt             integer NOT NULL,
    channel_ref         text,
    last_error          text,
    created_at          timestamptz NOT NULL,
    updated_at          timestamptz NOT NULL,
    processing_since    timestamptz,
    note                text,
    parent              text,
    refund_key          text,
    response            jsonb,
    month               date NOT NULL,
    archived_at         timestamptz NOT NULL
) PARTITION BY RANGE (month);

COMMENT ON TABLE @extschema@.pay_ledger_archive IS
'Settled payments and their refunds moved out of pay_ledger by pay_archive, a partition per month of the payment''s last change; append-only, removed a month at a time with DROP TABLE';
COMMENT ON COLUMN @extschema@.pay_ledger_archive.month IS
'The month (UTC) of the latest change of the payment and its refunds: the partition the row is in';

CREATE TABLE @extschema@.pay_journal_archive (
    seq                 bigint NOT NULL,
    bizno               text NOT NULL,
    attempt             integer NOT NULL,
    from_status         @extschema@.pay_status,
    to_status           @extschema@.pay_status NOT NULL,
    amount              numeric,
    currency            text,
    at                  timestamptz NOT NULL,
    txid                xid8 NOT NULL,
    actor               text NOT NULL,
    note                text,
    channel_ref         text,
    second_charge       text,
    month               date NOT NULL
) PARTITION BY RANGE (month);

COMMENT ON TABLE @extschema@.pay_journal_archive IS
'The journal rows of the payments in pay_ledger_archive, in their payment''s month; append-only';

-- pay_archive puts rows in a month's own partitions, which it creates first.
-- The default partitions receive what arrives without one: a logical
-- replica's apply of pay_archive's rows, published through the partitioned
-- tables (publish_via_partition_root), where the month's partitions were
-- never created.
--
-- The keys and indexes are each partition's own (pay_archive_partitions
-- makes them), not the partitioned tables': those belong to the extension,
-- and a restore of pg_dump's output, attaching a month's partition to them,
-- would create the indexes a second time beside the dumped ones.
CREATE TABLE @extschema@.pay_ledger_archive_default PARTITION OF @extschema@.pay_ledger_archive DEFAULT;
CREATE TABLE @extschema@.pay_journal_archive_default PARTITION OF @extschema@.pay_journal_archive DEFAULT;
ALTER TABLE @extschema@.pay_ledger_archive_default ADD CONSTRAINT pay_ledger_archive_default_pkey PRIMARY KEY (bizno);
CREATE INDEX ON @extschema@.pay_ledger_archive_default (prefix, biz_id) WHERE biz_id IS NOT NULL;
ALTER TABLE @extschema@.pay_journal_archive_default ADD CONSTRAINT pay_journal_archive_default_pkey PRIMARY KEY (seq);
CREATE INDEX ON @extschema@.pay_journal_archive_default (bizno, seq);
-- (their TRUNCATE guards follow the archive's triggers, below)

-- The packed form of a row of pay_archive_keys, in the C the claim's
-- lookup reads it with (src/archive_keys.c): the hashes after the first,
-- each as its distance from the first, all in the width the last takes.
CREATE FUNCTION @extschema@.pay_archive_key_pack(hashes bigint[])
RETURNS bytea
AS 'MODULE_PATHNAME', 'pay_archive_key_pack'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION @extschema@.pay_archive_key_pack(bigint[]) IS
'The hashes after the first, packed as pay_archive_keys holds them in the row whose lo is the first';

CREATE FUNCTION @extschema@.pay_archive_key_unpack(lo bigint, hashes bytea)
RETURNS bigint[]
AS 'MODULE_PATHNAME', 'pay_archive_key_unpack'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION @extschema@.pay_archive_key_unpack(bigint, bytea) IS
'The hashes of a row of pay_archive_keys, lo first; NULL when the bytes are not a packed row';

-- What outlives the archive: a 64-bit hash of every archived payment --
-- of its business action for a bizNo of pay_bizno, else of its key
-- (pay_archive_key_hash).  Sorted, up to 512 to a row: each row answers for
-- the hashes from its lo to its hi, the next row starting at hi + 1 and the
-- last row's hi the largest bigint, and holds those of them archived, lo
-- itself and the rest packed (pay_archive_key_pack: 7 bytes a hash at ten
-- million).  Ranges of rows never overlap, so that a row covering a hash
-- is the one that answers for it, however it was found: by a probe of the
-- primary key, or by the address the claim's lookup remembered
-- (src/write_archive.c).  Kept in the row, never compressed nor in TOAST
-- (STORAGE PLAIN): 512 hashes pack into at most 4 089 bytes.
CREATE TABLE @extschema@.pay_archive_keys (
    lo                  bigint PRIMARY KEY,
    hi                  bigint NOT NULL,
    hashes              bytea NOT NULL,
    CONSTRAINT pay_archive_keys_hashes_check
        CHECK (lo OPERATOR(pg_catalog.<=) hi AND @extschema@.pay_archive_key_unpack(lo, hashes) IS NOT NULL)
);
ALTER TABLE @extschema@.pay_archive_keys ALTER COLUMN hashes SET STORAGE PLAIN;

COMMENT ON TABLE @extschema@.pay_archive_keys IS
'The hashes of every payment pay_archive moved out of the ledger (pay_archive_key_hash), kept when the archive''s partitions are dropped: what refuses a late retry of an archived payment';

-- What pay_archive moved into each month, which pay_archive_verify checks
-- the month's partitions against: counts, and digests (the sum of
-- hashtextextended of each row's text, with TimeZone UTC and DateStyle ISO).
CREATE TABLE @extschema@.pay_archive_months (
    month               date PRIMARY KEY,
    payments            bigint NOT NULL,
    ledger_rows         bigint NOT NULL,
    journal_rows        bigint NOT NULL,
    ledger_digest       numeric NOT NULL,
    journal_digest      numeric NOT NULL
);

COMMENT ON TABLE @extschema@.pay_archive_months IS
'What pay_archive moved into each month of the archive: payments, ledger rows (payments and refunds), journal rows, and a digest of each partition';

-- The journal of archival: one row per call of pay_archive that moved any.
CREATE TABLE @extschema@.pay_archive_runs (
    run                 bigserial PRIMARY KEY,
    at                  timestamptz NOT NULL DEFAULT pg_catalog.now(),
    before              timestamptz NOT NULL,
    payments            bigint NOT NULL,
    ledger_rows         bigint NOT NULL,
    journal_rows        bigint NOT NULL,
    actor               text NOT NULL DEFAULT SESSION_USER,
    txid                xid8 NOT NULL DEFAULT pg_catalog.pg_current_xact_id()
);

COMMENT ON TABLE @extschema@.pay_archive_runs IS
'One row per call of pay_archive that moved payments: when, up to when, how many, by whom; append-only';

-- The journal rows pay_archive moved, counted as pay_stats_counts counts
-- them: pay_stats goes on counting the transitions they record, and a first
-- fold (after a restore) counts them with the journal.
CREATE TABLE @extschema@.pay_archive_counts (
    from_status         @extschema@.pay_status,
    to_status           @extschema@.pay_status NOT NULL,
    refund              boolean NOT NULL,
    second_charge       text,
    n                   bigint NOT NULL,
    kind                text,
    currency            text,
    amount              numeric,
    CONSTRAINT pay_archive_counts_key UNIQUE NULLS NOT DISTINCT (from_status, to_status, refund, second_charge,
                                                                 kind, currency),
    CONSTRAINT pay_archive_counts_kind
        CHECK (kind IN ('AUTHORIZATION', 'CAPTURE', 'FINAL_CAPTURE', 'VOID', 'INCREMENT'))
);

ALTER TABLE @extschema@.pay_archive_counts REPLICA IDENTITY FULL;

COMMENT ON TABLE @extschema@.pay_archive_counts IS
'The journal rows pay_archive moved out, by transition, refund or payment, and kind of second charge: what pay_stats adds to the journal''s';
COMMENT ON COLUMN @extschema@.pay_archive_counts.kind IS
'The card flow''s kind of the rows counted (since 1.4); NULL for payments and refunds';
COMMENT ON COLUMN @extschema@.pay_archive_counts.currency IS
'For journal rows of the card flow (since 1.4): their currency, whose amounts amount sums; NULL otherwise';
COMMENT ON COLUMN @extschema@.pay_archive_counts.amount IS
'For journal rows of the card flow (since 1.4): the sum of their amounts; NULL otherwise';

REVOKE ALL ON @extschema@.pay_ledger_archive, @extschema@.pay_journal_archive,
    @extschema@.pay_ledger_archive_default, @extschema@.pay_journal_archive_default,
    @extschema@.pay_archive_keys, @extschema@.pay_archive_months, @extschema@.pay_archive_runs,
    @extschema@.pay_archive_counts FROM PUBLIC;



/* 3. The triggers --------------------------------------------------------- */

-- The guard (src/trigger_guard.c): one trigger function for the ledger, the
-- journal and the user tables pay_protect guards.  Its arguments name the status
-- column and the columns frozen once a payment is under way; without
-- arguments the table is append-only.  On the ledger it also holds, in
-- every session mode, a payment's identity, its count of attempts and a
-- success's answer, and refuses a new row of an archived payment.
CREATE FUNCTION @extschema@.pay_guard()
RETURNS trigger
AS 'MODULE_PATHNAME', 'pay_guard_1_3'
LANGUAGE C;

COMMENT ON FUNCTION @extschema@.pay_guard() IS
'Trigger enforcing the payment state machine: pay_guard(status_column, frozen_column...); with no arguments the table is append-only';

-- The ledger's own triggers (src/trigger_bookkeeping.c and
-- src/trigger_journal.c).  Bookkeeping fills the derived columns and holds
-- every write to 1.3's rules for a payment's values (a known currency, an
-- amount in its minor units, bounded texts), to 1.4's bound of an amount
-- (idempotent_pay.max_amount) and to the rules of refunds.
CREATE FUNCTION @extschema@.pay_ledger_bookkeeping()
RETURNS trigger
AS 'MODULE_PATHNAME', 'pay_ledger_bookkeeping_1_4'
LANGUAGE C;

COMMENT ON FUNCTION @extschema@.pay_ledger_bookkeeping() IS
'Trigger keeping the ledger''s derived columns: prefix, biz_id, attempt, timestamps';

CREATE FUNCTION @extschema@.pay_ledger_journal()
RETURNS trigger
AS 'MODULE_PATHNAME', 'pay_ledger_journal'
LANGUAGE C;

COMMENT ON FUNCTION @extschema@.pay_ledger_journal() IS
'Trigger appending one journal row per transition and amount change of the ledger';

-- Triggers of one event fire in the order of their names, so the names are
-- part of the behaviour: on the ledger pay_ledger_bookkeeping completes a
-- row before pay_ledger_guard judges it.  The guards fire ALWAYS, also
-- where session_replication_role is replica, as in a logical replica's
-- apply.
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
-- No WHEN clause: the trigger function itself skips an UPDATE that changes
-- none of status, amount and currency, which costs less than a WHEN clause
-- compiled again for every statement.
CREATE TRIGGER pay_ledger_journal_update
    AFTER UPDATE ON @extschema@.pay_ledger
    FOR EACH ROW EXECUTE FUNCTION @extschema@.pay_ledger_journal();
-- A deletion is recorded for pay_stats' counts, which the journal alone
-- would go on counting.
CREATE TRIGGER pay_ledger_journal_delete
    AFTER DELETE ON @extschema@.pay_ledger
    FOR EACH ROW EXECUTE FUNCTION @extschema@.pay_ledger_journal();

-- On INSERT the journal's guard lets pass only the rows the extension's own
-- code writes, a logical replica's apply and a restore: a row of one's own
-- there would forge a step or a second charge.
CREATE TRIGGER pay_journal_guard
    BEFORE INSERT OR UPDATE OR DELETE ON @extschema@.pay_journal
    FOR EACH ROW EXECUTE FUNCTION @extschema@.pay_guard();
CREATE TRIGGER pay_journal_guard_truncate
    BEFORE TRUNCATE ON @extschema@.pay_journal
    FOR EACH STATEMENT EXECUTE FUNCTION @extschema@.pay_guard();
ALTER TABLE @extschema@.pay_journal ENABLE ALWAYS TRIGGER pay_journal_guard;
ALTER TABLE @extschema@.pay_journal ENABLE ALWAYS TRIGGER pay_journal_guard_truncate;

-- The archive's trigger function (src/trigger_archive.c).
CREATE FUNCTION @extschema@.pay_archive_moved()
RETURNS trigger
AS 'MODULE_PATHNAME', 'pay_archive_moved'
LANGUAGE C;

COMMENT ON FUNCTION @extschema@.pay_archive_moved() IS
'Trigger noting each row the archive receives, which the same transaction may then delete from the ledger or the journal';

REVOKE ALL ON FUNCTION @extschema@.pay_archive_moved() FROM PUBLIC;

-- Row triggers of a partitioned table are every partition's; its TRUNCATE
-- trigger is not.  The archive's TRUNCATE is refused, and each partition's
-- by a trigger of its own of the same name (pay_archive_partitions creates
-- a month's); a month's partitions go with DROP TABLE.
CREATE TRIGGER pay_ledger_archive_guard
    BEFORE UPDATE OR DELETE ON @extschema@.pay_ledger_archive
    FOR EACH ROW EXECUTE FUNCTION @extschema@.pay_guard();
CREATE TRIGGER pay_ledger_archive_guard_truncate
    BEFORE TRUNCATE ON @extschema@.pay_ledger_archive
    FOR EACH STATEMENT EXECUTE FUNCTION @extschema@.pay_guard();
CREATE TRIGGER pay_ledger_archive_moved
    BEFORE INSERT ON @extschema@.pay_ledger_archive
    FOR EACH ROW EXECUTE FUNCTION @extschema@.pay_archive_moved('ledger');
CREATE TRIGGER pay_journal_archive_guard
    BEFORE UPDATE OR DELETE ON @extschema@.pay_journal_archive
    FOR EACH ROW EXECUTE FUNCTION @extschema@.pay_guard();
CREATE TRIGGER pay_journal_archive_guard_truncate
    BEFORE TRUNCATE ON @extschema@.pay_journal_archive
    FOR EACH STATEMENT EXECUTE FUNCTION @extschema@.pay_guard();
CREATE TRIGGER pay_journal_archive_moved
    BEFORE INSERT ON @extschema@.pay_journal_archive
    FOR EACH ROW EXECUTE FUNCTION @extschema@.pay_archive_moved('journal');
CREATE TRIGGER pay_archive_runs_guard
    BEFORE UPDATE OR DELETE ON @extschema@.pay_archive_runs
    FOR EACH ROW EXECUTE FUNCTION @extschema@.pay_guard();
-- What outlives the archive's partitions and the record of archiving are
-- emptied by nobody: without the hashes a late retry of an archived payment
-- would be charged again, and without the months and counts pay_stats and
-- pay_archive_verify would lie.  pay_archive only adds to them.
CREATE TRIGGER pay_archive_runs_guard_truncate
    BEFORE TRUNCATE ON @extschema@.pay_archive_runs
    FOR EACH STATEMENT EXECUTE FUNCTION @extschema@.pay_guard();
CREATE TRIGGER pay_archive_keys_guard_truncate
    BEFORE TRUNCATE ON @extschema@.pay_archive_keys
    FOR EACH STATEMENT EXECUTE FUNCTION @extschema@.pay_guard();
CREATE TRIGGER pay_archive_months_guard_truncate
    BEFORE TRUNCATE ON @extschema@.pay_archive_months
    FOR EACH STATEMENT EXECUTE FUNCTION @extschema@.pay_guard();
CREATE TRIGGER pay_archive_counts_guard_truncate
    BEFORE TRUNCATE ON @extschema@.pay_archive_counts
    FOR EACH STATEMENT EXECUTE FUNCTION @extschema@.pay_guard();
CREATE TRIGGER pay_ledger_archive_guard_truncate
    BEFORE TRUNCATE ON @extschema@.pay_ledger_archive_default
    FOR EACH STATEMENT EXECUTE FUNCTION @extschema@.pay_guard();
CREATE TRIGGER pay_journal_archive_guard_truncate
    BEFORE TRUNCATE ON @extschema@.pay_journal_archive_default
    FOR EACH STATEMENT EXECUTE FUNCTION @extschema@.pay_guard();
ALTER TABLE @extschema@.pay_ledger_archive_default ENABLE ALWAYS TRIGGER pay_ledger_archive_guard_truncate;
ALTER TABLE @extschema@.pay_journal_archive_default ENABLE ALWAYS TRIGGER pay_journal_archive_guard_truncate;
ALTER TABLE @extschema@.pay_ledger_archive ENABLE ALWAYS TRIGGER pay_ledger_archive_guard;
ALTER TABLE @extschema@.pay_ledger_archive ENABLE ALWAYS TRIGGER pay_ledger_archive_guard_truncate;
ALTER TABLE @extschema@.pay_ledger_archive ENABLE ALWAYS TRIGGER pay_ledger_archive_moved;
ALTER TABLE @extschema@.pay_journal_archive ENABLE ALWAYS TRIGGER pay_journal_archive_guard;
ALTER TABLE @extschema@.pay_journal_archive ENABLE ALWAYS TRIGGER pay_journal_archive_guard_truncate;
ALTER TABLE @extschema@.pay_journal_archive ENABLE ALWAYS TRIGGER pay_journal_archive_moved;
ALTER TABLE @extschema@.pay_archive_runs ENABLE ALWAYS TRIGGER pay_archive_runs_guard;
ALTER TABLE @extschema@.pay_archive_runs ENABLE ALWAYS TRIGGER pay_archive_runs_guard_truncate;
ALTER TABLE @extschema@.pay_archive_keys ENABLE ALWAYS TRIGGER pay_archive_keys_guard_truncate;
ALTER TABLE @extschema@.pay_archive_months ENABLE ALWAYS TRIGGER pay_archive_months_guard_truncate;
ALTER TABLE @extschema@.pay_archive_counts ENABLE ALWAYS TRIGGER pay_archive_counts_guard_truncate;

-- pay_archive_keys loses no hash: whatever writes it, pay_archive_add_keys'
-- merge included, every hash of a row replaced or removed is, at commit,
-- still in the row whose range covers it, and no row's range overlaps
-- another's (the claim's lookup trusts the one row covering a hash).  A
-- deferred check: the merge deletes rows before it inserts their
-- successors.  Fires in every session mode, and reads the table as its
-- owner: at commit, the session's role is whoever called pay_archive.
CREATE FUNCTION @extschema@.pay_archive_keys_kept()
RETURNS trigger
AS $$
DECLARE
    lost bigint;
    neighbour @extschema@.pay_archive_keys;
BEGIN
    IF TG_OP OPERATOR(pg_catalog.<>) 'INSERT' THEN
        SELECT o.h INTO lost
        FROM (SELECT o.h FROM pg_catalog.unnest(@extschema@.pay_archive_key_unpack(OLD.lo, OLD.hashes)) AS o(h)
              EXCEPT
              SELECT x.h FROM @extschema@.pay_archive_keys AS r,
                              pg_catalog.unnest(@extschema@.pay_archive_key_unpack(r.lo, r.hashes)) AS x(h)
              WHERE r.lo OPERATOR(pg_catalog.<=) OLD.hi AND r.hi OPERATOR(pg_catalog.>=) OLD.lo
                AND x.h OPERATOR(pg_catalog.>=) r.lo AND x.h OPERATOR(pg_catalog.<=) r.hi) AS o
        LIMIT 1;
        IF FOUND THEN
            RAISE EXCEPTION 'pay_archive_keys would lose the hash % of an archived payment', lost
                USING ERRCODE = '23514', CONSTRAINT = 'pay_archive_keys_kept',
                      DETAIL = pg_catalog.format('The row from %s held it; no row covering it holds it now.', OLD.lo),
                      HINT = 'The hashes refuse late retries of archived payments: only pay_archive adds to them, and nothing removes them.';
        END IF;
    END IF;
    IF TG_OP OPERATOR(pg_catalog.<>) 'DELETE' THEN
        -- the row as it is at commit, if still there
        SELECT * INTO neighbour FROM @extschema@.pay_archive_keys AS k
        WHERE k.lo OPERATOR(pg_catalog.<) NEW.lo ORDER BY k.lo DESC LIMIT 1;
        IF FOUND AND neighbour.hi OPERATOR(pg_catalog.>=) NEW.lo
           AND EXISTS (SELECT FROM @extschema@.pay_archive_keys AS k WHERE k.lo OPERATOR(pg_catalog.=) NEW.lo) THEN
            RAISE EXCEPTION 'the rows of pay_archive_keys from % and from % would both answer for the hashes from %',
                            neighbour.lo, NEW.lo, NEW.lo
                USING ERRCODE = '23514', CONSTRAINT = 'pay_archive_keys_kept';
        END IF;
        SELECT * INTO neighbour FROM @extschema@.pay_archive_keys AS k
        WHERE k.lo OPERATOR(pg_catalog.>) NEW.lo ORDER BY k.lo LIMIT 1;
        IF FOUND AND neighbour.lo OPERATOR(pg_catalog.<=)
                     (SELECT k.hi FROM @extschema@.pay_archive_keys AS k WHERE k.lo OPERATOR(pg_catalog.=) NEW.lo) THEN
            RAISE EXCEPTION 'the rows of pay_archive_keys from % and from % would both answer for the hashes from %',
                            NEW.lo, neighbour.lo, neighbour.lo
                USING ERRCODE = '23514', CONSTRAINT = 'pay_archive_keys_kept';
        END IF;
    END IF;
    RETURN NULL;
END
$$
LANGUAGE plpgsql SECURITY DEFINER SET search_path = @extschema@, pg_temp;

COMMENT ON FUNCTION @extschema@.pay_archive_keys_kept() IS
'Constraint trigger of pay_archive_keys, checked at commit: no hash of a row replaced or removed is lost, no two rows'' ranges overlap';

REVOKE ALL ON FUNCTION @extschema@.pay_archive_keys_kept() FROM PUBLIC;

CREATE CONSTRAINT TRIGGER pay_archive_keys_kept
    AFTER INSERT OR UPDATE OR DELETE ON @extschema@.pay_archive_keys
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION @extschema@.pay_archive_keys_kept();
ALTER TABLE @extschema@.pay_archive_keys ENABLE ALWAYS TRIGGER pay_archive_keys_kept;

-- The ledger across the database's life (src/lifecycle.c): dropping the
-- extension, its schema or its owner's objects would drop the payments
-- with it, so while the ledger holds one that is refused.
CREATE FUNCTION @extschema@.pay_refuse_drop()
RETURNS event_trigger
AS 'MODULE_PATHNAME', 'pay_refuse_drop'
LANGUAGE C;

COMMENT ON FUNCTION @extschema@.pay_refuse_drop() IS
'Event trigger refusing DROP EXTENSION idempotent_pay (and DROP SCHEMA ... CASCADE of its schema, DROP OWNED BY its owner) while pay_ledger holds a payment';

CREATE EVENT TRIGGER pay_refuse_drop ON ddl_command_start
    WHEN TAG IN ('DROP EXTENSION', 'DROP SCHEMA', 'DROP OWNED')
    EXECUTE FUNCTION @extschema@.pay_refuse_drop();
ALTER EVENT TRIGGER pay_refuse_drop ENABLE ALWAYS;

-- ALTER TABLE ... ENABLE TRIGGER [ALL] (pg_restore --disable-triggers ends
-- with it) turns a guard back to firing in origin sessions only; this event
-- trigger, after every ALTER TABLE in the database and by any role, makes
-- such a guard ALWAYS again.  It reads the catalogs only, so it needs no
-- privilege on the extension's schema, and names nothing by its schema.
CREATE FUNCTION @extschema@.pay_keep_guards_always()
RETURNS event_trigger
AS $$
DECLARE
    guard record;
BEGIN
    FOR guard IN
        SELECT t.tgrelid::pg_catalog.regclass AS tbl, t.tgname
        FROM pg_catalog.pg_trigger AS t
        JOIN pg_catalog.pg_event_trigger_ddl_commands() AS c
          ON c.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
         AND c.objid OPERATOR(pg_catalog.=) t.tgrelid
        JOIN pg_catalog.pg_proc AS p ON p.oid OPERATOR(pg_catalog.=) t.tgfoid
        JOIN pg_catalog.pg_extension AS e ON e.extnamespace OPERATOR(pg_catalog.=) p.pronamespace
        WHERE e.extname OPERATOR(pg_catalog.=) 'idempotent_pay'
          AND p.proname OPERATOR(pg_catalog.=) ANY
              (ARRAY['pay_guard', 'pay_archive_moved', 'pay_archive_keys_kept']::pg_catalog.name[])
          AND t.tgenabled OPERATOR(pg_catalog.=) 'O'
    LOOP
        EXECUTE pg_catalog.format('ALTER TABLE %s ENABLE ALWAYS TRIGGER %I', guard.tbl, guard.tgname);
    END LOOP;
END
$$
LANGUAGE plpgsql SET search_path = @extschema@, pg_temp;

COMMENT ON FUNCTION @extschema@.pay_keep_guards_always() IS
'Event trigger putting a re-enabled guard (pay_guard, pay_archive_moved, pay_archive_keys_kept) back to ENABLE ALWAYS';

CREATE EVENT TRIGGER pay_keep_guards_always ON ddl_command_end
    WHEN TAG IN ('ALTER TABLE')
    EXECUTE FUNCTION @extschema@.pay_keep_guards_always();
ALTER EVENT TRIGGER pay_keep_guards_always ENABLE ALWAYS;

-- DDL on the extension's own objects (src/ddl.c): a column rewritten, an
-- enum label renamed, a trigger, rule or policy of one's own on the ledger
-- can each make a settled payment payable again, so such DDL is refused,
-- superusers' too, unless a superuser has set idempotent_pay.maintenance.
-- What maintenance lets through is recorded here, append-only, by the
-- extension alone (its guard refuses any other INSERT, as the journal's).
CREATE TABLE @extschema@.pay_maintenance_log (
    at                  timestamptz NOT NULL DEFAULT pg_catalog.now(),
    actor               text NOT NULL,
    command_tag         text NOT NULL,
    object              text NOT NULL,
    command             text,
    txid                xid8 NOT NULL DEFAULT pg_catalog.pg_current_xact_id()
);

COMMENT ON TABLE @extschema@.pay_maintenance_log IS
'One row per DDL statement on the extension''s objects let through by idempotent_pay.maintenance: when, by whom, what, the statement, its transaction; append-only';

CREATE TRIGGER pay_maintenance_log_guard
    BEFORE INSERT OR UPDATE OR DELETE ON @extschema@.pay_maintenance_log
    FOR EACH ROW EXECUTE FUNCTION @extschema@.pay_guard();
CREATE TRIGGER pay_maintenance_log_guard_truncate
    BEFORE TRUNCATE ON @extschema@.pay_maintenance_log
    FOR EACH STATEMENT EXECUTE FUNCTION @extschema@.pay_guard();
ALTER TABLE @extschema@.pay_maintenance_log ENABLE ALWAYS TRIGGER pay_maintenance_log_guard;
ALTER TABLE @extschema@.pay_maintenance_log ENABLE ALWAYS TRIGGER pay_maintenance_log_guard_truncate;

REVOKE ALL ON @extschema@.pay_maintenance_log FROM PUBLIC;

CREATE FUNCTION @extschema@.pay_refuse_ddl()
RETURNS event_trigger
AS 'MODULE_PATHNAME', 'pay_refuse_ddl'
LANGUAGE C;

COMMENT ON FUNCTION @extschema@.pay_refuse_ddl() IS
'Event trigger refusing DDL on the extension''s tables, types and domains (55000 pay_ddl_refused) outside its scripts, the archive''s and pg_repack''s own forms, and idempotent_pay.maintenance, which records it in pay_maintenance_log';

REVOKE ALL ON FUNCTION @extschema@.pay_refuse_ddl() FROM PUBLIC;

CREATE EVENT TRIGGER pay_refuse_ddl ON ddl_command_start
    WHEN TAG IN ('ALTER TABLE', 'ALTER TYPE', 'ALTER DOMAIN', 'CREATE TRIGGER', 'ALTER TRIGGER',
                 'CREATE RULE', 'ALTER RULE', 'CREATE POLICY', 'ALTER POLICY')
    EXECUTE FUNCTION @extschema@.pay_refuse_ddl();
ALTER EVENT TRIGGER pay_refuse_ddl ENABLE ALWAYS;


/* 4. The bizNo and the state machine -------------------------------------- */

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

-- The legal transitions (src/machine.c), the same table the guard applies.
CREATE FUNCTION @extschema@.pay_allowed(from_status @extschema@.pay_status, to_status @extschema@.pay_status)
RETURNS boolean
AS 'MODULE_PATHNAME', 'pay_allowed'
LANGUAGE C IMMUTABLE PARALLEL SAFE;

COMMENT ON FUNCTION @extschema@.pay_allowed(@extschema@.pay_status, @extschema@.pay_status) IS
'Whether from -> to is a legal transition (a NULL from is a new row); the same state again is a no-op, not a transition';

-- The currencies a payment may be in: ISO 4217's active codes with their
-- minor units, compiled into the library (src/currency.c); the view
-- pay_currencies shows them.
CREATE FUNCTION @extschema@.pay_currency_list(OUT code text, OUT minor_units integer, OUT name text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'pay_currency_list'
LANGUAGE C STABLE STRICT PARALLEL SAFE ROWS 170;


/* 5. The payment API ------------------------------------------------------ */

-- The API, C functions of the library (src/api_*.c), runs as the extension's owner
-- (SECURITY DEFINER): an application role is granted EXECUTE on it
-- (pay_grant) and nothing on the ledger but SELECT.  A NULL where a value
-- is required is 22004 naming it.  The declarations keep the defaults of
-- earlier versions, also where 1.3 requires the value (a new payment's
-- amount and currency, a settlement's attempt and reference): an update
-- cannot drop a default in place, and a fresh install declares the
-- functions as an updated one has them.
--
-- The hot path -- pay_begin, pay_claim, pay_succeed, pay_fail -- has no SET
-- clause: the C code writes and settles a payment through the access
-- methods, runs no SQL and resolves no name there, and pins search_path
-- itself for every statement it runs otherwise.  The other functions carry
-- SET search_path.

CREATE FUNCTION @extschema@.pay_open(prefix text, biz_id text, amount numeric, currency text DEFAULT NULL)
RETURNS text
AS 'MODULE_PATHNAME', 'pay_open_1_4'
LANGUAGE C VOLATILE SECURITY DEFINER SET search_path = @extschema@, pg_temp;

COMMENT ON FUNCTION @extschema@.pay_open(text, text, numeric, text) IS
'The bizNo of business action (prefix, biz_id): the recorded one, or a new one recorded as INIT';

CREATE FUNCTION @extschema@.pay_claim(bizno text, amount numeric DEFAULT NULL, currency text DEFAULT NULL)
RETURNS @extschema@.pay_claim
AS 'MODULE_PATHNAME', 'pay_claim_1_4'
LANGUAGE C VOLATILE SECURITY DEFINER;

COMMENT ON FUNCTION @extschema@.pay_claim(text, numeric, text) IS
'pay_begin''s decision and, in the same round trip, the attempt (the fencing token), status, channel_ref and stored response';

CREATE FUNCTION @extschema@.pay_open_claim(prefix text, biz_id text, amount numeric, currency text DEFAULT NULL,
    OUT bizno text, OUT action @extschema@.pay_action, OUT attempt integer, OUT status @extschema@.pay_status,
    OUT channel_ref text, OUT response jsonb)
RETURNS record
AS 'MODULE_PATHNAME', 'pay_open_claim_1_4'
LANGUAGE C VOLATILE SECURITY DEFINER SET search_path = @extschema@, pg_temp;

COMMENT ON FUNCTION @extschema@.pay_open_claim(text, text, numeric, text) IS
'pay_open and pay_claim in one call: the bizNo of the business action and the claim on it';

-- pay_begin answers the decision alone, as it did before pay_claim existed.
CREATE FUNCTION @extschema@.pay_begin(bizno text, amount numeric DEFAULT NULL, currency text DEFAULT NULL)
RETURNS @extschema@.pay_action
AS 'MODULE_PATHNAME', 'pay_begin_1_4'
LANGUAGE C VOLATILE SECURITY DEFINER;

COMMENT ON FUNCTION @extschema@.pay_begin(text, numeric, text) IS
'Decide a charge: PROCEED (now PROCESSING), ALREADY_SUCCEEDED, IN_PROGRESS (never charge again) or NEEDS_RESET';

-- The settlements, each under the attempt the claim returned: an answer for
-- an earlier attempt never settles a later one.  The attempt is declared
-- bigint so that a smallint, an integer and a bigint all resolve to the one
-- function (as would a NULL or a quoted literal, which overloads make
-- ambiguous); beyond an integer's range it is 22003.
CREATE FUNCTION @extschema@.pay_succeed(bizno text, channel_ref text DEFAULT NULL, attempt bigint DEFAULT NULL,
                                        response jsonb DEFAULT NULL)
RETURNS @extschema@.pay_settlement
AS 'MODULE_PATHNAME', 'pay_succeed_1_4'
LANGUAGE C VOLATILE SECURITY DEFINER;

COMMENT ON FUNCTION @extschema@.pay_succeed(text, text, bigint, jsonb) IS
'PROCESSING -> SUCCESS under the attempt pay_claim returned, with the bank''s reference (both required), storing the response every later claim replays; on SUCCESS a no-op, or SECOND_CHARGE when it brings another reference';

CREATE FUNCTION @extschema@.pay_fail(bizno text, reason text DEFAULT NULL, attempt bigint DEFAULT NULL)
RETURNS @extschema@.pay_status
AS 'MODULE_PATHNAME', 'pay_fail_1_4'
LANGUAGE C VOLATILE SECURITY DEFINER;

COMMENT ON FUNCTION @extschema@.pay_fail(text, text, bigint) IS
'PROCESSING -> FAILED under the attempt pay_claim returned (required); a no-op on FAILED';

-- Batches (src/api_batch.c): a thousand claims or settlements in one call,
-- one answer per input in input order, each what the single call answers --
-- or the refusal it raises, as its SQLSTATE and constraint name, without
-- aborting the rest.  A refusal of the whole call: the batch's claims inside
-- a transaction block (25001), a NULL array or scalar argument (22004),
-- arrays of unequal lengths or of more than one dimension (22023).  The
-- attempts are bigint[], as pay_succeed's attempt is bigint: an integer[]
-- resolves to it as well.
CREATE FUNCTION @extschema@.pay_open_claim_many(prefix text, biz_ids text[], amounts numeric[], currency text)
RETURNS TABLE (biz_id text, bizno text, action @extschema@.pay_action, attempt integer,
               sqlstate text, constraint_name text)
AS 'MODULE_PATHNAME', 'pay_open_claim_many'
LANGUAGE C VOLATILE SECURITY DEFINER SET search_path = @extschema@, pg_temp;

COMMENT ON FUNCTION @extschema@.pay_open_claim_many(text, text[], numeric[], text) IS
'pay_open_claim for each (biz_id, amount) in input order, in one call: per input its bizNo, action and attempt, or the SQLSTATE and constraint name of the refusal pay_open_claim would raise';

CREATE FUNCTION @extschema@.pay_settle_many(biznos text[], attempts bigint[], outcomes @extschema@.pay_status[],
                                            channel_refs text[], reasons text[])
RETURNS TABLE (bizno text, result text, sqlstate text, constraint_name text)
AS 'MODULE_PATHNAME', 'pay_settle_many'
LANGUAGE C VOLATILE SECURITY DEFINER SET search_path = @extschema@, pg_temp;

COMMENT ON FUNCTION @extschema@.pay_settle_many(text[], bigint[], @extschema@.pay_status[], text[], text[]) IS
'pay_succeed (outcome SUCCESS, with its channel_ref) or pay_fail (outcome FAILED, with its reason) for each input in input order, in one call: per input SUCCESS, SECOND_CHARGE or FAILED, or the SQLSTATE and constraint name of the refusal that call would raise';

-- Reading a payment (src/api_lookup.c): the ledger's row, else, when the
-- ledger has none, the archive's while its month is kept -- with the
-- ledger's columns, the archive's answer as the ledger's --, and 55000
-- pay_archived once the month is dropped; a bizNo whose check character
-- fails is 22P02.  No row: no payment has the key or business action.
-- pay_find creates nothing.
CREATE FUNCTION @extschema@.pay_get(bizno text)
RETURNS SETOF @extschema@.pay_ledger
AS 'MODULE_PATHNAME', 'pay_get_1_4'
LANGUAGE C STABLE STRICT SECURITY DEFINER ROWS 1 SET search_path = @extschema@, pg_temp;

COMMENT ON FUNCTION @extschema@.pay_get(text) IS
'The row of a bizNo: the ledger''s, else the archive''s (55000 pay_archived once its month is dropped); 22P02 for a mistyped bizNo; no row when unknown';

CREATE FUNCTION @extschema@.pay_find(prefix text, biz_id text)
RETURNS SETOF @extschema@.pay_ledger
AS 'MODULE_PATHNAME', 'pay_find_1_4'
LANGUAGE C STABLE STRICT SECURITY DEFINER ROWS 1 SET search_path = @extschema@, pg_temp;

COMMENT ON FUNCTION @extschema@.pay_find(text, text) IS
'The row of business action (prefix, biz_id): the ledger''s, else the archive''s (55000 pay_archived once its month is dropped); no row when it has none. Creates nothing';

-- The payments a reconciler should ask the bank about; SKIP LOCKED lets
-- several reconcilers share the work without waiting for each other.
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

-- Refunds: a refund is a ledger row whose parent is the SUCCESS payment it
-- pays back, named among that payment's refunds by its refund key.  Opened
-- here, it is then claimed and settled as any payment (pay_claim,
-- pay_succeed, pay_fail, pay_stuck, pay_reconcile); the ledger's
-- bookkeeping holds every write to the rules of refunds (src/refund.c).
CREATE FUNCTION @extschema@.pay_refund_open(bizno text, refund_key text, amount numeric, reason text DEFAULT NULL)
RETURNS text
AS 'MODULE_PATHNAME', 'pay_refund_open_1_3'
LANGUAGE C VOLATILE SECURITY DEFINER SET search_path = @extschema@, pg_temp;

COMMENT ON FUNCTION @extschema@.pay_refund_open(text, text, numeric, text) IS
'The bizNo of refund refund_key of SUCCESS payment bizno: found again, or recorded as INIT in the payment''s currency; claim and settle it as any payment';

-- The card flow (src/api_card.c, src/card.c): an authorization is a payment
-- (kind AUTHORIZATION) whose SUCCESS means the bank placed a hold; its
-- captures, voids and increments are ledger rows of their own, children of
-- the authorization (parent) under a key (refund_key), claimed and settled
-- as any payment.  The ledger's bookkeeping holds every write to the rules
-- of the card flow: captures in PROCESSING or SUCCESS within the hold,
-- closing one-way, increments before any capture.
CREATE FUNCTION @extschema@.pay_open_authorization(prefix text, biz_id text, amount numeric, currency text,
                                                   expires_in interval DEFAULT '7 days')
RETURNS text
AS 'MODULE_PATHNAME', 'pay_open_authorization'
LANGUAGE C VOLATILE SECURITY DEFINER SET search_path = @extschema@, pg_temp;

COMMENT ON FUNCTION @extschema@.pay_open_authorization(text, text, numeric, text, interval) IS
'The bizNo of the authorization of business action (prefix, biz_id): found again, or recorded as INIT; its SUCCESS places the hold, which expires expires_in after it';

CREATE FUNCTION @extschema@.pay_capture_open(auth_bizno text, capture_key text, amount numeric,
                                             final boolean DEFAULT true)
RETURNS text
AS 'MODULE_PATHNAME', 'pay_capture_open'
LANGUAGE C VOLATILE SECURITY DEFINER SET search_path = @extschema@, pg_temp;

COMMENT ON FUNCTION @extschema@.pay_capture_open(text, text, numeric, boolean) IS
'The bizNo of capture capture_key of a held authorization: found again, or recorded as INIT; a final capture closes the authorization once claimed';

CREATE FUNCTION @extschema@.pay_void_open(auth_bizno text, void_key text)
RETURNS text
AS 'MODULE_PATHNAME', 'pay_void_open'
LANGUAGE C VOLATILE SECURITY DEFINER SET search_path = @extschema@, pg_temp;

COMMENT ON FUNCTION @extschema@.pay_void_open(text, text) IS
'The bizNo of void void_key of a held authorization (releases what is not captured): found again, or recorded as INIT for the authorization''s amount';

CREATE FUNCTION @extschema@.pay_increment_open(auth_bizno text, increment_key text, amount numeric)
RETURNS text
AS 'MODULE_PATHNAME', 'pay_increment_open'
LANGUAGE C VOLATILE SECURITY DEFINER SET search_path = @extschema@, pg_temp;

COMMENT ON FUNCTION @extschema@.pay_increment_open(text, text, numeric) IS
'The bizNo of increment increment_key of a held authorization before any capture (raises the hold by amount once SUCCESS): found again, or recorded as INIT';


/* 6. The operator functions ----------------------------------------------- */

-- Repairs: a failed payment is tried again only after an operator reset
-- it, saying why; pay_transition is the generic guarded move.
CREATE FUNCTION @extschema@.pay_reset(bizno text, note text)
RETURNS @extschema@.pay_status
AS 'MODULE_PATHNAME', 'pay_reset_1_3'
LANGUAGE C VOLATILE SECURITY DEFINER SET search_path = @extschema@, pg_temp;

COMMENT ON FUNCTION @extschema@.pay_reset(text, text) IS
'FAILED -> INIT, with a note saying why; a no-op on INIT';

CREATE FUNCTION @extschema@.pay_transition(bizno text, target @extschema@.pay_status, note text DEFAULT NULL)
RETURNS @extschema@.pay_status
AS 'MODULE_PATHNAME', 'pay_transition_1_3'
LANGUAGE C VOLATILE SECURITY DEFINER SET search_path = @extschema@, pg_temp;

COMMENT ON FUNCTION @extschema@.pay_transition(text, @extschema@.pay_status, text) IS
'The generic guarded transition of a payment to target';

-- Second charges: a bank that charged a payment twice.  A settlement
-- reports one (pay_succeed with another reference answers SECOND_CHARGE); a
-- bank statement confirms it (pay_reconcile, through
-- pay_confirm_second_charge).  Only a confirmed one counts as captured, and
-- so as refundable.
CREATE FUNCTION @extschema@.pay_confirm_second_charge(bizno text, channel_ref text)
RETURNS void
AS 'MODULE_PATHNAME', 'pay_confirm_second_charge'
LANGUAGE C VOLATILE SECURITY DEFINER SET search_path = @extschema@, pg_temp;

COMMENT ON FUNCTION @extschema@.pay_confirm_second_charge(text, text) IS
'A bank statement shows another charge of SUCCESS payment bizno under channel_ref: journal it once as confirmed, from then on counted as captured and refundable';

-- The journal's second charges, one row per payment and bank reference,
-- from the columns only the API writes: a settlement reports one, a bank
-- statement confirms it (1.2's, counted as captured at once, read as
-- confirmed).
CREATE FUNCTION @extschema@.pay_second_charges(OUT bizno text, OUT channel_ref text,
                                               OUT confirmed boolean, OUT reported_at timestamptz)
RETURNS SETOF record
AS $$
    SELECT j.bizno, j.channel_ref,
           pg_catalog.bool_or(j.second_charge OPERATOR(pg_catalog.=) 'confirmed'),
           pg_catalog.min(j.at)
    FROM @extschema@.pay_journal AS j
    WHERE j.second_charge IS NOT NULL
    GROUP BY 1, 2
$$
LANGUAGE sql STABLE SET search_path = @extschema@, pg_temp;

COMMENT ON FUNCTION @extschema@.pay_second_charges() IS
'Every second charge the bank made of a payment, by reference; confirmed once a bank statement shows it (pay_reconcile), and only then counted as captured';

-- The refund limit, counted in this one place, which the ledger's
-- bookkeeping, pay_verify and an operator all read: what the bank captured
-- (the success and every confirmed second charge, from the journal; for an
-- authorization, whose success is a hold, what its captures captured) less
-- what the payment's refunds returned or hold.
CREATE FUNCTION @extschema@.pay_refund_balance(bizno text, OUT captured numeric, OUT refunded numeric,
                                               OUT in_flight numeric, OUT refundable numeric)
RETURNS record
AS $$
    SELECT c.captured, r.refunded, r.in_flight,
           c.captured OPERATOR(pg_catalog.-) r.refunded OPERATOR(pg_catalog.-) r.in_flight
    FROM (SELECT CASE WHEN EXISTS (SELECT FROM @extschema@.pay_ledger AS a
                                   WHERE a.bizno OPERATOR(pg_catalog.=) $1
                                     AND a.kind OPERATOR(pg_catalog.=) 'AUTHORIZATION')
                 THEN (SELECT COALESCE(pg_catalog.sum(l.amount), 0)
                       FROM @extschema@.pay_ledger AS l
                       WHERE l.parent OPERATOR(pg_catalog.=) $1
                         AND l.kind OPERATOR(pg_catalog.=) ANY ('{CAPTURE,FINAL_CAPTURE}')
                         AND l.status OPERATOR(pg_catalog.=) 'SUCCESS'::@extschema@.pay_status)
                 ELSE (SELECT COALESCE(pg_catalog.sum(j.amount), 0)
                       FROM @extschema@.pay_journal AS j
                       WHERE j.bizno OPERATOR(pg_catalog.=) $1
                         AND j.to_status OPERATOR(pg_catalog.=) 'SUCCESS'::@extschema@.pay_status
                         AND j.second_charge IS DISTINCT FROM 'reported') END AS captured) AS c,
         (SELECT COALESCE(pg_catalog.sum(l.amount) FILTER (
                     WHERE l.status OPERATOR(pg_catalog.=) 'SUCCESS'::@extschema@.pay_status), 0) AS refunded,
                 COALESCE(pg_catalog.sum(l.amount) FILTER (
                     WHERE l.status OPERATOR(pg_catalog.=) 'PROCESSING'::@extschema@.pay_status), 0) AS in_flight
          FROM @extschema@.pay_ledger AS l
          WHERE l.parent OPERATOR(pg_catalog.=) $1 AND l.kind IS NULL) AS r
$$
LANGUAGE sql STABLE SET search_path = @extschema@, pg_temp;

COMMENT ON FUNCTION @extschema@.pay_refund_balance(text) IS
'What the bank captured for a payment (its success and every second charge a bank statement confirmed), what its refunds returned (SUCCESS) and hold (PROCESSING), and what may still be refunded';

-- An authorization's figures, summed from its children: pay_verify,
-- pay_archive, pay_reconcile and a caller read them here; the ledger's
-- bookkeeping (src/card.c, under the authorization's row lock) sums the same
-- in C, and reads them here where it cannot (row security, an audit hook).
-- authorized is the hold: the amount and every successful increment, once
-- the authorization is SUCCESS.  closed_reason says why nothing more is
-- captured, NULL while the hold is open: a void done or in flight, a final
-- capture done or in flight, the hold fully captured, the hold expired (at
-- the start of the statement, a claim's), or the authorization not held.
-- STABLE, so that the bookkeeping's call sums in the snapshot it takes
-- after the lock; a set of one row, every name qualified and no search_path
-- of its own, so that the planner inlines it into the bookkeeping's saved
-- query (a claim of a capture costs no planning of it).  No row for a key
-- that is no authorization.
CREATE FUNCTION @extschema@.pay_authorization_balance(auth_bizno text)
RETURNS TABLE (authorized numeric, captured numeric, capture_in_flight numeric,
               refunded numeric, refund_in_flight numeric, capturable numeric, refundable numeric,
               closed_reason text, expires_at timestamptz)
AS $$
    SELECT f.authorized, f.captured, f.capture_in_flight, f.refunded, f.refund_in_flight,
           CASE WHEN f.closed_reason IS NULL
                THEN f.authorized OPERATOR(pg_catalog.-) f.captured OPERATOR(pg_catalog.-) f.capture_in_flight
                ELSE 0 END,
           f.captured OPERATOR(pg_catalog.-) f.refunded OPERATOR(pg_catalog.-) f.refund_in_flight,
           f.closed_reason, f.expires_at
    FROM (SELECT CASE WHEN a.status OPERATOR(pg_catalog.=) 'SUCCESS'::@extschema@.pay_status
                      THEN a.amount OPERATOR(pg_catalog.+) s.incremented ELSE 0 END AS authorized,
                 s.captured, s.capture_in_flight, s.refunded, s.refund_in_flight, a.expires_at,
                 CASE WHEN NOT a.status OPERATOR(pg_catalog.=) 'SUCCESS'::@extschema@.pay_status THEN 'not held'
                      WHEN s.voided THEN 'voided'
                      WHEN s.void_in_flight THEN 'void in flight'
                      WHEN s.final_captured THEN 'final capture done'
                      WHEN s.final_in_flight THEN 'final capture in flight'
                      WHEN s.captured OPERATOR(pg_catalog.>=) (a.amount OPERATOR(pg_catalog.+) s.incremented)
                          THEN 'fully captured'
                      WHEN pg_catalog.statement_timestamp() OPERATOR(pg_catalog.>=) a.expires_at THEN 'expired'
                 END AS closed_reason
          FROM @extschema@.pay_ledger AS a,
               LATERAL (SELECT
                   COALESCE(pg_catalog.sum(c.amount) FILTER (WHERE c.kind OPERATOR(pg_catalog.=) 'INCREMENT'
                       AND c.status OPERATOR(pg_catalog.=) 'SUCCESS'::@extschema@.pay_status), 0) AS incremented,
                   COALESCE(pg_catalog.sum(c.amount) FILTER (WHERE c.kind OPERATOR(pg_catalog.=) ANY ('{CAPTURE,FINAL_CAPTURE}')
                       AND c.status OPERATOR(pg_catalog.=) 'SUCCESS'::@extschema@.pay_status), 0) AS captured,
                   COALESCE(pg_catalog.sum(c.amount) FILTER (WHERE c.kind OPERATOR(pg_catalog.=) ANY ('{CAPTURE,FINAL_CAPTURE}')
                       AND c.status OPERATOR(pg_catalog.=) 'PROCESSING'::@extschema@.pay_status), 0) AS capture_in_flight,
                   COALESCE(pg_catalog.sum(c.amount) FILTER (WHERE c.kind IS NULL
                       AND c.status OPERATOR(pg_catalog.=) 'SUCCESS'::@extschema@.pay_status), 0) AS refunded,
                   COALESCE(pg_catalog.sum(c.amount) FILTER (WHERE c.kind IS NULL
                       AND c.status OPERATOR(pg_catalog.=) 'PROCESSING'::@extschema@.pay_status), 0) AS refund_in_flight,
                   COALESCE(pg_catalog.bool_or(c.kind OPERATOR(pg_catalog.=) 'VOID'
                       AND c.status OPERATOR(pg_catalog.=) 'SUCCESS'::@extschema@.pay_status), false) AS voided,
                   COALESCE(pg_catalog.bool_or(c.kind OPERATOR(pg_catalog.=) 'VOID'
                       AND c.status OPERATOR(pg_catalog.=) 'PROCESSING'::@extschema@.pay_status), false) AS void_in_flight,
                   COALESCE(pg_catalog.bool_or(c.kind OPERATOR(pg_catalog.=) 'FINAL_CAPTURE'
                       AND c.status OPERATOR(pg_catalog.=) 'SUCCESS'::@extschema@.pay_status), false) AS final_captured,
                   COALESCE(pg_catalog.bool_or(c.kind OPERATOR(pg_catalog.=) 'FINAL_CAPTURE'
                       AND c.status OPERATOR(pg_catalog.=) 'PROCESSING'::@extschema@.pay_status), false) AS final_in_flight
                FROM @extschema@.pay_ledger AS c
                WHERE c.parent OPERATOR(pg_catalog.=) a.bizno) AS s
          WHERE a.bizno OPERATOR(pg_catalog.=) $1
            AND a.kind OPERATOR(pg_catalog.=) 'AUTHORIZATION') AS f
$$
LANGUAGE sql STABLE;

COMMENT ON FUNCTION @extschema@.pay_authorization_balance(text) IS
'An authorization''s hold (authorized: its amount and successful increments), what its captures captured (SUCCESS) and hold (PROCESSING), what its refunds returned and hold, what may still be captured and refunded, why it is closed (NULL while open), and when the hold expires';

-- Archival (pay_archive): the one sanctioned way settled history leaves the
-- ledger and the journal.

-- The hash pay_archive_keys keeps of an archived ledger row: of its
-- business action (prefix || ' ' || biz_id, read from the key) when its key
-- is a bizNo of pay_bizno -- one business action has one bizNo, and a
-- refund's bizNo is issued under its payment's --, else of its key; each
-- hashtextextended(... COLLATE "C", 0).  The C of the claim's lookup
-- (src/write_archive.c), so that the two never disagree.
CREATE FUNCTION @extschema@.pay_archive_key_hash(bizno text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'pay_archive_key_hash'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION @extschema@.pay_archive_key_hash(text) IS
'The hash pay_archive_keys keeps of an archived ledger row: of its business action for a bizNo of pay_bizno, else of its key';

-- Merge hashes into pay_archive_keys: every row a new hash falls in (the
-- first row for hashes below it) is read with them, and written again in
-- rows of at most 512, each starting at its lowest hash and answering up
-- to the next one's lo, the last of them up to the hi of the row it
-- replaces: the rows' ranges still cover the same span, without overlap.
CREATE FUNCTION @extschema@.pay_archive_add_keys(hashes bigint[])
RETURNS void
AS $$
    WITH new AS (
        SELECT DISTINCT h.h FROM pg_catalog.unnest($1) AS h(h) WHERE h.h IS NOT NULL),
    -- each new hash after the rows' lo in one order: the row it falls in
    -- is the last lo before it
    marks AS (
        SELECT k.lo AS v, k.lo FROM @extschema@.pay_archive_keys AS k
        UNION ALL
        SELECT n.h, NULL FROM new AS n),
    placed AS (
        SELECT m.h, COALESCE(m.lo, (SELECT pg_catalog.min(k.lo) FROM @extschema@.pay_archive_keys AS k)) AS lo
        FROM (SELECT m.v AS h, m.lo IS NULL AS is_new,
                     pg_catalog.max(m.lo) OVER (ORDER BY m.v, m.lo NULLS LAST ROWS UNBOUNDED PRECEDING) AS lo
              FROM marks AS m) AS m
        WHERE m.is_new),
    touched AS (
        DELETE FROM @extschema@.pay_archive_keys AS k
        WHERE k.lo OPERATOR(pg_catalog.=) ANY (SELECT p.lo FROM placed AS p)
        RETURNING k.lo, k.hi, k.hashes),
    merged AS (
        SELECT t.lo, x.h
        FROM touched AS t, pg_catalog.unnest(@extschema@.pay_archive_key_unpack(t.lo, t.hashes)) AS x(h)
        UNION
        SELECT p.lo, p.h FROM placed AS p),
    numbered AS (
        SELECT m.lo, m.h,
               pg_catalog.row_number() OVER w OPERATOR(pg_catalog.-) 1 AS i,
               pg_catalog.count(*) OVER (PARTITION BY m.lo) AS n
        FROM merged AS m
        WINDOW w AS (PARTITION BY m.lo ORDER BY m.h)),
    -- ceil(n / 512) rows of equal share for each row replaced
    packed AS (
        SELECT b.lo AS replaced, pg_catalog.min(b.h) AS lo, pg_catalog.array_agg(b.h ORDER BY b.h) AS hashes
        FROM numbered AS b
        GROUP BY b.lo, (b.i OPERATOR(pg_catalog.*) ((b.n OPERATOR(pg_catalog.+) 511) OPERATOR(pg_catalog./) 512))
                       OPERATOR(pg_catalog./) b.n)
    INSERT INTO @extschema@.pay_archive_keys (lo, hi, hashes)
    SELECT p.lo,
           COALESCE(pg_catalog.lead(p.lo) OVER (PARTITION BY p.replaced ORDER BY p.lo) OPERATOR(pg_catalog.-) 1,
                    t.hi, 9223372036854775807),
           @extschema@.pay_archive_key_pack(p.hashes)
    FROM packed AS p
    LEFT JOIN touched AS t ON t.lo OPERATOR(pg_catalog.=) p.replaced
$$
LANGUAGE sql VOLATILE SET search_path = @extschema@, pg_temp;

COMMENT ON FUNCTION @extschema@.pay_archive_add_keys(bigint[]) IS
'Add hashes of archived keys and business actions to pay_archive_keys (pay_archive)';

-- The two partitions of a month, created when pay_archive first moves a
-- payment of that month.
CREATE FUNCTION @extschema@.pay_archive_partitions(month date)
RETURNS void
AS $$
DECLARE
    suffix text := pg_catalog.to_char(month, 'YYYY_MM');
    ledger_part text := 'pay_ledger_archive_' OPERATOR(pg_catalog.||) suffix;
    journal_part text := 'pay_journal_archive_' OPERATOR(pg_catalog.||) suffix;
    bounds text := pg_catalog.format('FOR VALUES FROM (%L) TO (%L)', month,
                                     month OPERATOR(pg_catalog.+) '1 month'::interval);
BEGIN
    -- A month a logical replica received before it was taken into service
    -- is in the default partitions, which keep it: a partition of its own
    -- cannot be created over rows the default one holds.
    IF EXISTS (SELECT FROM @extschema@.pay_ledger_archive_default AS d
               WHERE d.month OPERATOR(pg_catalog.=) pay_archive_partitions.month)
       OR EXISTS (SELECT FROM @extschema@.pay_journal_archive_default AS d
                  WHERE d.month OPERATOR(pg_catalog.=) pay_archive_partitions.month) THEN
        RETURN;
    END IF;
    -- a month holds a payment once, and a journal row once; pay_open's late
    -- retry finds an archived business action through the second index;
    -- TRUNCATE is refused, as on the partitioned table, whose trigger a
    -- partition does not inherit
    IF pg_catalog.to_regclass('@extschema@.' OPERATOR(pg_catalog.||) pg_catalog.quote_ident(ledger_part)) IS NULL THEN
        EXECUTE pg_catalog.format('CREATE TABLE @extschema@.%I PARTITION OF @extschema@.pay_ledger_archive %s',
                                  ledger_part, bounds);
        EXECUTE pg_catalog.format('ALTER TABLE @extschema@.%I ADD PRIMARY KEY (bizno)', ledger_part);
        EXECUTE pg_catalog.format('CREATE INDEX ON @extschema@.%I (prefix, biz_id) WHERE biz_id IS NOT NULL',
                                  ledger_part);
        EXECUTE pg_catalog.format('REVOKE ALL ON @extschema@.%I FROM PUBLIC', ledger_part);
        EXECUTE pg_catalog.format('CREATE TRIGGER pay_ledger_archive_guard_truncate BEFORE TRUNCATE ON @extschema@.%I '
                                  'FOR EACH STATEMENT EXECUTE FUNCTION @extschema@.pay_guard()', ledger_part);
        EXECUTE pg_catalog.format('ALTER TABLE @extschema@.%I ENABLE ALWAYS TRIGGER pay_ledger_archive_guard_truncate',
                                  ledger_part);
    END IF;
    IF pg_catalog.to_regclass('@extschema@.' OPERATOR(pg_catalog.||) pg_catalog.quote_ident(journal_part)) IS NULL THEN
        EXECUTE pg_catalog.format('CREATE TABLE @extschema@.%I PARTITION OF @extschema@.pay_journal_archive %s',
                                  journal_part, bounds);
        EXECUTE pg_catalog.format('ALTER TABLE @extschema@.%I ADD PRIMARY KEY (seq)', journal_part);
        EXECUTE pg_catalog.format('CREATE INDEX ON @extschema@.%I (bizno, seq)', journal_part);
        EXECUTE pg_catalog.format('REVOKE ALL ON @extschema@.%I FROM PUBLIC', journal_part);
        EXECUTE pg_catalog.format('CREATE TRIGGER pay_journal_archive_guard_truncate BEFORE TRUNCATE ON @extschema@.%I '
                                  'FOR EACH STATEMENT EXECUTE FUNCTION @extschema@.pay_guard()', journal_part);
        EXECUTE pg_catalog.format('ALTER TABLE @extschema@.%I ENABLE ALWAYS TRIGGER pay_journal_archive_guard_truncate',
                                  journal_part);
    END IF;
END
$$
LANGUAGE plpgsql VOLATILE SET search_path = @extschema@, pg_temp;

COMMENT ON FUNCTION @extschema@.pay_archive_partitions(date) IS
'Create the partitions of the archive for a month, pay_ledger_archive_YYYY_MM and pay_journal_archive_YYYY_MM (pay_archive)';

-- The payments pay_archive must leave, whatever their own rows say: those
-- with a refund not settled, or settled at or after "before"; those with a
-- second charge the bank reported that no statement confirmed (it still
-- needs a refund at the bank); and, while pay_stats keeps counts, those
-- with a journal row (theirs or a refund's) not folded into them yet,
-- numbered from folded_below on.  The second charges are read for the
-- candidates only, through the journal's index on bizno: pay_archive asks
-- for them once it holds its candidates (before that, with none).  So are
-- the authorizations among them whose hold is still open: an authorization
-- leaves with all its steps and refunds only once closed and all settled.
CREATE FUNCTION @extschema@.pay_archive_unready(before timestamptz, folded_below bigint,
                                                candidates text[])
RETURNS SETOF text
AS $$
    SELECT r.parent FROM @extschema@.pay_ledger AS r
    WHERE r.parent IS NOT NULL
      AND (r.status OPERATOR(pg_catalog.<>) ALL (ARRAY['SUCCESS', 'FAILED']::@extschema@.pay_status[])
           OR r.updated_at OPERATOR(pg_catalog.>=) $1)
    UNION
    SELECT COALESCE(l.parent, j.bizno) FROM @extschema@.pay_journal AS j
    LEFT JOIN @extschema@.pay_ledger AS l ON l.bizno OPERATOR(pg_catalog.=) j.bizno
    WHERE j.seq OPERATOR(pg_catalog.>=) $2
    UNION
    SELECT j.bizno
    FROM pg_catalog.unnest($3) AS c(bizno)
    JOIN @extschema@.pay_journal AS j ON j.bizno OPERATOR(pg_catalog.=) c.bizno
    WHERE j.second_charge IS NOT NULL
    GROUP BY j.bizno, j.channel_ref
    HAVING NOT pg_catalog.bool_or(j.second_charge OPERATOR(pg_catalog.=) 'confirmed')
    UNION
    SELECT a.bizno
    FROM pg_catalog.unnest($3) AS c(bizno)
    JOIN @extschema@.pay_ledger AS a ON a.bizno OPERATOR(pg_catalog.=) c.bizno
    CROSS JOIN LATERAL @extschema@.pay_authorization_balance(a.bizno) AS b
    WHERE a.kind OPERATOR(pg_catalog.=) 'AUTHORIZATION'
      AND a.status OPERATOR(pg_catalog.=) 'SUCCESS'::@extschema@.pay_status
      AND b.closed_reason IS NULL
$$
LANGUAGE sql STABLE SET search_path = @extschema@, pg_temp;

COMMENT ON FUNCTION @extschema@.pay_archive_unready(timestamptz, bigint, text[]) IS
'The payments pay_archive leaves in the ledger whatever their own rows say: a refund not settled before "before", a second charge no statement confirmed, journal rows pay_stats has not folded';

-- The table of every row moved is built in the order the guard needs: the
-- archive receives the rows first, then they are deleted from the journal
-- and the ledger (the refunds before their payment).  Row texts and
-- digests are taken with TimeZone UTC and DateStyle ISO, as
-- pay_archive_verify takes them.  A batch's joins and sorts of a million
-- keys fit in work_mem = 128MB, which a nightly job may take.
CREATE FUNCTION @extschema@.pay_archive(before timestamptz, max_rows integer DEFAULT 100000)
RETURNS bigint
AS $$
DECLARE
    folded_below bigint;
    unready text[];
    locked text[];
    chosen text[];
    moved text[];
    moved_months date[];
    moved_refunds boolean[];
    hashes bigint[];
    archive_month date;
    moved_journal_rows bigint;
BEGIN
    IF before IS NULL OR max_rows IS NULL THEN
        RAISE EXCEPTION 'before and max_rows must not be null' USING ERRCODE = '22004';
    END IF;
    IF before OPERATOR(pg_catalog.>) pg_catalog.now() THEN
        RAISE EXCEPTION 'before must not be later than now'
            USING ERRCODE = '22023',
                  HINT = 'Archive what was settled before a moment past, such as now() - interval ''90 days''.';
    END IF;
    IF max_rows OPERATOR(pg_catalog.<) 1 THEN
        RAISE EXCEPTION 'max_rows must be at least 1' USING ERRCODE = '22023';
    END IF;
    -- What a payment is judged by (its refunds, its second charges) must
    -- be what committed before its lock was taken: under a snapshot of the
    -- transaction's start, a refund claimed since would stay behind in the
    -- ledger without its payment.
    IF pg_catalog.current_setting('transaction_isolation') OPERATOR(pg_catalog.<>) 'read committed' THEN
        RAISE EXCEPTION 'pay_archive runs only at READ COMMITTED, not %',
                        pg_catalog.upper(pg_catalog.current_setting('transaction_isolation'))
            USING ERRCODE = '25000',
                  HINT = 'Call it in a transaction of its own at READ COMMITTED (SET TRANSACTION ISOLATION LEVEL READ COMMITTED first where the default is another).';
    END IF;
    BEGIN
        LOCK TABLE @extschema@.pay_archive_runs IN SHARE ROW EXCLUSIVE MODE NOWAIT;
    EXCEPTION WHEN lock_not_available THEN
        RAISE EXCEPTION 'another pay_archive is running'
            USING ERRCODE = '55P03', HINT = 'Archive again once it has committed.';
    END;

    -- pay_stats counts what the journal held: what leaves it must be
    -- counted first
    PERFORM @extschema@.pay_stats_refresh(0);
    SELECT s.counted_from INTO folded_below FROM @extschema@.pay_stats_state AS s
    WHERE @extschema@.pay_stats_counts_usable(s.system_identifier);
    unready := ARRAY(SELECT @extschema@.pay_archive_unready(before, folded_below, '{}'));

    -- Lock the payments to move, skipping any a claim holds; then their
    -- refunds.  Judged again under the locks, with a snapshot that sees
    -- whatever committed before them: no refund can start, retry or settle
    -- meanwhile (a new refund locks its payment first).  Payments found
    -- unready only then (an unconfirmed second charge) are passed over and
    -- the next are locked, so that 0 means nothing is left to move.
    LOOP
        locked := ARRAY(
            SELECT l.bizno FROM @extschema@.pay_ledger AS l
            WHERE l.parent IS NULL
              AND l.status OPERATOR(pg_catalog.<>) 'PROCESSING'::@extschema@.pay_status
              AND l.updated_at OPERATOR(pg_catalog.<) before
              AND l.bizno OPERATOR(pg_catalog.<>) ALL (unready)
            LIMIT max_rows
            FOR UPDATE SKIP LOCKED);
        IF pg_catalog.cardinality(locked) OPERATOR(pg_catalog.=) 0 THEN
            RETURN 0;
        END IF;
        PERFORM FROM pg_catalog.unnest(locked) AS c(bizno)
        JOIN @extschema@.pay_ledger AS r ON r.parent OPERATOR(pg_catalog.=) c.bizno
        FOR UPDATE OF r;
        unready := ARRAY(SELECT pg_catalog.unnest(unready)
                         UNION
                         SELECT @extschema@.pay_archive_unready(before, folded_below, locked));
        chosen := ARRAY(
            SELECT l.bizno FROM pg_catalog.unnest(locked) AS c(bizno)
            JOIN @extschema@.pay_ledger AS l ON l.bizno OPERATOR(pg_catalog.=) c.bizno
            WHERE l.status OPERATOR(pg_catalog.<>) 'PROCESSING'::@extschema@.pay_status
              AND l.updated_at OPERATOR(pg_catalog.<) before
              AND l.bizno OPERATOR(pg_catalog.<>) ALL (unready));
        EXIT WHEN pg_catalog.cardinality(chosen) OPERATOR(pg_catalog.>) 0;
    END LOOP;

    -- every row to move, refunds first, with its payment's month
    SELECT pg_catalog.array_agg(m.bizno ORDER BY m.is_payment, m.bizno),
           pg_catalog.array_agg(m.month ORDER BY m.is_payment, m.bizno),
           pg_catalog.array_agg(NOT m.is_payment ORDER BY m.is_payment, m.bizno)
    INTO moved, moved_months, moved_refunds
    FROM (SELECT l.bizno, l.parent IS NULL AS is_payment,
                 pg_catalog.date_trunc('month',
                     pg_catalog.max(l.updated_at) OVER (PARTITION BY COALESCE(l.parent, l.bizno))
                     AT TIME ZONE 'UTC')::date AS month
          FROM (SELECT l.* FROM pg_catalog.unnest(chosen) AS c(bizno)
                JOIN @extschema@.pay_ledger AS l ON l.bizno OPERATOR(pg_catalog.=) c.bizno
                UNION ALL
                SELECT l.* FROM pg_catalog.unnest(chosen) AS c(bizno)
                JOIN @extschema@.pay_ledger AS l ON l.parent OPERATOR(pg_catalog.=) c.bizno) AS l) AS m;
    FOR archive_month IN SELECT DISTINCT m.month FROM pg_catalog.unnest(moved_months) AS m(month) LOOP
        PERFORM @extschema@.pay_archive_partitions(archive_month);
    END LOOP;

    -- into the archive, counted and digested per month
    WITH rows AS (SELECT * FROM ROWS FROM (pg_catalog.unnest(moved), pg_catalog.unnest(moved_months)) AS m(bizno, month)),
    archived AS (
        INSERT INTO @extschema@.pay_ledger_archive
            (bizno, prefix, biz_id, status, amount, currency, attempt, channel_ref, last_error,
             created_at, updated_at, processing_since, note, parent, refund_key, response,
             month, archived_at)
        SELECT l.bizno, l.prefix, l.biz_id, l.status, l.amount, l.currency, l.attempt,
               l.channel_ref, l.last_error, l.created_at, l.updated_at, l.processing_since,
               l.note, l.parent, l.refund_key, l.response, r.month, pg_catalog.now()
        FROM rows AS r
        JOIN @extschema@.pay_ledger AS l ON l.bizno OPERATOR(pg_catalog.=) r.bizno
        RETURNING *)
    INSERT INTO @extschema@.pay_archive_months AS m
        (month, payments, ledger_rows, journal_rows, ledger_digest, journal_digest)
    SELECT a.month, pg_catalog.count(*) FILTER (WHERE a.parent IS NULL), pg_catalog.count(*), 0,
           pg_catalog.sum(pg_catalog.hashtextextended(a::text COLLATE "C", 0)::numeric), 0
    FROM archived AS a
    GROUP BY a.month
    ON CONFLICT (month) DO UPDATE
    SET payments = m.payments OPERATOR(pg_catalog.+) excluded.payments,
        ledger_rows = m.ledger_rows OPERATOR(pg_catalog.+) excluded.ledger_rows,
        ledger_digest = m.ledger_digest OPERATOR(pg_catalog.+) excluded.ledger_digest;

    WITH rows AS (SELECT * FROM ROWS FROM (pg_catalog.unnest(moved), pg_catalog.unnest(moved_months),
                                           pg_catalog.unnest(moved_refunds)) AS m(bizno, month, refund)),
    archived AS (
        INSERT INTO @extschema@.pay_journal_archive
            (seq, bizno, attempt, from_status, to_status, amount, currency, at, txid, actor, note,
             channel_ref, second_charge, month)
        SELECT j.seq, j.bizno, j.attempt, j.from_status, j.to_status, j.amount, j.currency, j.at,
               j.txid, j.actor, j.note, j.channel_ref, j.second_charge, r.month
        FROM rows AS r
        JOIN @extschema@.pay_journal AS j ON j.bizno OPERATOR(pg_catalog.=) r.bizno
        RETURNING *),
    digests AS (
        INSERT INTO @extschema@.pay_archive_months AS m
            (month, payments, ledger_rows, journal_rows, ledger_digest, journal_digest)
        SELECT a.month, 0, 0, pg_catalog.count(*), 0,
               pg_catalog.sum(pg_catalog.hashtextextended(a::text COLLATE "C", 0)::numeric)
        FROM archived AS a
        GROUP BY a.month
        ON CONFLICT (month) DO UPDATE
        SET journal_rows = m.journal_rows OPERATOR(pg_catalog.+) excluded.journal_rows,
            journal_digest = m.journal_digest OPERATOR(pg_catalog.+) excluded.journal_digest
        RETURNING 1)
    -- what they counted in pay_stats, as a first fold would count them
    -- (the card flow's kind read from the ledger, which the archive does
    -- not keep)
    INSERT INTO @extschema@.pay_archive_counts AS c (from_status, to_status, refund, second_charge, n,
                                                     kind, currency, amount)
    SELECT a.from_status, a.to_status, r.refund,
           CASE WHEN a.second_charge IS NOT NULL
                THEN @extschema@.pay_stats_second_charge(a.bizno, a.second_charge, a.channel_ref, a.seq, 0,
                                                          '1:1:'::pg_snapshot)
           END,
           pg_catalog.count(*), l.kind,
           CASE WHEN l.kind IS NOT NULL THEN a.currency END,
           pg_catalog.sum(a.amount) FILTER (WHERE l.kind IS NOT NULL)
    FROM archived AS a
    JOIN rows AS r ON r.bizno OPERATOR(pg_catalog.=) a.bizno
    JOIN @extschema@.pay_ledger AS l ON l.bizno OPERATOR(pg_catalog.=) a.bizno
    GROUP BY 1, 2, 3, 4, 6, 7
    ON CONFLICT ON CONSTRAINT pay_archive_counts_key
    DO UPDATE SET n = c.n OPERATOR(pg_catalog.+) excluded.n,
                  amount = c.amount OPERATOR(pg_catalog.+) excluded.amount;

    -- what outlives the archive: the hash of each payment's identity
    hashes := ARRAY(
        SELECT @extschema@.pay_archive_key_hash(m.bizno)
        FROM pg_catalog.unnest(moved) AS m(bizno));
    PERFORM @extschema@.pay_archive_add_keys(hashes);

    DELETE FROM @extschema@.pay_journal AS j
    USING pg_catalog.unnest(moved) AS m(bizno)
    WHERE j.bizno OPERATOR(pg_catalog.=) m.bizno;
    GET DIAGNOSTICS moved_journal_rows = ROW_COUNT;
    -- pay_stats' counts learn of the deletions here, all at once (the
    -- journal trigger leaves the rows the archive received to it)
    WITH gone AS (
        DELETE FROM @extschema@.pay_ledger AS l
        USING pg_catalog.unnest(chosen) AS c(bizno)
        WHERE l.parent OPERATOR(pg_catalog.=) c.bizno
        RETURNING l.bizno, l.status, l.kind)
    INSERT INTO @extschema@.pay_stats_deletions (bizno, status, refund, kind)
    SELECT g.bizno, g.status, true, g.kind FROM gone AS g;
    WITH gone AS (
        DELETE FROM @extschema@.pay_ledger AS l
        USING pg_catalog.unnest(chosen) AS c(bizno)
        WHERE l.bizno OPERATOR(pg_catalog.=) c.bizno
        RETURNING l.bizno, l.status, l.kind)
    INSERT INTO @extschema@.pay_stats_deletions (bizno, status, refund, kind)
    SELECT g.bizno, g.status, false, g.kind FROM gone AS g;

    INSERT INTO @extschema@.pay_archive_runs (before, payments, ledger_rows, journal_rows)
    VALUES (before, pg_catalog.cardinality(chosen), pg_catalog.cardinality(moved), moved_journal_rows);
    RETURN pg_catalog.cardinality(chosen);
END
$$
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = @extschema@, pg_temp SET TimeZone = 'UTC' SET DateStyle = 'ISO, YMD'
SET extra_float_digits = 1 SET jit = off SET work_mem = '128MB';

COMMENT ON FUNCTION @extschema@.pay_archive(timestamptz, integer) IS
'Move up to max_rows settled payments whose last change (and their refunds'') is before "before" out of the ledger and the journal into the archive; returns how many; call again until 0';

-- Each month of the archive, as pay_archive recorded it and as its two
-- partitions hold it.  A month whose partitions were both dropped is
-- reported not kept, with no problem: its hashes refuse its payments' late
-- retries.  One partition dropped without the other shows as rows missing.
-- An operator runs it: it reads the archive's tables, which are the
-- owner's alone (only pay_archive writes them), as their owner, and writes
-- nothing.
CREATE FUNCTION @extschema@.pay_archive_verify()
RETURNS TABLE (month date, payments bigint, ledger_rows bigint, journal_rows bigint,
               kept boolean, problem text)
AS $$
DECLARE
    recorded @extschema@.pay_archive_months;
    found_rows bigint;
    found_digest numeric;
    found_journal_rows bigint;
    found_journal_digest numeric;
BEGIN
    FOR recorded IN SELECT * FROM @extschema@.pay_archive_months AS m ORDER BY m.month LOOP
        month := recorded.month;
        payments := recorded.payments;
        ledger_rows := recorded.ledger_rows;
        journal_rows := recorded.journal_rows;
        SELECT pg_catalog.count(*), COALESCE(pg_catalog.sum(
                   pg_catalog.hashtextextended(a::text COLLATE "C", 0)::numeric), 0)
        INTO found_rows, found_digest
        FROM @extschema@.pay_ledger_archive AS a
        WHERE a.month OPERATOR(pg_catalog.=) recorded.month;
        SELECT pg_catalog.count(*), COALESCE(pg_catalog.sum(
                   pg_catalog.hashtextextended(a::text COLLATE "C", 0)::numeric), 0)
        INTO found_journal_rows, found_journal_digest
        FROM @extschema@.pay_journal_archive AS a
        WHERE a.month OPERATOR(pg_catalog.=) recorded.month;
        -- in the month's partitions, or in a replica's default partitions
        kept := found_rows OPERATOR(pg_catalog.>) 0 OR found_journal_rows OPERATOR(pg_catalog.>) 0
                OR pg_catalog.to_regclass(pg_catalog.format('@extschema@.%I',
                       'pay_ledger_archive_' OPERATOR(pg_catalog.||) pg_catalog.to_char(recorded.month, 'YYYY_MM')))
                   IS NOT NULL
                OR pg_catalog.to_regclass(pg_catalog.format('@extschema@.%I',
                       'pay_journal_archive_' OPERATOR(pg_catalog.||) pg_catalog.to_char(recorded.month, 'YYYY_MM')))
                   IS NOT NULL;
        problem := NULL;
        IF NOT kept THEN
            RETURN NEXT;
            CONTINUE;
        END IF;
        IF found_rows OPERATOR(pg_catalog.<>) recorded.ledger_rows
           OR found_journal_rows OPERATOR(pg_catalog.<>) recorded.journal_rows THEN
            problem := pg_catalog.format('the partitions hold %s ledger and %s journal rows of the %s and %s archived',
                                         found_rows, found_journal_rows, recorded.ledger_rows,
                                         recorded.journal_rows);
        ELSIF found_digest OPERATOR(pg_catalog.<>) recorded.ledger_digest
              OR found_journal_digest OPERATOR(pg_catalog.<>) recorded.journal_digest THEN
            problem := 'the partitions'' rows differ from the rows archived';
        END IF;
        RETURN NEXT;
    END LOOP;
END
$$
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = @extschema@, pg_temp SET TimeZone = 'UTC' SET DateStyle = 'ISO, YMD'
SET extra_float_digits = 1;

COMMENT ON FUNCTION @extschema@.pay_archive_verify() IS
'Each month of the archive: what pay_archive moved into it, whether its partitions are kept, and a problem when their counts or digests differ from what was moved';

-- The invariants between ledger and journal, and those of refunds and
-- second charges.  Writes through the API and the ledger's triggers keep
-- them; writes made with those triggers off (a replica's apply, a restore)
-- may not, and pay_verify lists where.
-- An operator runs it as the owner, who alone reads the archive's tables
-- and hashes; it writes nothing.
CREATE FUNCTION @extschema@.pay_verify()
RETURNS TABLE (bizno text, problem text)
AS $$
    WITH entries AS (
        SELECT j.bizno, j.seq, j.from_status, j.to_status, j.channel_ref, j.response_digest,
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
    ), settled AS (
        -- the latest life's entry into SUCCESS, with the answer it settled
        -- with; an entry journaled before 1.4 names none (channel_ref NULL)
        SELECT DISTINCT ON (e.bizno) e.bizno, e.seq, e.channel_ref, e.response_digest
        FROM entries AS e
        JOIN latest_life AS ll ON ll.bizno OPERATOR(pg_catalog.=) e.bizno
                              AND ll.life OPERATOR(pg_catalog.=) e.life
        WHERE e.to_status OPERATOR(pg_catalog.=) 'SUCCESS'::@extschema@.pay_status
          AND e.from_status IS DISTINCT FROM e.to_status
          AND e.channel_ref IS NOT NULL
        ORDER BY e.bizno, e.seq DESC
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
    -- a success keeps the answer it was settled with: changed behind the
    -- guard's back (switched off in maintenance), it differs from the journal
    SELECT l.bizno, pg_catalog.format('channel_ref is %s, journal entry %s into SUCCESS says %s',
                                      COALESCE(l.channel_ref, 'NULL'), s.seq, s.channel_ref)
    FROM @extschema@.pay_ledger AS l
    JOIN settled AS s ON s.bizno OPERATOR(pg_catalog.=) l.bizno
    WHERE l.status OPERATOR(pg_catalog.=) 'SUCCESS'::@extschema@.pay_status
      AND l.channel_ref IS DISTINCT FROM s.channel_ref
    UNION ALL
    SELECT l.bizno, pg_catalog.format('the response is not the one journal entry %s into SUCCESS settled with',
                                      s.seq)
    FROM @extschema@.pay_ledger AS l
    JOIN settled AS s ON s.bizno OPERATOR(pg_catalog.=) l.bizno
    WHERE l.status OPERATOR(pg_catalog.=) 'SUCCESS'::@extschema@.pay_status
      AND pg_catalog.jsonb_hash_extended(l.response, 0) IS DISTINCT FROM s.response_digest
    UNION ALL
    SELECT e.bizno, pg_catalog.format('journal entry %s goes from %s, but the entry before it ended in %s',
                                      e.seq, e.from_status, e.previous_status)
    FROM entries AS e
    WHERE e.from_status IS NOT NULL
      AND e.from_status IS DISTINCT FROM e.previous_status
    UNION ALL
    SELECT ll.bizno, pg_catalog.format('the journal says %s, but the ledger has no such payment',
                                       ll.to_status)
    FROM latest_life AS ll
    LEFT JOIN @extschema@.pay_ledger AS l ON l.bizno OPERATOR(pg_catalog.=) ll.bizno
    WHERE l.bizno IS NULL
      AND ll.to_status OPERATOR(pg_catalog.=) ANY
          (ARRAY['PROCESSING', 'SUCCESS']::@extschema@.pay_status[])
    UNION ALL
    SELECT r.bizno,
           CASE WHEN p.bizno IS NULL THEN
                    pg_catalog.format('a refund of %s, which the ledger does not have', r.parent)
                WHEN p.parent IS NOT NULL THEN
                    pg_catalog.format('a refund of %s, which is itself a refund', r.parent)
                WHEN p.status OPERATOR(pg_catalog.<>) 'SUCCESS' THEN
                    pg_catalog.format('a refund of %s, which is %s', r.parent, p.status)
                ELSE pg_catalog.format('a refund in %s of %s, which is in %s', r.currency, r.parent, p.currency)
           END
    FROM @extschema@.pay_ledger AS r
    LEFT JOIN @extschema@.pay_ledger AS p ON p.bizno OPERATOR(pg_catalog.=) r.parent
    WHERE r.parent IS NOT NULL
      AND (p.bizno IS NULL OR p.parent IS NOT NULL
           OR p.status OPERATOR(pg_catalog.<>) 'SUCCESS'
           OR r.currency IS DISTINCT FROM p.currency)
    UNION ALL
    SELECT refunded.parent,
           pg_catalog.format('its refunds return or hold %s, more than the %s captured',
                             b.refunded OPERATOR(pg_catalog.+) b.in_flight, b.captured)
    FROM (SELECT DISTINCT l.parent FROM @extschema@.pay_ledger AS l WHERE l.parent IS NOT NULL) AS refunded,
         @extschema@.pay_refund_balance(refunded.parent) AS b
    WHERE b.refundable OPERATOR(pg_catalog.<) 0
    UNION ALL
    SELECT held.parent,
           pg_catalog.format('its captures capture or hold %s, more than the %s authorized',
                             b.captured OPERATOR(pg_catalog.+) b.capture_in_flight, b.authorized)
    FROM (SELECT DISTINCT l.parent FROM @extschema@.pay_ledger AS l
          WHERE l.kind OPERATOR(pg_catalog.=) ANY ('{CAPTURE,FINAL_CAPTURE}')) AS held,
         @extschema@.pay_authorization_balance(held.parent) AS b
    WHERE b.captured OPERATOR(pg_catalog.+) b.capture_in_flight OPERATOR(pg_catalog.>) b.authorized
    UNION ALL
    SELECT s.bizno, pg_catalog.format('a step (%s) of %s, which is no authorization', s.kind, s.parent)
    FROM @extschema@.pay_ledger AS s
    LEFT JOIN @extschema@.pay_ledger AS a ON a.bizno OPERATOR(pg_catalog.=) s.parent
    WHERE s.kind OPERATOR(pg_catalog.<>) 'AUTHORIZATION'
      AND a.kind IS DISTINCT FROM 'AUTHORIZATION'
    UNION ALL
    SELECT s.bizno, pg_catalog.format('claimed after its authorization %s closed: %s', s.parent, closed.why)
    FROM @extschema@.pay_ledger AS s
    JOIN @extschema@.pay_ledger AS a ON a.bizno OPERATOR(pg_catalog.=) s.parent
    JOIN @extschema@.pay_journal AS j ON j.bizno OPERATOR(pg_catalog.=) s.bizno
         AND j.to_status OPERATOR(pg_catalog.=) 'PROCESSING'::@extschema@.pay_status
    CROSS JOIN LATERAL (
        SELECT 'expired' AS why WHERE j.at OPERATOR(pg_catalog.>) a.expires_at
        UNION ALL
        SELECT pg_catalog.lower(c.kind) OPERATOR(pg_catalog.||) ' ' OPERATOR(pg_catalog.||) c.bizno
        FROM @extschema@.pay_ledger AS c
        WHERE c.parent OPERATOR(pg_catalog.=) s.parent AND NOT c.bizno OPERATOR(pg_catalog.=) s.bizno
          AND c.kind OPERATOR(pg_catalog.=) ANY ('{VOID,FINAL_CAPTURE}')
          AND c.status OPERATOR(pg_catalog.=) ANY ('{PROCESSING,SUCCESS}'::@extschema@.pay_status[])
          AND j.seq OPERATOR(pg_catalog.>) (SELECT pg_catalog.max(cj.seq) FROM @extschema@.pay_journal AS cj
                                            WHERE cj.bizno OPERATOR(pg_catalog.=) c.bizno
                                              AND cj.to_status OPERATOR(pg_catalog.=) 'PROCESSING'::@extschema@.pay_status)
        LIMIT 1) AS closed
    WHERE s.kind OPERATOR(pg_catalog.=) ANY ('{CAPTURE,FINAL_CAPTURE,VOID,INCREMENT}')
    UNION ALL
    SELECT c.bizno, pg_catalog.format('a second charge under %s was reported, and no bank statement confirms it',
                                      c.channel_ref)
    FROM @extschema@.pay_second_charges() AS c
    WHERE NOT c.confirmed
    UNION ALL
    SELECT l.bizno, 'in the ledger, but its payment was archived: a second charge of it'
    FROM @extschema@.pay_ledger AS l
    CROSS JOIN LATERAL (SELECT @extschema@.pay_archive_key_hash(l.bizno) AS h) AS k
    WHERE (SELECT k.h OPERATOR(pg_catalog.=) ANY (@extschema@.pay_archive_key_unpack(r.lo, r.hashes))
           FROM @extschema@.pay_archive_keys AS r
           WHERE r.lo OPERATOR(pg_catalog.<=) k.h
           ORDER BY r.lo DESC LIMIT 1)
    UNION ALL
    SELECT a.bizno, 'archived, but the hash that refuses its late retries is not kept'
    FROM @extschema@.pay_ledger_archive AS a
    CROSS JOIN LATERAL (SELECT @extschema@.pay_archive_key_hash(a.bizno) AS h) AS k
    WHERE (SELECT k.h OPERATOR(pg_catalog.=) ANY (@extschema@.pay_archive_key_unpack(r.lo, r.hashes))
           FROM @extschema@.pay_archive_keys AS r
           WHERE r.lo OPERATOR(pg_catalog.<=) k.h
           ORDER BY r.lo DESC LIMIT 1) IS NOT TRUE
    UNION ALL
    SELECT NULL, pg_catalog.format('the row of pay_archive_keys from %s is not a list of hashes', r.lo)
    FROM @extschema@.pay_archive_keys AS r
    WHERE @extschema@.pay_archive_key_unpack(r.lo, r.hashes) IS NULL
    UNION ALL
    SELECT NULL, pg_catalog.format('the rows of pay_archive_keys from %s and from %s both answer for the hashes from %s to %s',
                                   r.lo, r.next_lo, r.next_lo, LEAST(r.hi, r.next_hi))
    FROM (SELECT k.lo, k.hi, pg_catalog.lead(k.lo) OVER w AS next_lo, pg_catalog.lead(k.hi) OVER w AS next_hi
          FROM @extschema@.pay_archive_keys AS k WINDOW w AS (ORDER BY k.lo)) AS r
    WHERE r.next_lo OPERATOR(pg_catalog.<=) r.hi
    UNION ALL
    SELECT pg_catalog.min(a.bizno), pg_catalog.format('business action %s %s was archived under %s bizNos',
                                                     a.prefix, a.biz_id, pg_catalog.count(*))
    FROM @extschema@.pay_ledger_archive AS a
    WHERE a.biz_id IS NOT NULL
    GROUP BY a.prefix, a.biz_id
    HAVING pg_catalog.count(*) OPERATOR(pg_catalog.>) 1
    UNION ALL
    SELECT NULL, pg_catalog.format('the archive of %s: %s', pg_catalog.to_char(v.month, 'YYYY-MM'), v.problem)
    FROM @extschema@.pay_archive_verify() AS v
    WHERE v.problem IS NOT NULL
    UNION ALL
    -- each step the journal records is one the state machine allows (the
    -- same state again, as a second charge's or an amount change's row, is
    -- no step): what the guard refuses may still be journaled where it did
    -- not fire, or with the type's labels changed in the catalog
    SELECT e.bizno, pg_catalog.format('journal entry %s goes from %s to %s, which the state machine does not allow',
                                      e.seq, COALESCE(e.from_status::text, 'nothing'), e.to_status)
    FROM entries AS e
    WHERE e.from_status IS DISTINCT FROM e.to_status
      AND NOT @extschema@.pay_allowed(e.from_status, e.to_status)
    UNION ALL
    SELECT j.bizno, pg_catalog.format('journal entry %s is a second charge %s of a step from %s to %s under %s, which the API never journals',
                                      j.seq, j.second_charge, COALESCE(j.from_status::text, 'nothing'), j.to_status,
                                      COALESCE(j.channel_ref, 'no reference'))
    FROM @extschema@.pay_journal AS j
    WHERE j.second_charge IS NOT NULL
      AND (j.second_charge OPERATOR(pg_catalog.<>) ALL (ARRAY['reported', 'confirmed'])
           OR j.from_status IS DISTINCT FROM 'SUCCESS'::@extschema@.pay_status
           OR j.to_status OPERATOR(pg_catalog.<>) 'SUCCESS'::@extschema@.pay_status
           OR j.channel_ref IS NULL)
    -- the triggers that fire ALWAYS, switched off or to one session mode
    -- (by a superuser in maintenance, or behind the event triggers' back),
    -- a partition of the archive without its TRUNCATE guard (one made by
    -- hand, not by pay_archive_partitions), and the event triggers themselves
    UNION ALL
    SELECT NULL, pg_catalog.format('the partition %s of %s has no guard against TRUNCATE',
                                   i.inhrelid::pg_catalog.regclass, i.inhparent::pg_catalog.regclass)
    FROM pg_catalog.pg_inherits AS i
    WHERE i.inhparent OPERATOR(pg_catalog.=) ANY
          (ARRAY['@extschema@.pay_ledger_archive', '@extschema@.pay_journal_archive']::pg_catalog.regclass[])
      AND NOT EXISTS (SELECT FROM pg_catalog.pg_trigger AS t
                      WHERE t.tgrelid OPERATOR(pg_catalog.=) i.inhrelid
                        AND t.tgfoid OPERATOR(pg_catalog.=) '@extschema@.pay_guard()'::pg_catalog.regprocedure
                        AND (t.tgtype OPERATOR(pg_catalog.&) 32::pg_catalog.int2) OPERATOR(pg_catalog.<>) 0)
    UNION ALL
    SELECT NULL, pg_catalog.format('the trigger %s on %s is %s, not ENABLE ALWAYS', t.tgname, t.tgrelid::pg_catalog.regclass,
                                   CASE t.tgenabled WHEN 'D' THEN 'disabled' WHEN 'O' THEN 'enabled outside a replica''s apply only'
                                                    ELSE 'enabled in a replica''s apply only' END)
    FROM pg_catalog.pg_trigger AS t
    JOIN pg_catalog.pg_proc AS p ON p.oid OPERATOR(pg_catalog.=) t.tgfoid
    WHERE p.pronamespace OPERATOR(pg_catalog.=)
          (SELECT e.extnamespace FROM pg_catalog.pg_extension AS e WHERE e.extname OPERATOR(pg_catalog.=) 'idempotent_pay')
      AND p.proname OPERATOR(pg_catalog.=) ANY
          (ARRAY['pay_guard', 'pay_archive_moved', 'pay_archive_keys_kept']::pg_catalog.name[])
      AND t.tgenabled OPERATOR(pg_catalog.<>) 'A'
    UNION ALL
    SELECT NULL, CASE WHEN v.evtname IS NULL THEN pg_catalog.format('the event trigger %s is missing', w.name)
                      ELSE pg_catalog.format('the event trigger %s is not ENABLE ALWAYS', w.name) END
    FROM (VALUES ('pay_refuse_drop'::pg_catalog.name), ('pay_keep_guards_always'), ('pay_refuse_ddl')) AS w(name)
    LEFT JOIN pg_catalog.pg_event_trigger AS v ON v.evtname OPERATOR(pg_catalog.=) w.name
    WHERE v.evtname IS NULL OR v.evtenabled OPERATOR(pg_catalog.<>) 'A'
    -- pay_stats against a full count of the same snapshot: its counts are
    -- tables an owner could write by hand
    UNION ALL
    SELECT NULL, pg_catalog.format('pay_stats counts %s payments and %s refunds %s, the ledger holds %s and %s',
                                   s.payments, s.refunds, s.status, f.payments, f.refunds)
    FROM (SELECT t.status, pg_catalog.count(l.bizno) AS payments,
                 pg_catalog.count(l.bizno) FILTER (WHERE l.parent IS NOT NULL) AS refunds
          FROM pg_catalog.unnest(pg_catalog.enum_range(NULL::@extschema@.pay_status)) AS t(status)
          LEFT JOIN @extschema@.pay_ledger AS l ON l.status OPERATOR(pg_catalog.=) t.status
          GROUP BY t.status) AS f
    JOIN @extschema@.pay_stats AS s ON s.status OPERATOR(pg_catalog.=) f.status
    WHERE s.payments OPERATOR(pg_catalog.<>) f.payments OR s.refunds OPERATOR(pg_catalog.<>) f.refunds
    UNION ALL
    SELECT NULL, pg_catalog.format('pay_stats counts %s authorizations, %s captures, %s voids and %s increments %s, '
                                   'the ledger holds %s, %s, %s and %s',
                                   s.authorizations, s.captures, s.voids, s.increments, s.status,
                                   f.authorizations, f.captures, f.voids, f.increments)
    FROM (SELECT t.status,
                 pg_catalog.count(l.bizno) FILTER (WHERE l.kind OPERATOR(pg_catalog.=) 'AUTHORIZATION') AS authorizations,
                 pg_catalog.count(l.bizno) FILTER (WHERE l.kind OPERATOR(pg_catalog.=) ANY ('{CAPTURE,FINAL_CAPTURE}'))
                     AS captures,
                 pg_catalog.count(l.bizno) FILTER (WHERE l.kind OPERATOR(pg_catalog.=) 'VOID') AS voids,
                 pg_catalog.count(l.bizno) FILTER (WHERE l.kind OPERATOR(pg_catalog.=) 'INCREMENT') AS increments
          FROM pg_catalog.unnest(pg_catalog.enum_range(NULL::@extschema@.pay_status)) AS t(status)
          LEFT JOIN @extschema@.pay_ledger AS l ON l.status OPERATOR(pg_catalog.=) t.status
          GROUP BY t.status) AS f
    JOIN @extschema@.pay_stats AS s ON s.status OPERATOR(pg_catalog.=) f.status
    WHERE (s.authorizations, s.captures, s.voids, s.increments)
          IS DISTINCT FROM (f.authorizations, f.captures, f.voids, f.increments)
    UNION ALL
    SELECT NULL, pg_catalog.format('pay_stats_amounts counts %s authorized and %s captured in %s, '
                                   'the journal and the archive %s and %s',
                                   COALESCE(s.authorized, 0), COALESCE(s.captured, 0), COALESCE(s.currency, f.currency),
                                   COALESCE(f.authorized, 0), COALESCE(f.captured, 0))
    FROM @extschema@.pay_stats_amounts AS s
    FULL JOIN (SELECT c.currency,
                      COALESCE(pg_catalog.sum(c.amount) FILTER (WHERE c.kind OPERATOR(pg_catalog.=) ANY ('{AUTHORIZATION,INCREMENT}')), 0)
                          AS authorized,
                      COALESCE(pg_catalog.sum(c.amount) FILTER (WHERE c.kind OPERATOR(pg_catalog.=) ANY ('{CAPTURE,FINAL_CAPTURE}')), 0)
                          AS captured
               FROM (SELECT j.from_status, j.to_status, l.kind, j.currency, j.amount
                     FROM @extschema@.pay_journal AS j
                     JOIN @extschema@.pay_ledger AS l ON l.bizno OPERATOR(pg_catalog.=) j.bizno
                     WHERE l.kind IS NOT NULL
                     UNION ALL
                     SELECT a.from_status, a.to_status, a.kind, a.currency, a.amount
                     FROM @extschema@.pay_archive_counts AS a
                     WHERE a.kind IS NOT NULL) AS c
               WHERE c.to_status OPERATOR(pg_catalog.=) 'SUCCESS'::@extschema@.pay_status
                 AND c.from_status IS DISTINCT FROM 'SUCCESS'::@extschema@.pay_status
               GROUP BY 1) AS f
      ON f.currency OPERATOR(pg_catalog.=) s.currency
    WHERE (s.authorized, s.captured) IS DISTINCT FROM (f.authorized, f.captured)
    UNION ALL
    SELECT NULL, pg_catalog.format('pay_stats_transitions counts %s transitions from %s to %s, the journal and the archive %s',
                                   COALESCE(s.transitions, 0),
                                   COALESCE(COALESCE(s.from_status, j.from_status)::text, 'nothing'),
                                   COALESCE(s.to_status, j.to_status), COALESCE(j.n, 0))
    FROM @extschema@.pay_stats_transitions AS s
    FULL JOIN (SELECT a.from_status, a.to_status, pg_catalog.sum(a.n) AS n
               FROM (SELECT e.from_status, e.to_status, 1 AS n FROM @extschema@.pay_journal AS e
                     UNION ALL
                     SELECT c.from_status, c.to_status, c.n FROM @extschema@.pay_archive_counts AS c) AS a
               WHERE a.from_status IS DISTINCT FROM a.to_status
               GROUP BY 1, 2) AS j
      ON s.from_status IS NOT DISTINCT FROM j.from_status AND s.to_status OPERATOR(pg_catalog.=) j.to_status
    WHERE s.transitions IS DISTINCT FROM j.n
$$
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = @extschema@, pg_temp;

COMMENT ON FUNCTION @extschema@.pay_verify() IS
'Every violation of the ledger/journal invariants, including a PROCESSING or SUCCESS payment missing from the ledger, a success whose reference or response differs from the one it was journaled with, refunds beyond their payment''s capture, and (since 1.4) captures beyond their authorization''s hold, steps of what is no authorization, steps claimed after their authorization closed; no rows when all hold';

-- Reconciliation against the bank's statement, a table or view with the
-- columns bizno, amount, currency, status and channel_ref.  A statement's
-- bizno may carry the attempt as bizNo/attempt ("/" never occurs in a key);
-- settling then happens under that attempt, so a late statement of an
-- earlier attempt is refused rather than applied to a later one.  With
-- settle => true it also settles the PROCESSING payments and refunds the
-- bank has answered, and confirms a duplicate charge's second charges.  A
-- payment it settles as SUCCESS stores a response for every later claim to
-- replay, as pay_succeed does: the statement row's response, when the
-- statement has that column and the row a value, else the bank's row itself
-- ({"bizno", "amount", "currency", "status", "channel_ref"}).
CREATE FUNCTION @extschema@.pay_reconcile(statement regclass, settle boolean DEFAULT false,
                                          since timestamptz DEFAULT NULL)
RETURNS TABLE (kind text, bizno text, ledger_status @extschema@.pay_status, ledger_amount numeric,
               bank_amount numeric, bank_rows integer, detail text)
AS $$
DECLARE
    found record;
    previous_note text;
    reference text;
    refund_status @extschema@.pay_status;
    second_charges text[];
    unrefunded boolean;
    response_column text := 'NULL::pg_catalog.jsonb';
BEGIN
    IF statement IS NULL OR settle IS NULL THEN
        RAISE EXCEPTION 'statement and settle must not be null' USING ERRCODE = '22004';
    END IF;
    IF EXISTS (SELECT FROM pg_catalog.pg_attribute AS a
               WHERE a.attrelid OPERATOR(pg_catalog.=) statement
                 AND a.attname OPERATOR(pg_catalog.=) 'response'
                 AND a.attnum OPERATOR(pg_catalog.>) 0 AND NOT a.attisdropped) THEN
        response_column := 's.response::pg_catalog.jsonb';
    END IF;

    FOR found IN EXECUTE pg_catalog.format($query$
        WITH bank AS MATERIALIZED (
            SELECT pg_catalog.split_part(s.bizno::pg_catalog.text, '/', 1) AS bizno,
                   pg_catalog.count(*)::integer AS bank_rows,
                   pg_catalog.count(*) FILTER (WHERE s.status OPERATOR(pg_catalog.=) 'SUCCESS') AS successes,
                   pg_catalog.count(*) FILTER (WHERE s.status OPERATOR(pg_catalog.=) 'FAILED') AS failures,
                   pg_catalog.sum(s.amount) FILTER (WHERE s.status OPERATOR(pg_catalog.=) 'SUCCESS') AS charged,
                   pg_catalog.min(s.amount) FILTER (WHERE s.status OPERATOR(pg_catalog.=) 'SUCCESS') AS least_amount,
                   pg_catalog.max(s.amount) FILTER (WHERE s.status OPERATOR(pg_catalog.=) 'SUCCESS') AS greatest_amount,
                   pg_catalog.min(s.currency) FILTER (WHERE s.status OPERATOR(pg_catalog.=) 'SUCCESS') AS least_currency,
                   pg_catalog.max(s.currency) FILTER (WHERE s.status OPERATOR(pg_catalog.=) 'SUCCESS') AS greatest_currency,
                   pg_catalog.min(s.channel_ref) FILTER (WHERE s.status OPERATOR(pg_catalog.=) 'SUCCESS') AS channel_ref,
                   pg_catalog.array_agg(DISTINCT s.channel_ref::pg_catalog.text) FILTER (
                       WHERE s.status OPERATOR(pg_catalog.=) 'SUCCESS' AND s.channel_ref IS NOT NULL) AS channel_refs,
                   pg_catalog.max(a.attempt) FILTER (WHERE s.status OPERATOR(pg_catalog.=) 'SUCCESS') AS success_attempt,
                   pg_catalog.max(a.attempt) FILTER (WHERE s.status OPERATOR(pg_catalog.=) 'FAILED') AS failure_attempt,
                   -- the response of the success whose reference is settled (the least)
                   (pg_catalog.array_agg(COALESCE(%s, pg_catalog.jsonb_build_object(
                        'bizno', s.bizno, 'amount', s.amount, 'currency', s.currency,
                        'status', s.status, 'channel_ref', s.channel_ref))
                        ORDER BY s.channel_ref NULLS LAST) FILTER (
                        WHERE s.status OPERATOR(pg_catalog.=) 'SUCCESS'))[1] AS bank_response
            FROM %s AS s,
                 LATERAL (SELECT CASE WHEN pg_catalog.split_part(s.bizno::pg_catalog.text, '/', 2)
                                           OPERATOR(pg_catalog.~) '^[0-9]{1,9}$'
                                      THEN pg_catalog.split_part(s.bizno::pg_catalog.text, '/', 2)::pg_catalog.int4
                                 END AS attempt) AS a
            GROUP BY 1
        ), joined AS MATERIALIZED (
            SELECT COALESCE(l.bizno, b.bizno) AS bizno, l.status, l.amount, l.currency, l.updated_at,
                   COALESCE(b.bank_rows, 0) AS bank_rows, COALESCE(b.successes, 0) AS successes,
                   COALESCE(b.failures, 0) AS failures, b.charged, b.least_amount, b.greatest_amount,
                   b.least_currency, b.greatest_currency, b.channel_ref, b.channel_refs,
                   l.channel_ref AS ledger_channel_ref, l.parent, l.attempt AS ledger_attempt,
                   b.success_attempt, b.failure_attempt, b.bank_response, l.kind AS step_kind
            FROM @extschema@.pay_ledger AS l
            FULL JOIN bank AS b ON b.bizno OPERATOR(pg_catalog.=) l.bizno
        )
        SELECT 'MISSING_IN_BANK' AS kind, j.*, 'the ledger says SUCCESS, the bank has no successful charge' AS detail
        FROM joined AS j
        WHERE j.status OPERATOR(pg_catalog.=) 'SUCCESS' AND j.successes OPERATOR(pg_catalog.=) 0
          AND ($1 IS NULL OR j.updated_at OPERATOR(pg_catalog.>=) $1)
        UNION ALL
        SELECT 'MISSING_IN_LEDGER', j.*,
               CASE WHEN j.status IS NULL THEN 'the bank charged, the ledger has no such payment'
                    ELSE 'the bank charged, the ledger says ' OPERATOR(pg_catalog.||) j.status END
        FROM joined AS j
        WHERE j.successes OPERATOR(pg_catalog.>) 0
          AND (j.status IS NULL OR j.status OPERATOR(pg_catalog.=) 'INIT')
        UNION ALL
        SELECT 'DUPLICATE_CHARGE', j.*, pg_catalog.format('the bank charged %%s times', j.successes)
        FROM joined AS j
        WHERE j.successes OPERATOR(pg_catalog.>) 1
        UNION ALL
        SELECT 'AMOUNT_MISMATCH', j.*,
               pg_catalog.format('the ledger says %%s, the bank charged %%s', j.amount, j.least_amount)
        FROM joined AS j
        WHERE j.status OPERATOR(pg_catalog.=) 'SUCCESS' AND j.successes OPERATOR(pg_catalog.>) 0
          AND (j.least_amount OPERATOR(pg_catalog.<>) j.amount OR j.greatest_amount OPERATOR(pg_catalog.<>) j.amount)
        UNION ALL
        SELECT 'CURRENCY_MISMATCH', j.*,
               pg_catalog.format('the ledger says %%s, the bank charged in %%s', j.currency, j.least_currency)
        FROM joined AS j
        WHERE j.status OPERATOR(pg_catalog.=) 'SUCCESS' AND j.successes OPERATOR(pg_catalog.>) 0
          AND j.currency IS NOT NULL
          AND (j.least_currency OPERATOR(pg_catalog.<>) j.currency OR j.greatest_currency OPERATOR(pg_catalog.<>) j.currency)
        UNION ALL
        SELECT 'STATUS_MISMATCH', j.*, 'the ledger says FAILED, the bank charged'
        FROM joined AS j
        WHERE j.status OPERATOR(pg_catalog.=) 'FAILED' AND j.successes OPERATOR(pg_catalog.>) 0
        UNION ALL
        SELECT 'UNRESOLVED_PROCESSING', j.*,
               CASE WHEN j.successes OPERATOR(pg_catalog.>) 0 THEN 'the bank reports SUCCESS'
                    ELSE 'the bank reports FAILED' END
        FROM joined AS j
        WHERE j.status OPERATOR(pg_catalog.=) 'PROCESSING'
          AND (j.successes OPERATOR(pg_catalog.>) 0 OR j.failures OPERATOR(pg_catalog.>) 0)
        ORDER BY 1, 2
    $query$, response_column, statement) USING since
    LOOP
        kind := found.kind;
        bizno := found.bizno;
        ledger_status := found.status;
        ledger_amount := found.amount;
        bank_amount := found.charged;
        bank_rows := found.bank_rows;
        detail := found.detail;

        IF settle AND found.kind OPERATOR(pg_catalog.=) 'UNRESOLVED_PROCESSING' THEN
            -- NULL until the library is loaded (by the first settling below)
            previous_note := pg_catalog.current_setting('idempotent_pay.journal_note', true);
            PERFORM pg_catalog.set_config('idempotent_pay.journal_note', 'settled by reconciliation', true);
            BEGIN
                -- under the attempt the bank's reference names, else the current one
                IF found.successes OPERATOR(pg_catalog.>) 0 THEN
                    PERFORM @extschema@.pay_succeed(found.bizno, found.channel_ref,
                        COALESCE(found.success_attempt, found.ledger_attempt), found.bank_response);
                    ledger_status := 'SUCCESS';
                ELSE
                    ledger_status := @extschema@.pay_fail(found.bizno,
                        'settled by reconciliation: the bank reports FAILED',
                        COALESCE(found.failure_attempt, found.ledger_attempt));
                END IF;
                detail := detail OPERATOR(pg_catalog.||) ': settled as ' OPERATOR(pg_catalog.||) ledger_status;
            EXCEPTION WHEN OTHERS THEN
                detail := detail OPERATOR(pg_catalog.||) ': not settled, ' OPERATOR(pg_catalog.||) SQLERRM;
            END;
            PERFORM pg_catalog.set_config('idempotent_pay.journal_note', previous_note, true);
        END IF;

        -- A duplicate charge: each charge under another reference than the
        -- ledger's is listed with its refund; settling journals it once as
        -- a second charge confirmed by the statement, which the refund limit
        -- then counts as captured.  The
        -- refund is keyed by that reference.
        IF found.kind OPERATOR(pg_catalog.=) 'DUPLICATE_CHARGE'
           AND found.status OPERATOR(pg_catalog.=) 'SUCCESS' THEN
            IF found.ledger_channel_ref IS NULL THEN
                detail := detail OPERATOR(pg_catalog.||)
                    ': the ledger has no channel_ref to tell the first charge from the others';
            ELSE
                second_charges := '{}';
                unrefunded := false;
                BEGIN
                    FOREACH reference IN ARRAY found.channel_refs LOOP
                        CONTINUE WHEN reference OPERATOR(pg_catalog.=) found.ledger_channel_ref;
                        IF settle THEN
                            PERFORM @extschema@.pay_confirm_second_charge(found.bizno, reference);
                        END IF;
                        refund_status := (SELECT r.status FROM @extschema@.pay_ledger AS r
                                          WHERE r.parent OPERATOR(pg_catalog.=) found.bizno
                                            AND r.refund_key OPERATOR(pg_catalog.=) reference);
                        unrefunded := unrefunded OR refund_status IS DISTINCT FROM 'SUCCESS';
                        second_charges := second_charges OPERATOR(pg_catalog.||) pg_catalog.format('%s (%s)',
                            reference, COALESCE('refund ' OPERATOR(pg_catalog.||) refund_status, 'not refunded'));
                    END LOOP;
                    detail := pg_catalog.format('%s: %s %s', detail,
                        CASE WHEN settle THEN 'second charges journaled:' ELSE 'second charges:' END,
                        pg_catalog.array_to_string(second_charges, ', '));
                    IF unrefunded THEN
                        detail := pg_catalog.format('%s; refund each with pay_refund_open(%L, <its reference>, %s)',
                                                    detail, found.bizno, found.amount);
                    END IF;
                EXCEPTION WHEN OTHERS THEN
                    detail := detail OPERATOR(pg_catalog.||) ': not settled, ' OPERATOR(pg_catalog.||) SQLERRM;
                END;
            END IF;
        END IF;

        IF found.parent IS NOT NULL THEN
            detail := pg_catalog.format('%s of %s: %s',
                                        COALESCE(pg_catalog.lower(pg_catalog.replace(found.step_kind, '_', ' ')), 'refund'),
                                        found.parent, detail);
        END IF;
        RETURN NEXT;
    END LOOP;

    -- Captures the bank settled after their authorization closed (a void or
    -- a final capture claimed before their SUCCESS, or the hold expired):
    -- reserved at their claim and counted, listed for the merchant to see.
    RETURN QUERY
    SELECT 'LATE_CAPTURE'::pg_catalog.text, c.bizno, c.status, c.amount::pg_catalog.numeric,
           NULL::pg_catalog.numeric, 0,
           pg_catalog.format('capture of %s settled after its authorization closed: %s', c.parent, closed.why)
    FROM @extschema@.pay_ledger AS c
    JOIN @extschema@.pay_ledger AS a ON a.bizno OPERATOR(pg_catalog.=) c.parent
    JOIN @extschema@.pay_journal AS js ON js.bizno OPERATOR(pg_catalog.=) c.bizno
         AND js.to_status OPERATOR(pg_catalog.=) 'SUCCESS'::@extschema@.pay_status
    CROSS JOIN LATERAL (
        SELECT 'expired'::pg_catalog.text AS why WHERE js.at OPERATOR(pg_catalog.>) a.expires_at
        UNION ALL
        SELECT pg_catalog.lower(v.kind) OPERATOR(pg_catalog.||) ' ' OPERATOR(pg_catalog.||) v.bizno
        FROM @extschema@.pay_ledger AS v
        WHERE v.parent OPERATOR(pg_catalog.=) c.parent AND NOT v.bizno OPERATOR(pg_catalog.=) c.bizno
          AND v.kind OPERATOR(pg_catalog.=) ANY ('{VOID,FINAL_CAPTURE}')
          AND v.status OPERATOR(pg_catalog.=) ANY ('{PROCESSING,SUCCESS}'::@extschema@.pay_status[])
          AND js.seq OPERATOR(pg_catalog.>) (SELECT pg_catalog.max(vj.seq) FROM @extschema@.pay_journal AS vj
                                             WHERE vj.bizno OPERATOR(pg_catalog.=) v.bizno
                                               AND vj.to_status OPERATOR(pg_catalog.=) 'PROCESSING'::@extschema@.pay_status)
        LIMIT 1) AS closed
    WHERE c.kind OPERATOR(pg_catalog.=) ANY ('{CAPTURE,FINAL_CAPTURE}')
      AND c.status OPERATOR(pg_catalog.=) 'SUCCESS'::@extschema@.pay_status
      AND (since IS NULL OR c.updated_at OPERATOR(pg_catalog.>=) since);
END
$$
LANGUAGE plpgsql VOLATILE SET search_path = @extschema@, pg_temp;

COMMENT ON FUNCTION @extschema@.pay_reconcile(regclass, boolean, timestamptz) IS
'Compare the ledger with a bank statement (bizno, amount, currency, status, channel_ref, optionally response), refunds included; settle => true settles PROCESSING payments and refunds the bank has answered, storing the response a retry replays, and journals the second charges of a DUPLICATE_CHARGE';

-- The same, of a statement given as rows: a JSON array of objects with
-- bizno, amount, currency, status and channel_ref, and optionally the
-- response to store for a success.  idempotent_pay_proxy
-- sends each partition its share of a statement loaded in the proxy's
-- database, which no partition can read; the rows go into a temporary table
-- that pay_reconcile then reads.
CREATE FUNCTION @extschema@.pay_reconcile_rows(statement jsonb, settle boolean DEFAULT false,
                                               since timestamptz DEFAULT NULL)
RETURNS TABLE (kind text, bizno text, ledger_status @extschema@.pay_status, ledger_amount numeric,
               bank_amount numeric, bank_rows integer, detail text)
AS $$
BEGIN
    IF statement IS NULL OR settle IS NULL THEN
        RAISE EXCEPTION 'statement and settle must not be null' USING ERRCODE = '22004';
    END IF;
    IF pg_catalog.jsonb_typeof(statement) OPERATOR(pg_catalog.<>) 'array' THEN
        RAISE EXCEPTION 'a statement is a JSON array of rows, not a JSON %', pg_catalog.jsonb_typeof(statement)
            USING ERRCODE = '22023',
                  HINT = 'Pass [{"bizno": ..., "amount": ..., "currency": ..., "status": ..., "channel_ref": ...}, ...].';
    END IF;
    -- a second call in one transaction finds the first one's table
    IF pg_catalog.to_regclass('pg_temp.pay_statement_rows') IS NOT NULL THEN
        DROP TABLE pg_temp.pay_statement_rows;
    END IF;
    CREATE TEMPORARY TABLE pay_statement_rows ON COMMIT DROP AS
        SELECT s.bizno, s.amount, s.currency, s.status, s.channel_ref, s.response
        FROM pg_catalog.jsonb_to_recordset(statement)
             AS s(bizno text, amount numeric, currency text, status text, channel_ref text, response jsonb);
    -- looked up when run: the table is new on every call
    RETURN QUERY SELECT * FROM @extschema@.pay_reconcile(
        pg_catalog.to_regclass('pg_temp.pay_statement_rows'), settle, since);
    DROP TABLE pg_temp.pay_statement_rows;
END
$$
LANGUAGE plpgsql VOLATILE SET search_path = @extschema@, pg_temp;

COMMENT ON FUNCTION @extschema@.pay_reconcile_rows(jsonb, boolean, timestamptz) IS
'pay_reconcile of a statement given as a JSON array of rows (bizno, amount, currency, status, channel_ref, optionally response): what idempotent_pay_proxy sends each partition';

-- Stats (src/stats.c): the setting idempotent_pay.stuck_after and the
-- counters of duplicate answers, kept in shared memory when the library is
-- preloaded; the view pay_stats shows them next to the ledger's counts.
CREATE FUNCTION @extschema@.pay_stats_counters(OUT stuck_after interval, OUT already_succeeded bigint,
                                               OUT in_progress bigint, OUT stats_reset timestamptz)
RETURNS record
AS 'MODULE_PATHNAME', 'pay_stats_counters'
LANGUAGE C VOLATILE PARALLEL SAFE;

COMMENT ON FUNCTION @extschema@.pay_stats_counters() IS
'idempotent_pay.stuck_after and the shared counters of duplicate answers (NULL unless preloaded)';

CREATE FUNCTION @extschema@.pay_stats_reset()
RETURNS void
AS 'MODULE_PATHNAME', 'pay_stats_reset'
LANGUAGE C VOLATILE;

COMMENT ON FUNCTION @extschema@.pay_stats_reset() IS
'Start the counters of pay_stats again from zero';

-- The maintained counts (the tables after the journal's): folding the
-- journal into pay_stats_counts, and reading the counts with the rows
-- written since.
--
-- What a journal row of a second charge adds to the counts, judged against
-- the rows of the same bizNo and reference counted before it (folded
-- earlier, or earlier in the same fold): a report, the statement's
-- confirmation of one reported, one found on a statement first, or the
-- report of one a statement confirmed already.  pay_second_charges lists
-- the same charges by scanning the journal.
CREATE FUNCTION @extschema@.pay_stats_second_charge(bizno text, kind text, channel_ref text, seq bigint,
                                                     counted_from bigint, counted pg_snapshot)
RETURNS text
AS $$
    SELECT CASE WHEN (r.report AND NOT r.confirmed_before) THEN 'reported'
                WHEN r.report THEN 'late report'
                WHEN r.reported_before THEN 'confirmed'
                ELSE 'found'
           END
    FROM (SELECT $2 OPERATOR(pg_catalog.=) 'reported' AS report,
                 pg_catalog.bool_or(NOT e.report) IS TRUE AS confirmed_before,
                 pg_catalog.bool_or(e.report) IS TRUE AS reported_before
          FROM (SELECT j.second_charge OPERATOR(pg_catalog.=) 'reported' AS report
                FROM @extschema@.pay_journal AS j
                WHERE j.bizno OPERATOR(pg_catalog.=) $1
                  AND j.seq OPERATOR(pg_catalog.<>) $4
                  AND j.second_charge IS NOT NULL
                  AND j.channel_ref OPERATOR(pg_catalog.=) $3
                  AND (j.seq OPERATOR(pg_catalog.<) $4 OR j.seq OPERATOR(pg_catalog.<) $5
                       OR pg_catalog.pg_visible_in_snapshot(j.txid, $6))) AS e) AS r
$$
LANGUAGE sql STABLE SET search_path = @extschema@, pg_temp;

COMMENT ON FUNCTION @extschema@.pay_stats_second_charge(text, text, text, bigint, bigint, pg_snapshot) IS
'What a journal row of a second charge adds to pay_stats: reported, confirmed, found (on a statement first) or late report';

-- The journal rows and deletions no count includes yet: those not visible in
-- the snapshot counted, numbered from counted_from on.  A refund and the card
-- flow's kind of a row are known by its ledger row (a join: looked up row by
-- row for a few rows, hashed for the first fold's whole journal), or by its
-- deletion when the row is gone; a row of the card flow brings its currency
-- and amount, which the counts sum.  Without a
-- search_path of its own (every name in it is qualified) the planner inlines
-- it, and so sees counted_from's value; bounded above too (no row visible
-- has a number the sequence has not handed out), the range reads as narrow
-- even before the journal was analyzed, and is read through the primary key.
CREATE FUNCTION @extschema@.pay_stats_unfolded(counted_from bigint, counted pg_snapshot,
    OUT seq bigint, OUT bizno text, OUT from_status @extschema@.pay_status,
    OUT to_status @extschema@.pay_status, OUT refund boolean, OUT second_charge text,
    OUT at timestamptz, OUT kind text, OUT currency text, OUT amount numeric)
RETURNS SETOF record
AS $$
    WITH journal AS (
        SELECT j.seq, j.bizno, j.from_status, j.to_status, j.channel_ref, j.second_charge, j.at,
               j.currency, j.amount
        FROM @extschema@.pay_journal AS j
        WHERE j.seq OPERATOR(pg_catalog.>=) $1
          AND j.seq OPERATOR(pg_catalog.<=) (SELECT s.last_value FROM @extschema@.pay_journal_seq_seq AS s)
          AND NOT pg_catalog.pg_visible_in_snapshot(j.txid, $2)),
    deletions AS (
        SELECT d.seq, d.bizno, d.status, d.refund, d.kind
        FROM @extschema@.pay_stats_deletions AS d
        WHERE d.seq OPERATOR(pg_catalog.>=) $1
          AND d.seq OPERATOR(pg_catalog.<=) (SELECT s.last_value FROM @extschema@.pay_journal_seq_seq AS s)
          AND NOT pg_catalog.pg_visible_in_snapshot(d.txid, $2))
    SELECT j.seq, j.bizno, j.from_status, j.to_status,
           CASE WHEN l.bizno IS NOT NULL THEN l.parent IS NOT NULL
                ELSE COALESCE((SELECT pg_catalog.bool_or(d.refund) FROM deletions AS d
                               WHERE d.bizno OPERATOR(pg_catalog.=) j.bizno), false)
           END,
           CASE WHEN j.second_charge IS NOT NULL
                THEN @extschema@.pay_stats_second_charge(j.bizno, j.second_charge, j.channel_ref, j.seq, $1, $2)
           END,
           j.at, k.kind,
           CASE WHEN k.kind IS NOT NULL THEN j.currency END,
           CASE WHEN k.kind IS NOT NULL THEN j.amount END
    FROM journal AS j
    LEFT JOIN @extschema@.pay_ledger AS l ON l.bizno OPERATOR(pg_catalog.=) j.bizno
    CROSS JOIN LATERAL (SELECT CASE WHEN l.bizno IS NOT NULL THEN l.kind
                                    ELSE (SELECT pg_catalog.max(d.kind) FROM deletions AS d
                                          WHERE d.bizno OPERATOR(pg_catalog.=) j.bizno)
                               END AS kind) AS k
    UNION ALL
    SELECT d.seq, d.bizno, d.status, NULL, d.refund, NULL, NULL, d.kind, NULL, NULL
    FROM deletions AS d
$$
LANGUAGE sql STABLE;

COMMENT ON FUNCTION @extschema@.pay_stats_unfolded(bigint, pg_snapshot) IS
'The journal rows and deletions pay_stats_counts does not include yet, given pay_stats_state''s counted_from and counted';

-- The transactions of this database running now (virtual ids), and whether
-- all of a list have ended (src/stats.c).
CREATE FUNCTION @extschema@.pay_stats_running_transactions()
RETURNS text[]
AS 'MODULE_PATHNAME', 'pay_stats_running_transactions'
LANGUAGE C VOLATILE STRICT;

COMMENT ON FUNCTION @extschema@.pay_stats_running_transactions() IS
'The virtual transaction ids of the transactions of this database running now, but this one';

CREATE FUNCTION @extschema@.pay_stats_transactions_ended(vxids text[])
RETURNS boolean
AS 'MODULE_PATHNAME', 'pay_stats_transactions_ended'
LANGUAGE C VOLATILE STRICT;

COMMENT ON FUNCTION @extschema@.pay_stats_transactions_ended(text[]) IS
'Whether every transaction of a list pay_stats_running_transactions returned has ended; waits for none';

-- Whether the journal is a table of a logical subscription here.  Its rows
-- then carry the publisher's transaction ids, in which no snapshot of this
-- server can tell what was folded: a subscriber folds nothing, and pay_stats
-- counts there by scanning, until the subscription is dropped.
CREATE FUNCTION @extschema@.pay_stats_subscribed()
RETURNS boolean
AS $$
    SELECT EXISTS (SELECT FROM pg_catalog.pg_subscription_rel AS r
                   WHERE r.srrelid OPERATOR(pg_catalog.=) '@extschema@.pay_journal'::pg_catalog.regclass)
$$
LANGUAGE sql STABLE;

COMMENT ON FUNCTION @extschema@.pay_stats_subscribed() IS
'Whether the journal is a table of a logical subscription here: pay_stats then counts by scanning and folds nothing';

-- Whether counts kept by the server of that system identifier count this
-- server's transactions: not those of a publisher they were replicated from,
-- nor of the server a data directory was upgraded from.
CREATE FUNCTION @extschema@.pay_stats_counts_usable(system_identifier bigint)
RETURNS boolean
AS $$
    SELECT $1 OPERATOR(pg_catalog.=) (SELECT c.system_identifier FROM pg_catalog.pg_control_system() AS c)
       AND NOT @extschema@.pay_stats_subscribed()
$$
LANGUAGE sql STABLE;

COMMENT ON FUNCTION @extschema@.pay_stats_counts_usable(bigint) IS
'Whether counts kept by the server of that system identifier count this one''s transactions (and the journal is not a subscription''s)';

-- The snapshot a fold records as counted: the statement's, but with the
-- folding transaction's own xid among those running.  PostgreSQL leaves a
-- transaction's own xid out of its snapshots, where it then reads as
-- visible (below xmax, not listed); the rows the transaction writes after
-- its fold would then pass for folded, and never be counted.  STABLE: the
-- snapshot of the statement that calls it.
CREATE FUNCTION @extschema@.pay_stats_counted_snapshot()
RETURNS pg_snapshot
AS $$
    SELECT CASE WHEN x.own IS NULL OR x.own OPERATOR(pg_catalog.>=) pg_catalog.pg_snapshot_xmax(x.s) THEN x.s
           ELSE (LEAST(pg_catalog.pg_snapshot_xmin(x.s), x.own)::text
                 OPERATOR(pg_catalog.||) ':' OPERATOR(pg_catalog.||) pg_catalog.pg_snapshot_xmax(x.s)::text
                 OPERATOR(pg_catalog.||) ':' OPERATOR(pg_catalog.||)
                 (SELECT pg_catalog.string_agg(v.xid::text, ',' ORDER BY v.xid)
                  FROM (SELECT pg_catalog.pg_snapshot_xip(x.s) AS xid UNION SELECT x.own) AS v))::pg_snapshot
           END
    FROM (SELECT pg_catalog.pg_current_snapshot() AS s, pg_catalog.pg_current_xact_id_if_assigned() AS own) AS x
$$
LANGUAGE sql STABLE;

COMMENT ON FUNCTION @extschema@.pay_stats_counted_snapshot() IS
'The snapshot a fold of pay_stats records: the statement''s, with the folding transaction listed as running';

-- Fold the journal rows written since the last fold into pay_stats_counts;
-- the first fold counts the ledger and the whole journal.  pay_stats calls
-- it when at least 250 journal rows may be unfolded; a pg_cron job can
-- call it too.  It folds nothing, and answers false, in a read-only or a
-- REPEATABLE READ transaction (the fold needs a snapshot newer than its look
-- at the running transactions, which only READ COMMITTED takes), while
-- another session folds, when fewer than min_rows rows may be unfolded, or
-- in a transaction that wrote already.
CREATE FUNCTION @extschema@.pay_stats_refresh(min_rows bigint DEFAULT 0)
RETURNS boolean
AS $$
DECLARE
    state @extschema@.pay_stats_state;
    last_seq bigint;
    new_counted_from bigint;
    new_next_from bigint;
    new_next_from_after text[];
    renumber_from timestamptz;
BEGIN
    IF pg_catalog.current_setting('transaction_read_only')::boolean
       OR pg_catalog.current_setting('transaction_isolation') OPERATOR(pg_catalog.<>) 'read committed' THEN
        RETURN false;
    END IF;
    -- A transaction that wrote already may have written journal rows: a fold
    -- would count them, in a snapshot that does not show its own
    -- transaction, and every reader would count them again.
    IF pg_catalog.pg_current_xact_id_if_assigned() IS NOT NULL THEN
        RETURN false;
    END IF;
    IF @extschema@.pay_stats_subscribed() THEN
        RETURN false;
    END IF;
    BEGIN
        SELECT * INTO state FROM @extschema@.pay_stats_state FOR UPDATE NOWAIT;
    EXCEPTION WHEN lock_not_available THEN
        RETURN false;
    END;
    -- Counts another server kept (replicated to a subscriber since taken
    -- into service, or in a data directory pg_upgrade made) are in its
    -- transactions' terms: count again.
    IF state IS NOT NULL AND NOT @extschema@.pay_stats_counts_usable(state.system_identifier) THEN
        DELETE FROM @extschema@.pay_stats_state;
        state := NULL;
    END IF;

    -- The highest number the journal's sequence handed out, then the
    -- transactions running: each row numbered up to it was written by one of
    -- them or by a transaction that has ended.
    SELECT CASE WHEN s.is_called THEN s.last_value ELSE s.last_value OPERATOR(pg_catalog.-) 1 END
    INTO last_seq FROM @extschema@.pay_journal_seq_seq AS s;

    IF state IS NULL THEN
        -- The first fold: while the deletions wait, count the ledger and the
        -- whole journal in one snapshot.
        BEGIN
            LOCK TABLE @extschema@.pay_stats_state, @extschema@.pay_stats_counts,
                @extschema@.pay_stats_deletions, @extschema@.pay_stats_processing
                IN EXCLUSIVE MODE NOWAIT;
        EXCEPTION WHEN lock_not_available THEN
            RETURN false;
        END;
        IF EXISTS (SELECT FROM @extschema@.pay_stats_state) THEN
            RETURN false;
        END IF;
        new_next_from := last_seq OPERATOR(pg_catalog.+) 1;
        new_next_from_after := @extschema@.pay_stats_running_transactions();
        new_counted_from := CASE WHEN @extschema@.pay_stats_transactions_ended(new_next_from_after)
                                 THEN new_next_from ELSE 0 END;
        DELETE FROM @extschema@.pay_stats_counts;
        DELETE FROM @extschema@.pay_stats_deletions;
        DELETE FROM @extschema@.pay_stats_processing;
        WITH unfolded AS MATERIALIZED (
            SELECT * FROM @extschema@.pay_stats_unfolded(0, '1:1:'::pg_snapshot)),
        folded AS (
            SELECT f.from_status, f.to_status, f.refund, f.second_charge, f.kind, f.currency,
                   pg_catalog.sum(f.n)::bigint AS n, pg_catalog.sum(f.amount) AS amount
            FROM (SELECT u.from_status, u.to_status, u.refund, u.second_charge, u.kind, u.currency,
                         1 AS n, u.amount
                  FROM unfolded AS u
                  UNION ALL
                  -- and the rows the archive took from the journal
                  SELECT a.from_status, a.to_status, a.refund, a.second_charge, a.kind, a.currency,
                         a.n, a.amount
                  FROM @extschema@.pay_archive_counts AS a) AS f
            GROUP BY 1, 2, 3, 4, 5, 6),
        journal_balance AS (
            SELECT b.status, b.refund, b.kind, pg_catalog.sum(b.n) AS n
            FROM (SELECT f.to_status AS status, f.refund, f.kind, f.n FROM folded AS f
                  UNION ALL
                  SELECT f.from_status, f.refund, f.kind, OPERATOR(pg_catalog.-) f.n FROM folded AS f
                  WHERE f.from_status IS NOT NULL) AS b
            GROUP BY 1, 2, 3),
        ledger_balance AS (
            SELECT l.status, l.parent IS NOT NULL AS refund, l.kind, pg_catalog.count(*) AS n
            FROM @extschema@.pay_ledger AS l
            GROUP BY 1, 2, 3),
        counts AS (
            INSERT INTO @extschema@.pay_stats_counts (from_status, to_status, refund, second_charge, n,
                                                      kind, currency, amount)
            SELECT f.from_status, f.to_status, f.refund, f.second_charge, f.n, f.kind, f.currency, f.amount
            FROM folded AS f
            UNION ALL
            -- what the journal implies less what the ledger holds: the rows
            -- deleted before the counts were kept
            SELECT COALESCE(j.status, l.status), NULL, COALESCE(j.refund, l.refund), NULL,
                   (COALESCE(j.n, 0) OPERATOR(pg_catalog.-) COALESCE(l.n, 0))::bigint,
                   COALESCE(j.kind, l.kind), NULL, NULL
            FROM journal_balance AS j
            FULL JOIN ledger_balance AS l
              ON l.status OPERATOR(pg_catalog.=) j.status AND l.refund OPERATOR(pg_catalog.=) j.refund
             AND l.kind IS NOT DISTINCT FROM j.kind
            WHERE COALESCE(j.n, 0) OPERATOR(pg_catalog.<>) COALESCE(l.n, 0)
            RETURNING 1),
        processing AS (
            INSERT INTO @extschema@.pay_stats_processing (bizno, since, ordinal)
            SELECT l.bizno, COALESCE(l.processing_since, l.updated_at),
                   pg_catalog.row_number() OVER (ORDER BY COALESCE(l.processing_since, l.updated_at), l.bizno)
            FROM @extschema@.pay_ledger AS l
            WHERE l.status OPERATOR(pg_catalog.=) 'PROCESSING'::@extschema@.pay_status
            RETURNING 1)
        INSERT INTO @extschema@.pay_stats_state (counted, counted_from, next_from, next_from_after, folded_at,
                                                 system_identifier)
        VALUES (@extschema@.pay_stats_counted_snapshot(), new_counted_from, new_next_from, new_next_from_after,
                pg_catalog.clock_timestamp(),
                (SELECT c.system_identifier FROM pg_catalog.pg_control_system() AS c));
        RETURN true;
    END IF;

    IF last_seq OPERATOR(pg_catalog.<) (state.counted_from OPERATOR(pg_catalog.+) min_rows) THEN
        RETURN false;
    END IF;
    -- Once the transactions noted at an earlier fold have ended, no row
    -- numbered below that fold's next_from can still appear.  Those running
    -- now are noted in turn; when none is (a quiet moment), this fold's own
    -- snapshot already sees every row up to last_seq.
    IF @extschema@.pay_stats_transactions_ended(state.next_from_after) THEN
        new_next_from := last_seq OPERATOR(pg_catalog.+) 1;
        new_next_from_after := @extschema@.pay_stats_running_transactions();
        new_counted_from := CASE WHEN @extschema@.pay_stats_transactions_ended(new_next_from_after)
                                 THEN new_next_from ELSE state.next_from END;
    ELSE
        new_counted_from := state.counted_from;
        new_next_from := state.next_from;
        new_next_from_after := state.next_from_after;
    END IF;

    -- One statement, one snapshot: what it folds, and the snapshot it records.
    WITH unfolded AS MATERIALIZED (
        SELECT * FROM @extschema@.pay_stats_unfolded(state.counted_from, state.counted)),
    counts AS (
        INSERT INTO @extschema@.pay_stats_counts AS c (from_status, to_status, refund, second_charge, n,
                                                       kind, currency, amount)
        SELECT u.from_status, u.to_status, u.refund, u.second_charge, pg_catalog.count(*),
               u.kind, u.currency, pg_catalog.sum(u.amount)
        FROM unfolded AS u
        GROUP BY 1, 2, 3, 4, 6, 7
        ON CONFLICT ON CONSTRAINT pay_stats_counts_key
        DO UPDATE SET n = c.n OPERATOR(pg_catalog.+) excluded.n,
                      amount = c.amount OPERATOR(pg_catalog.+) excluded.amount
        RETURNING 1),
    latest AS (
        SELECT DISTINCT ON (u.bizno) u.bizno, u.to_status, u.at
        FROM unfolded AS u
        WHERE u.from_status IS DISTINCT FROM u.to_status AND u.to_status IS NOT NULL
        ORDER BY u.bizno, u.seq DESC),
    left_processing AS (
        DELETE FROM @extschema@.pay_stats_processing AS p
        USING latest AS l
        WHERE p.bizno OPERATOR(pg_catalog.=) l.bizno
          AND l.to_status OPERATOR(pg_catalog.<>) 'PROCESSING'::@extschema@.pay_status
        RETURNING 1),
    -- its ordinal is set below, with those of the rows after it
    entered_processing AS (
        INSERT INTO @extschema@.pay_stats_processing AS p (bizno, since, ordinal)
        SELECT l.bizno, l.at, 0 FROM latest AS l
        WHERE l.to_status OPERATOR(pg_catalog.=) 'PROCESSING'::@extschema@.pay_status
        ON CONFLICT (bizno) DO UPDATE SET since = excluded.since
        RETURNING 1),
    -- the earliest place in the PROCESSING set this fold changes: a row
    -- leaves it or moves (seen here as it was), or one enters
    changed_from AS (
        SELECT LEAST((SELECT pg_catalog.min(p.since) FROM @extschema@.pay_stats_processing AS p
                      JOIN latest AS l ON l.bizno OPERATOR(pg_catalog.=) p.bizno),
                     (SELECT pg_catalog.min(l.at) FROM latest AS l
                      WHERE l.to_status OPERATOR(pg_catalog.=) 'PROCESSING'::@extschema@.pay_status)) AS since),
    folded_deletions AS (
        DELETE FROM @extschema@.pay_stats_deletions AS d
        USING unfolded AS u
        WHERE u.to_status IS NULL AND d.seq OPERATOR(pg_catalog.=) u.seq
        RETURNING 1)
    UPDATE @extschema@.pay_stats_state
    SET counted = @extschema@.pay_stats_counted_snapshot(), counted_from = new_counted_from,
        next_from = new_next_from, next_from_after = new_next_from_after,
        folded_at = pg_catalog.clock_timestamp()
    RETURNING (SELECT c.since FROM changed_from AS c) INTO renumber_from;

    -- The rows before the first change keep their ordinals; those from it
    -- on are numbered after them again.  Payments mostly enter and leave
    -- PROCESSING at the end of the order, where few rows follow.
    IF renumber_from IS NOT NULL THEN
        UPDATE @extschema@.pay_stats_processing AS p
        SET ordinal = r.ordinal
        FROM (SELECT q.bizno,
                     b.n OPERATOR(pg_catalog.+) pg_catalog.row_number() OVER (ORDER BY q.since, q.bizno) AS ordinal
              FROM @extschema@.pay_stats_processing AS q,
                   (SELECT COALESCE((SELECT o.ordinal FROM @extschema@.pay_stats_processing AS o
                                     WHERE o.since OPERATOR(pg_catalog.<) renumber_from
                                     ORDER BY o.since DESC, o.bizno DESC LIMIT 1), 0) AS n) AS b
              WHERE q.since OPERATOR(pg_catalog.>=) renumber_from) AS r
        WHERE p.bizno OPERATOR(pg_catalog.=) r.bizno AND p.ordinal OPERATOR(pg_catalog.<>) r.ordinal;
    END IF;
    RETURN true;
END
$$
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = @extschema@, pg_temp SET jit = off;

COMMENT ON FUNCTION @extschema@.pay_stats_refresh(bigint) IS
'Fold the journal rows written since the last fold into pay_stats'' counts (the first time, count the ledger and the journal); false when it folded nothing';

-- The state of the counts a reader may use, folded first when 250 or more
-- journal rows may be waiting (about a millisecond of a reader's time);
-- NULL before the first fold and with counts of another server.
CREATE FUNCTION @extschema@.pay_stats_usable_state()
RETURNS @extschema@.pay_stats_state
AS $$
BEGIN
    PERFORM @extschema@.pay_stats_refresh(250);
    RETURN (SELECT s FROM @extschema@.pay_stats_state AS s
            WHERE @extschema@.pay_stats_counts_usable(s.system_identifier));
END
$$
LANGUAGE plpgsql VOLATILE SET search_path = @extschema@, pg_temp;

COMMENT ON FUNCTION @extschema@.pay_stats_usable_state() IS
'The state of the counts pay_stats may read, folded first when 250 or more journal rows may be waiting; NULL when there are none to read';

-- What the views pay_stats and pay_stats_transitions show: the counts with
-- the rows folded into none yet.  Before the first fold (which a read-only
-- transaction cannot make), and with counts of another server, they count
-- by scanning the ledger and journal.
-- These reads take milliseconds: compiling them with JIT, which their plan's
-- cost before the journal is analyzed can bring on, would take a second.
CREATE FUNCTION @extschema@.pay_stats_read(OUT status @extschema@.pay_status, OUT payments bigint,
    OUT stuck bigint, OUT oldest_processing_since timestamptz, OUT resets bigint,
    OUT duplicate_answers bigint, OUT stats_reset timestamptz, OUT refunds bigint,
    OUT second_charges bigint, OUT unconfirmed_second_charges bigint, OUT authorizations bigint,
    OUT captures bigint, OUT voids bigint, OUT increments bigint)
RETURNS SETOF record
AS $$
DECLARE
    state @extschema@.pay_stats_state;
BEGIN
    state := @extschema@.pay_stats_usable_state();
    IF state IS NULL THEN
        RETURN QUERY
        WITH counters AS (SELECT * FROM @extschema@.pay_stats_counters()),
        second_charges AS (SELECT * FROM @extschema@.pay_second_charges())
        SELECT s.status,
               pg_catalog.count(l.bizno),
               CASE WHEN s.status OPERATOR(pg_catalog.=) 'PROCESSING' THEN
                   pg_catalog.count(l.bizno) FILTER (
                       WHERE l.processing_since OPERATOR(pg_catalog.<)
                             (pg_catalog.now() OPERATOR(pg_catalog.-) (SELECT c.stuck_after FROM counters AS c)))
               END,
               CASE WHEN s.status OPERATOR(pg_catalog.=) 'PROCESSING' THEN pg_catalog.min(l.processing_since) END,
               CASE WHEN s.status OPERATOR(pg_catalog.=) 'INIT' THEN
                   (SELECT pg_catalog.count(*) FROM @extschema@.pay_journal AS j
                    WHERE j.from_status OPERATOR(pg_catalog.=) 'FAILED'
                      AND j.to_status OPERATOR(pg_catalog.=) 'INIT')
                   OPERATOR(pg_catalog.+)
                   (SELECT COALESCE(pg_catalog.sum(a.n), 0) FROM @extschema@.pay_archive_counts AS a
                    WHERE a.from_status OPERATOR(pg_catalog.=) 'FAILED'
                      AND a.to_status OPERATOR(pg_catalog.=) 'INIT')::bigint
               END,
               CASE s.status
                   WHEN 'SUCCESS' THEN (SELECT c.already_succeeded FROM counters AS c)
                   WHEN 'PROCESSING' THEN (SELECT c.in_progress FROM counters AS c)
               END,
               (SELECT c.stats_reset FROM counters AS c),
               pg_catalog.count(l.bizno) FILTER (WHERE l.parent IS NOT NULL),
               CASE WHEN s.status OPERATOR(pg_catalog.=) 'SUCCESS' THEN
                   (SELECT pg_catalog.count(*) FROM second_charges)
                   OPERATOR(pg_catalog.+)
                   (SELECT COALESCE(pg_catalog.sum(a.n), 0) FROM @extschema@.pay_archive_counts AS a
                    WHERE a.second_charge IN ('reported', 'found'))::bigint
               END,
               CASE WHEN s.status OPERATOR(pg_catalog.=) 'SUCCESS' THEN
                   (SELECT pg_catalog.count(*) FROM second_charges AS c WHERE NOT c.confirmed)
               END,
               pg_catalog.count(l.bizno) FILTER (WHERE l.kind OPERATOR(pg_catalog.=) 'AUTHORIZATION'),
               pg_catalog.count(l.bizno) FILTER (WHERE l.kind OPERATOR(pg_catalog.=) ANY ('{CAPTURE,FINAL_CAPTURE}')),
               pg_catalog.count(l.bizno) FILTER (WHERE l.kind OPERATOR(pg_catalog.=) 'VOID'),
               pg_catalog.count(l.bizno) FILTER (WHERE l.kind OPERATOR(pg_catalog.=) 'INCREMENT')
        FROM pg_catalog.unnest(pg_catalog.enum_range(NULL::@extschema@.pay_status)) AS s(status)
        LEFT JOIN @extschema@.pay_ledger AS l ON l.status OPERATOR(pg_catalog.=) s.status
        GROUP BY s.status
        ORDER BY s.status;
        RETURN;
    END IF;

    RETURN QUERY
    WITH unfolded AS MATERIALIZED (
        SELECT * FROM @extschema@.pay_stats_unfolded(state.counted_from, state.counted)),
    counts AS (
        SELECT c.from_status, c.to_status, c.refund, c.second_charge, c.kind, c.n
        FROM @extschema@.pay_stats_counts AS c
        UNION ALL
        SELECT u.from_status, u.to_status, u.refund, u.second_charge, u.kind, pg_catalog.count(*)
        FROM unfolded AS u
        GROUP BY 1, 2, 3, 4, 5),
    -- each count enters its to_status and leaves its from_status
    moves AS (
        SELECT c.to_status AS status, c.refund, c.kind, c.n FROM counts AS c WHERE c.to_status IS NOT NULL
        UNION ALL
        SELECT c.from_status, c.refund, c.kind, OPERATOR(pg_catalog.-) c.n FROM counts AS c
        WHERE c.from_status IS NOT NULL),
    latest AS (
        SELECT DISTINCT ON (u.bizno) u.bizno, u.to_status, u.at
        FROM unfolded AS u
        WHERE u.from_status IS DISTINCT FROM u.to_status AND u.to_status IS NOT NULL
        ORDER BY u.bizno, u.seq DESC),
    counters AS (SELECT * FROM @extschema@.pay_stats_counters()),
    stuck_before AS (
        SELECT pg_catalog.now() OPERATOR(pg_catalog.-) (SELECT c.stuck_after FROM counters AS c) AS at),
    -- The payments PROCESSING now: the fold's set less its rows the unfolded
    -- ones changed, and the unfolded ones entering PROCESSING.  Read by the
    -- set's index, a few rows however large it is: those entered before a
    -- time are the ordinal of its last row before it, and the oldest is
    -- among its first rows, one more than it has changed.
    changed AS (
        SELECT p.since FROM latest AS l
        JOIN @extschema@.pay_stats_processing AS p ON p.bizno OPERATOR(pg_catalog.=) l.bizno),
    entered AS (
        SELECT l.at AS since FROM latest AS l
        WHERE l.to_status OPERATOR(pg_catalog.=) 'PROCESSING'::@extschema@.pay_status),
    processing_summary AS (
        SELECT COALESCE((SELECT p.ordinal FROM @extschema@.pay_stats_processing AS p
                         WHERE p.since OPERATOR(pg_catalog.<) (SELECT t.at FROM stuck_before AS t)
                         ORDER BY p.since DESC, p.bizno DESC LIMIT 1), 0)
               OPERATOR(pg_catalog.-)
               (SELECT pg_catalog.count(*) FROM changed AS c
                WHERE c.since OPERATOR(pg_catalog.<) (SELECT t.at FROM stuck_before AS t))
               OPERATOR(pg_catalog.+)
               (SELECT pg_catalog.count(*) FROM entered AS e
                WHERE e.since OPERATOR(pg_catalog.<) (SELECT t.at FROM stuck_before AS t)) AS stuck,
               LEAST((SELECT pg_catalog.min(f.since)
                      FROM (SELECT p.bizno, p.since FROM @extschema@.pay_stats_processing AS p
                            ORDER BY p.since, p.bizno
                            LIMIT (SELECT pg_catalog.count(*) FROM changed) OPERATOR(pg_catalog.+) 1) AS f
                      WHERE NOT EXISTS (SELECT FROM latest AS l WHERE l.bizno OPERATOR(pg_catalog.=) f.bizno)),
                     (SELECT pg_catalog.min(e.since) FROM entered AS e)) AS oldest)
    SELECT s.status,
           (SELECT COALESCE(pg_catalog.sum(m.n), 0) FROM moves AS m
            WHERE m.status OPERATOR(pg_catalog.=) s.status)::bigint,
           CASE WHEN s.status OPERATOR(pg_catalog.=) 'PROCESSING' THEN
               (SELECT p.stuck FROM processing_summary AS p)
           END,
           CASE WHEN s.status OPERATOR(pg_catalog.=) 'PROCESSING' THEN
               (SELECT p.oldest FROM processing_summary AS p)
           END,
           CASE WHEN s.status OPERATOR(pg_catalog.=) 'INIT' THEN
               (SELECT COALESCE(pg_catalog.sum(c.n), 0) FROM counts AS c
                WHERE c.from_status OPERATOR(pg_catalog.=) 'FAILED'
                  AND c.to_status OPERATOR(pg_catalog.=) 'INIT')::bigint
           END,
           CASE s.status
               WHEN 'SUCCESS' THEN (SELECT c.already_succeeded FROM counters AS c)
               WHEN 'PROCESSING' THEN (SELECT c.in_progress FROM counters AS c)
           END,
           (SELECT c.stats_reset FROM counters AS c),
           (SELECT COALESCE(pg_catalog.sum(m.n), 0) FROM moves AS m
            WHERE m.status OPERATOR(pg_catalog.=) s.status AND m.refund)::bigint,
           CASE WHEN s.status OPERATOR(pg_catalog.=) 'SUCCESS' THEN
               (SELECT COALESCE(pg_catalog.sum(c.n), 0) FROM counts AS c
                WHERE c.second_charge IN ('reported', 'found'))::bigint
           END,
           CASE WHEN s.status OPERATOR(pg_catalog.=) 'SUCCESS' THEN
               (SELECT COALESCE(pg_catalog.sum(c.n) FILTER (WHERE c.second_charge OPERATOR(pg_catalog.=) 'reported'), 0)
                       OPERATOR(pg_catalog.-)
                       COALESCE(pg_catalog.sum(c.n) FILTER (WHERE c.second_charge OPERATOR(pg_catalog.=) 'confirmed'), 0)
                FROM counts AS c)::bigint
           END,
           k.authorizations::bigint, k.captures::bigint, k.voids::bigint, k.increments::bigint
    FROM pg_catalog.unnest(pg_catalog.enum_range(NULL::@extschema@.pay_status)) AS s(status),
         LATERAL (SELECT COALESCE(pg_catalog.sum(m.n) FILTER (WHERE m.kind OPERATOR(pg_catalog.=) 'AUTHORIZATION'), 0)
                             AS authorizations,
                         COALESCE(pg_catalog.sum(m.n) FILTER (WHERE m.kind OPERATOR(pg_catalog.=) ANY ('{CAPTURE,FINAL_CAPTURE}')), 0)
                             AS captures,
                         COALESCE(pg_catalog.sum(m.n) FILTER (WHERE m.kind OPERATOR(pg_catalog.=) 'VOID'), 0) AS voids,
                         COALESCE(pg_catalog.sum(m.n) FILTER (WHERE m.kind OPERATOR(pg_catalog.=) 'INCREMENT'), 0)
                             AS increments
                  FROM moves AS m
                  WHERE m.status OPERATOR(pg_catalog.=) s.status) AS k
    ORDER BY s.status;
END
$$
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = @extschema@, pg_temp SET jit = off;

COMMENT ON FUNCTION @extschema@.pay_stats_read() IS
'What the view pay_stats shows, from the maintained counts';

CREATE FUNCTION @extschema@.pay_stats_transitions_read(OUT from_status @extschema@.pay_status,
    OUT to_status @extschema@.pay_status, OUT transitions bigint)
RETURNS SETOF record
AS $$
DECLARE
    state @extschema@.pay_stats_state;
BEGIN
    state := @extschema@.pay_stats_usable_state();
    IF state IS NULL THEN
        RETURN QUERY
        SELECT c.from_status, c.to_status, pg_catalog.sum(c.n)::bigint
        FROM (SELECT j.from_status, j.to_status, 1 AS n FROM @extschema@.pay_journal AS j
              UNION ALL
              SELECT a.from_status, a.to_status, a.n FROM @extschema@.pay_archive_counts AS a) AS c
        WHERE c.from_status IS DISTINCT FROM c.to_status
        GROUP BY 1, 2
        ORDER BY 1 NULLS FIRST, 2;
        RETURN;
    END IF;

    RETURN QUERY
    SELECT c.from_status, c.to_status, pg_catalog.sum(c.n)::bigint
    FROM (SELECT c.from_status, c.to_status, c.n FROM @extschema@.pay_stats_counts AS c
          UNION ALL
          SELECT u.from_status, u.to_status, 1
          FROM @extschema@.pay_stats_unfolded(state.counted_from, state.counted) AS u) AS c
    WHERE c.from_status IS DISTINCT FROM c.to_status AND c.to_status IS NOT NULL
    GROUP BY 1, 2
    ORDER BY 1 NULLS FIRST, 2;
END
$$
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = @extschema@, pg_temp SET jit = off;

COMMENT ON FUNCTION @extschema@.pay_stats_transitions_read() IS
'What the view pay_stats_transitions shows, from the maintained counts';

-- The card flow's money, per currency, from the same counts: what holds
-- placed (authorizations and increments entering SUCCESS) and what captures
-- took (captures and final captures entering SUCCESS), ever, the archive's
-- rows included.  Each is a sum of the amounts its journal rows carry, so
-- it costs what pay_stats costs, however large the ledger.
CREATE FUNCTION @extschema@.pay_stats_amounts_read(OUT currency text, OUT authorized numeric,
    OUT captured numeric)
RETURNS SETOF record
AS $$
DECLARE
    state @extschema@.pay_stats_state;
BEGIN
    state := @extschema@.pay_stats_usable_state();
    IF state IS NULL THEN
        RETURN QUERY
        SELECT c.currency,
               COALESCE(pg_catalog.sum(c.amount) FILTER (WHERE c.kind OPERATOR(pg_catalog.=) ANY ('{AUTHORIZATION,INCREMENT}')), 0),
               COALESCE(pg_catalog.sum(c.amount) FILTER (WHERE c.kind OPERATOR(pg_catalog.=) ANY ('{CAPTURE,FINAL_CAPTURE}')), 0)
        FROM (SELECT j.from_status, j.to_status, l.kind, j.currency, j.amount
              FROM @extschema@.pay_journal AS j
              JOIN @extschema@.pay_ledger AS l ON l.bizno OPERATOR(pg_catalog.=) j.bizno
              WHERE l.kind IS NOT NULL
              UNION ALL
              SELECT a.from_status, a.to_status, a.kind, a.currency, a.amount
              FROM @extschema@.pay_archive_counts AS a
              WHERE a.kind IS NOT NULL) AS c
        WHERE c.to_status OPERATOR(pg_catalog.=) 'SUCCESS'::@extschema@.pay_status
          AND c.from_status IS DISTINCT FROM 'SUCCESS'::@extschema@.pay_status
        GROUP BY 1
        ORDER BY 1;
        RETURN;
    END IF;

    RETURN QUERY
    SELECT c.currency,
           COALESCE(pg_catalog.sum(c.amount) FILTER (WHERE c.kind OPERATOR(pg_catalog.=) ANY ('{AUTHORIZATION,INCREMENT}')), 0),
           COALESCE(pg_catalog.sum(c.amount) FILTER (WHERE c.kind OPERATOR(pg_catalog.=) ANY ('{CAPTURE,FINAL_CAPTURE}')), 0)
    FROM (SELECT c.from_status, c.to_status, c.kind, c.currency, c.amount
          FROM @extschema@.pay_stats_counts AS c
          WHERE c.kind IS NOT NULL
          UNION ALL
          SELECT u.from_status, u.to_status, u.kind, u.currency, u.amount
          FROM @extschema@.pay_stats_unfolded(state.counted_from, state.counted) AS u
          WHERE u.kind IS NOT NULL) AS c
    WHERE c.to_status OPERATOR(pg_catalog.=) 'SUCCESS'::@extschema@.pay_status
      AND c.from_status IS DISTINCT FROM 'SUCCESS'::@extschema@.pay_status
    GROUP BY 1
    ORDER BY 1;
END
$$
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = @extschema@, pg_temp SET jit = off;

COMMENT ON FUNCTION @extschema@.pay_stats_amounts_read() IS
'What the view pay_stats_amounts shows, from the maintained counts';

-- The holds the ledger keeps now, by why each is closed (NULL: open), per
-- currency: how many and what of them is neither captured nor in flight --
-- what an open hold may still capture, what a void or a final capture
-- released, what an expired hold no void released.  Expiry changes no row
-- (it is checked when a step is claimed), so this is a query, not a count:
-- it reads every authorization the ledger holds (through
-- pay_ledger_authorization_expires_at, payments left out) and each one's
-- steps, and the archive's are gone from it.
CREATE FUNCTION @extschema@.pay_stats_holds(OUT currency text, OUT closed_reason text, OUT holds bigint,
    OUT uncaptured numeric)
RETURNS SETOF record
AS $$
    SELECT a.currency, b.closed_reason, pg_catalog.count(*),
           pg_catalog.sum(b.authorized OPERATOR(pg_catalog.-) b.captured OPERATOR(pg_catalog.-) b.capture_in_flight)
    FROM @extschema@.pay_ledger AS a
    CROSS JOIN LATERAL @extschema@.pay_authorization_balance(a.bizno) AS b
    WHERE a.expires_at IS NOT NULL
      AND a.kind OPERATOR(pg_catalog.=) 'AUTHORIZATION'
      AND a.status OPERATOR(pg_catalog.=) 'SUCCESS'::@extschema@.pay_status
    GROUP BY 1, 2
    ORDER BY 1, 2 NULLS FIRST
$$
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = @extschema@, pg_temp;

COMMENT ON FUNCTION @extschema@.pay_stats_holds() IS
'The holds of the authorizations in the ledger, per currency and closed_reason (NULL: open): how many, and what is neither captured nor in flight; a query over every authorization, not a count';

-- Guarding a user's table that already exists with the payment state
-- machine: pay_protect checks the status column's type and every row's
-- label under a lock that keeps rows from changing meanwhile, then installs
-- the guard's two triggers, firing ALWAYS; it warns when the table's owner,
-- who can disable them, is not a superuser.  pay_unprotect removes them,
-- never the ledger's or the journal's.
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
        -- quoted as the C code quotes input: at most 128 characters
        RAISE EXCEPTION 'invalid payment status % in column "%" of relation %',
            coalesce(pg_catalog.quote_literal(pg_catalog.left(offending, 128))
                     OPERATOR(pg_catalog.||) CASE WHEN pg_catalog.length(offending) OPERATOR(pg_catalog.>) 128
                                                  THEN pg_catalog.format('... (%s bytes)', pg_catalog.octet_length(offending))
                                                  ELSE '' END,
                     'NULL'), status_column, tbl
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


/* 7. The views ------------------------------------------------------------ */

-- The state machine as a table of edges.
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

-- Every guard in the database and how it fires: anything but "always"
-- means someone weakened a guard.
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

-- One row per status: the ledger's payments (refunds counted also apart),
-- the stuck ones, resets, second charges, and the duplicate answers
-- pay_begin gave since the counters were reset -- read from counts the
-- journal keeps (pay_stats_read), not by scanning the ledger.
CREATE VIEW @extschema@.pay_stats AS
    SELECT * FROM @extschema@.pay_stats_read();

COMMENT ON VIEW @extschema@.pay_stats IS
'Per status: payments (refunds included); PROCESSING: stuck ones and the oldest one''s start; INIT: resets ever; SUCCESS and PROCESSING: the duplicate answers pay_begin gave since stats_reset; refunds: how many of the payments are refunds; SUCCESS: second charges ever and those no statement confirmed; authorizations, captures (final ones included), voids, increments: how many of the payments are rows of the card flow of each kind';

-- Every transition ever journaled, by pair; from_status NULL: created.
CREATE VIEW @extschema@.pay_stats_transitions AS
    SELECT * FROM @extschema@.pay_stats_transitions_read();

COMMENT ON VIEW @extschema@.pay_stats_transitions IS
'How many times the ledger''s rows went from_status -> to_status (from_status NULL: created in to_status), from the maintained counts';

-- What the card flow's holds placed and its captures took, per currency.
CREATE VIEW @extschema@.pay_stats_amounts AS
    SELECT * FROM @extschema@.pay_stats_amounts_read();

COMMENT ON VIEW @extschema@.pay_stats_amounts IS
'Per currency, ever (the archive''s included): authorized, the amounts of the authorizations and increments that succeeded; captured, of the captures that succeeded; from the maintained counts';

-- The currencies, readable by everyone (see the privileges below).
CREATE VIEW @extschema@.pay_currencies AS
    SELECT c.code, c.minor_units, c.name FROM @extschema@.pay_currency_list() AS c;

COMMENT ON VIEW @extschema@.pay_currencies IS
'The currencies a payment may be in: ISO 4217''s active codes, with the decimals an amount in each may have';


/* 8. Privileges ----------------------------------------------------------- */

-- Nobody but the owner reads or writes the ledger and the journal until
-- pay_grant or pay_grant_operator says so.
REVOKE ALL ON @extschema@.pay_ledger, @extschema@.pay_journal FROM PUBLIC;

-- The trigger functions are called by their triggers, never directly.
REVOKE ALL ON FUNCTION @extschema@.pay_guard(), @extschema@.pay_ledger_bookkeeping(),
    @extschema@.pay_ledger_journal(), @extschema@.pay_refuse_drop(),
    @extschema@.pay_keep_guards_always() FROM PUBLIC;

-- Paying, repairing, reconciling and granting are for the roles granted
-- them.  What anyone may still call is harmless: the bizNo functions,
-- pay_allowed, the value rules, pay_currency_list, pay_stats_counters and
-- pay_stats_subscribed.
-- The views pay_transitions, pay_guards, pay_stats and pay_stats_transitions
-- keep the default privileges, their owner's alone (pay_grant_operator grants
-- the last three, and the functions the last two read through); pay_currencies
-- is everyone's.
REVOKE ALL ON FUNCTION
    @extschema@.pay_open(text, text, numeric, text),
    @extschema@.pay_claim(text, numeric, text),
    @extschema@.pay_open_claim(text, text, numeric, text),
    @extschema@.pay_begin(text, numeric, text),
    @extschema@.pay_succeed(text, text, bigint, jsonb),
    @extschema@.pay_fail(text, text, bigint),
    @extschema@.pay_open_claim_many(text, text[], numeric[], text),
    @extschema@.pay_settle_many(text[], bigint[], @extschema@.pay_status[], text[], text[]),
    @extschema@.pay_get(text),
    @extschema@.pay_find(text, text),
    @extschema@.pay_stuck(interval, integer),
    @extschema@.pay_refund_open(text, text, numeric, text),
    @extschema@.pay_open_authorization(text, text, numeric, text, interval),
    @extschema@.pay_capture_open(text, text, numeric, boolean),
    @extschema@.pay_void_open(text, text),
    @extschema@.pay_increment_open(text, text, numeric),
    @extschema@.pay_authorization_balance(text),
    @extschema@.pay_reset(text, text),
    @extschema@.pay_transition(text, @extschema@.pay_status, text),
    @extschema@.pay_confirm_second_charge(text, text),
    @extschema@.pay_second_charges(),
    @extschema@.pay_refund_balance(text),
    @extschema@.pay_verify(),
    @extschema@.pay_reconcile(regclass, boolean, timestamptz),
    @extschema@.pay_reconcile_rows(jsonb, boolean, timestamptz),
    @extschema@.pay_stats_reset(),
    @extschema@.pay_stats_refresh(bigint),
    @extschema@.pay_stats_read(),
    @extschema@.pay_stats_transitions_read(),
    @extschema@.pay_stats_amounts_read(),
    @extschema@.pay_stats_holds(),
    @extschema@.pay_stats_unfolded(bigint, pg_snapshot),
    @extschema@.pay_stats_second_charge(text, text, text, bigint, bigint, pg_snapshot),
    @extschema@.pay_stats_running_transactions(),
    @extschema@.pay_stats_transactions_ended(text[]),
    @extschema@.pay_stats_counts_usable(bigint),
    @extschema@.pay_stats_usable_state(),
    @extschema@.pay_stats_counted_snapshot(),
    @extschema@.pay_archive(timestamptz, integer),
    @extschema@.pay_archive_verify(),
    @extschema@.pay_archive_add_keys(bigint[]),
    @extschema@.pay_archive_partitions(date),
    @extschema@.pay_archive_unready(timestamptz, bigint, text[]),
    @extschema@.pay_archive_key_hash(text),
    @extschema@.pay_archive_key_pack(bigint[]),
    @extschema@.pay_archive_key_unpack(bigint, bytea),
    @extschema@.pay_protect(regclass, name, name[]),
    @extschema@.pay_unprotect(regclass)
FROM PUBLIC;

GRANT SELECT ON @extschema@.pay_currencies TO PUBLIC;

-- What a role may call, in one place per kind of role.  An application pays
-- (pay_grant); finance and operations repair, reconcile and watch
-- (pay_grant_operator).  Neither needs more than these.
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
        '@extschema@.pay_claim(text, numeric, text), '
        '@extschema@.pay_open_claim(text, text, numeric, text), '
        '@extschema@.pay_begin(text, numeric, text), '
        '@extschema@.pay_succeed(text, text, bigint, jsonb), '
        '@extschema@.pay_fail(text, text, bigint), '
        '@extschema@.pay_get(text), '
        '@extschema@.pay_find(text, text), '
        '@extschema@.pay_stuck(interval, integer), '
        '@extschema@.pay_refund_open(text, text, numeric, text), '
        '@extschema@.pay_refund_balance(text) '
        'TO %s', role);
    -- the batches
    EXECUTE pg_catalog.format(
        'GRANT EXECUTE ON FUNCTION '
        '@extschema@.pay_open_claim_many(text, text[], numeric[], text), '
        '@extschema@.pay_settle_many(text[], bigint[], @extschema@.pay_status[], text[], text[]) '
        'TO %s', role);
    -- the card flow
    EXECUTE pg_catalog.format(
        'GRANT EXECUTE ON FUNCTION '
        '@extschema@.pay_open_authorization(text, text, numeric, text, interval), '
        '@extschema@.pay_capture_open(text, text, numeric, boolean), '
        '@extschema@.pay_void_open(text, text), '
        '@extschema@.pay_increment_open(text, text, numeric), '
        '@extschema@.pay_authorization_balance(text) '
        'TO %s', role);
END
$$
LANGUAGE plpgsql VOLATILE SET search_path = @extschema@, pg_temp;

COMMENT ON FUNCTION @extschema@.pay_grant(regrole) IS
'Give an application role what paying needs and no more: open, claim, begin, succeed, fail, get, find, stuck, refund_open, refund_balance, open_authorization, capture_open, void_open, increment_open, authorization_balance, open_claim_many, settle_many; SELECT on ledger and journal (the bizNo functions are everyone''s)';

CREATE FUNCTION @extschema@.pay_grant_operator(role regrole)
RETURNS void
AS $$
BEGIN
    IF role IS NULL THEN
        RAISE EXCEPTION 'role must not be null' USING ERRCODE = '22004';
    END IF;
    EXECUTE pg_catalog.format('GRANT USAGE ON SCHEMA @extschema@ TO %s', role);
    EXECUTE pg_catalog.format(
        'GRANT SELECT ON @extschema@.pay_ledger, @extschema@.pay_journal, @extschema@.pay_stats, '
        '@extschema@.pay_stats_transitions, @extschema@.pay_guards TO %s', role);
    EXECUTE pg_catalog.format(
        'GRANT EXECUTE ON FUNCTION '
        '@extschema@.pay_reset(text, text), '
        '@extschema@.pay_transition(text, @extschema@.pay_status, text), '
        '@extschema@.pay_reconcile(regclass, boolean, timestamptz), '
        '@extschema@.pay_reconcile_rows(jsonb, boolean, timestamptz), '
        '@extschema@.pay_confirm_second_charge(text, text), '
        '@extschema@.pay_second_charges(), '
        '@extschema@.pay_succeed(text, text, bigint, jsonb), '
        '@extschema@.pay_fail(text, text, bigint), '
        '@extschema@.pay_stats_reset(), '
        '@extschema@.pay_stats_refresh(bigint), '
        '@extschema@.pay_stats_read(), '
        '@extschema@.pay_stats_transitions_read(), '
        '@extschema@.pay_verify(), '
        '@extschema@.pay_archive(timestamptz, integer), '
        '@extschema@.pay_archive_verify(), '
        '@extschema@.pay_get(text), '
        '@extschema@.pay_find(text, text), '
        '@extschema@.pay_stuck(interval, integer), '
        '@extschema@.pay_refund_open(text, text, numeric, text), '
        '@extschema@.pay_refund_balance(text) '
        'TO %s', role);
    -- the card flow: what an authorization holds, and the figures of them all
    EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION @extschema@.pay_authorization_balance(text) TO %s', role);
    EXECUTE pg_catalog.format('GRANT SELECT ON @extschema@.pay_stats_amounts TO %s', role);
    EXECUTE pg_catalog.format(
        'GRANT EXECUTE ON FUNCTION @extschema@.pay_stats_amounts_read(), @extschema@.pay_stats_holds() TO %s', role);
END
$$
LANGUAGE plpgsql VOLATILE SET search_path = @extschema@, pg_temp;

COMMENT ON FUNCTION @extschema@.pay_grant_operator(regrole) IS
'Give a finance or operations role what repairing, reconciling, archiving and watching need: pay_reset, pay_transition, pay_reconcile, pay_confirm_second_charge, pay_second_charges, pay_archive, pay_archive_verify, pay_stats, pay_stats_transitions, pay_stats_amounts, pay_stats_holds, pay_stats_refresh, pay_verify, pay_guards, and what reconciling settles and refunds with';

REVOKE ALL ON FUNCTION @extschema@.pay_grant(regrole), @extschema@.pay_grant_operator(regrole) FROM PUBLIC;


/* 9. What pg_dump dumps --------------------------------------------------- */

-- The extension's objects come from this script, but the ledger's and the
-- journal's rows are data: pg_dump dumps them, and the journal's sequence
-- with them, so that a restored journal goes on numbering where it was.
SELECT pg_catalog.pg_extension_config_dump('@extschema@.pay_ledger', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.pay_journal', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.pay_journal_seq_seq', '');

-- What outlives the archive's partitions, and the record of archiving:
-- data too.  The partitions themselves are tables of their own, dumped with
-- their rows.
SELECT pg_catalog.pg_extension_config_dump('@extschema@.pay_archive_keys', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.pay_archive_months', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.pay_archive_runs', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.pay_archive_runs_run_seq', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.pay_archive_counts', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.pay_ledger_archive_default', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.pay_journal_archive_default', '');

-- The record of maintenance DDL, kept across a dump and restore.
SELECT pg_catalog.pg_extension_config_dump('@extschema@.pay_maintenance_log', '');
