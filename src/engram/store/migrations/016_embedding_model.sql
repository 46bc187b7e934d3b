-- Which embedding model made the stored vectors (memory_units, memory_unit_sentences, mental_models):
-- vectors of two models cannot be compared, so a server configured with another model
-- (ENGRAM_EMBEDDING_MODEL) refuses to start on a database that already holds vectors
-- (engram.store.embedding_model). One row; a database with no vectors takes whichever model starts it.
CREATE TABLE embedding_model (
    only_row    boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    name        text NOT NULL,
    dimensions  integer NOT NULL,
    recorded_at timestamptz NOT NULL DEFAULT now()
);

-- Before this migration every Engram embedded with all-MiniLM-L6-v2.
INSERT INTO embedding_model (name, dimensions)
SELECT 'minilm', 384
WHERE EXISTS (SELECT 1 FROM memory_units) OR EXISTS (SELECT 1 FROM mental_models WHERE embedding IS NOT NULL);
