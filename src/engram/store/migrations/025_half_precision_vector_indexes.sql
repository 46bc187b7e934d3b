-- The HNSW indexes hold the vectors in half precision (halfvec), the tables keep them in full.
--
-- Inserting a fact into the full-precision index took ~2.2 ms of PostgreSQL's time at 100,000 facts
-- (100 rows inserted in 217 ms), the largest part of a bulk item's cost there; into this one 1.6 ms
-- (156 ms), with the index 42 % smaller (196 → 114 MB at 100,000 facts). Searches find the same
-- neighbours: 50 nearest of 200 queries, 98.91 % against 98.97 % of the exact ones. Statements that
-- want an index order by `engram.store.vector_index.indexed_distance`, which spells this expression.
--
-- Rebuilding an index takes ~20 s a 100,000 facts on two cores (with maintenance_work_mem 512MB, the
-- embedded PostgreSQL's setting).
DROP INDEX memory_units_embedding;
CREATE INDEX memory_units_embedding ON memory_units
    USING hnsw ((embedding::halfvec(384)) halfvec_cosine_ops);
DROP INDEX memory_unit_sentences_embedding;
CREATE INDEX memory_unit_sentences_embedding ON memory_unit_sentences
    USING hnsw ((embedding::halfvec(384)) halfvec_cosine_ops);
