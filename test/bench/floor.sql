-- The bare SQL floor: the same ledger and journal rows,
-- written by plain statements with no checks and no triggers, on tables
-- with the same columns and only the indexes the semantics need: the
-- ledger's primary key; the journal's primary key and an index on bizno.

CREATE SCHEMA floor_pay;

CREATE TABLE floor_pay.ledger (
    bizno               text PRIMARY KEY,
    prefix              text,
    biz_id              text,
    status              pay_status NOT NULL DEFAULT 'INIT',
    amount              numeric,
    currency            text,
    attempt             integer NOT NULL DEFAULT 0,
    channel_ref         text,
    last_error          text,
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now(),
    processing_since    timestamptz,
    note                text,
    parent              text,
    refund_key          text,
    response            jsonb,
    kind                text,
    expires_in          interval,
    expires_at          timestamptz
) WITH (fillfactor = 90);

CREATE TABLE floor_pay.journal (
    seq                 bigserial PRIMARY KEY,
    bizno               text NOT NULL,
    attempt             integer NOT NULL,
    from_status         pay_status,
    to_status           pay_status NOT NULL,
    amount              numeric,
    currency            text,
    at                  timestamptz NOT NULL DEFAULT now(),
    txid                xid8 NOT NULL DEFAULT pg_current_xact_id(),
    actor               text NOT NULL DEFAULT CURRENT_USER,
    note                text
);
CREATE INDEX ON floor_pay.journal (bizno, seq);
