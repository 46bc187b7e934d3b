-- Editing documents and memories: what happened to each document (its history, as Hindsight's
-- DocumentEvent), and when a memory was edited or invalidated and why.
ALTER TABLE memory_units ADD COLUMN edited_at timestamptz;
ALTER TABLE memory_units ADD COLUMN invalidated_at timestamptz;
ALTER TABLE memory_units ADD COLUMN invalidation_reason text;

CREATE TABLE document_events (
    id                   bigserial PRIMARY KEY,
    bank_id              text NOT NULL REFERENCES banks ON DELETE CASCADE,
    document_id          text NOT NULL,
    kind                 text NOT NULL,
    operation_id         uuid,
    fact_id              uuid,
    facts_added          integer NOT NULL DEFAULT 0,
    facts_removed        integer NOT NULL DEFAULT 0,
    observations_removed uuid[] NOT NULL DEFAULT '{}',
    created_at           timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX document_events_document ON document_events (bank_id, document_id, created_at DESC, id DESC);
