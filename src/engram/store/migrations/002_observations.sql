-- Observations: consolidated beliefs are memory units of type 'observation' whose tags are their
-- scope. Each keeps the quotes that support it (evidence) and the history of its earlier wordings.

ALTER TABLE memory_units ADD COLUMN evidence jsonb NOT NULL DEFAULT '[]';
ALTER TABLE memory_units ADD COLUMN consolidation_error text;

CREATE INDEX memory_units_observation_sources ON memory_units USING gin (source_memory_ids)
    WHERE fact_type = 'observation';

CREATE TABLE observation_history (
    id                bigserial PRIMARY KEY,
    observation_id    uuid NOT NULL REFERENCES memory_units ON DELETE CASCADE,
    bank_id           text NOT NULL,
    text              text NOT NULL,
    source_memory_ids uuid[] NOT NULL DEFAULT '{}',
    evidence          jsonb NOT NULL DEFAULT '[]',
    reason            text,
    changed_at        timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX observation_history_observation ON observation_history (observation_id, changed_at DESC);
