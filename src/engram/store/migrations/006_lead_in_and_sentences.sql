-- Two more ways to find a fact, both filled by the offline extractor (LLM-extracted facts stand alone):
--   lead_in                what was said just before the fact (the previous conversation turn or
--                          sentence): the keyword index covers it at a lower weight (B; the fact's own
--                          words are A), so a reply is found by the words of the question it answers;
--   memory_unit_sentences  one vector per sentence of a fact that has several: the best sentence
--                          scores the fact, so a long turn is not diluted by the rest of it.
ALTER TABLE memory_units ADD COLUMN lead_in text;

DROP INDEX IF EXISTS memory_units_search;
ALTER TABLE memory_units DROP COLUMN search;
ALTER TABLE memory_units ADD COLUMN search tsvector GENERATED ALWAYS AS (
    setweight(to_tsvector('english', coalesce(lead_in, '')), 'B') || setweight(to_tsvector('english', text), 'A')
) STORED;
CREATE INDEX memory_units_search ON memory_units USING gin (search);

CREATE TABLE memory_unit_sentences (
    unit_id   uuid NOT NULL REFERENCES memory_units ON DELETE CASCADE,
    bank_id   text NOT NULL,
    embedding vector(384) NOT NULL
);
CREATE INDEX memory_unit_sentences_unit ON memory_unit_sentences (unit_id);
CREATE INDEX memory_unit_sentences_embedding ON memory_unit_sentences USING hnsw (embedding vector_cosine_ops);
