-- Bank aliases: extra ids that reach a bank. An alias is resolved to its bank before a request is
-- authorised or routed, so it is globally unique and never the id of a bank. At most one alias per
-- bank is its primary (the name the bank is shown under).
CREATE TABLE bank_aliases (
    alias       text PRIMARY KEY,
    bank_id     text NOT NULL REFERENCES banks ON DELETE CASCADE,
    is_primary  boolean NOT NULL DEFAULT false,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX bank_aliases_bank ON bank_aliases (bank_id);
CREATE UNIQUE INDEX bank_aliases_one_primary ON bank_aliases (bank_id) WHERE is_primary;
