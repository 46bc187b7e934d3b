-- Entity observations (entities.md): one summary per entity, regenerated from its 50 most recent
-- facts and replacing the previous one. source_fact_ids are those facts: when the entity's most
-- recent facts are no longer exactly these, the summary is stale.
CREATE TABLE entity_summaries (
    entity_id       uuid PRIMARY KEY REFERENCES entities ON DELETE CASCADE,
    bank_id         text NOT NULL REFERENCES banks ON DELETE CASCADE,
    text            text NOT NULL,
    source_fact_ids uuid[] NOT NULL,
    generated_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX entity_summaries_bank ON entity_summaries (bank_id);
