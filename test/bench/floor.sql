-- The bare SQL floor: the same ledger and journal tables and rows, written
-- by plain statements with no checks and no triggers.

CREATE SCHEMA floor_pay;

-- The same columns, defaults, indexes and fillfactor as the real tables; no CHECK, no
-- trigger.  Each journal numbers its own rows.
CREATE TABLE floor_pay.ledger (LIKE pay_ledger INCLUDING DEFAULTS INCLUDING INDEXES) WITH (fillfactor = 90);
CREATE SEQUENCE floor_pay.journal_seq;
CREATE TABLE floor_pay.journal (LIKE pay_journal INCLUDING INDEXES);
ALTER TABLE floor_pay.journal ALTER seq SET DEFAULT nextval('floor_pay.journal_seq'),
    ALTER at SET DEFAULT now(), ALTER txid SET DEFAULT pg_current_xact_id(),
    ALTER actor SET DEFAULT CURRENT_USER;
