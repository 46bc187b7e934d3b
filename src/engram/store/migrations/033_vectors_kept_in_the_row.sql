-- A fact's vector and its text stay in its row (STORAGE MAIN; the vector was pgvector's EXTERNAL).
--
-- A row over ~2 kB is toasted: PostgreSQL moves its largest values that may leave the row to the
-- TOAST table until the row fits, and a fact's 1.5 kB vector is its largest. A conversation turn's
-- fact (text, lead-in, search vector, metadata beside the vector) is ~2.5 kB, so 4,071 of the 4,124
-- facts of the LoCoMo conversations had their vector outside the row: the semantic arm's exact scan
-- read 12,733 pages for them instead of ~1,000 (10 of its 28 ms a recall), and every similarity a
-- recall computes (the index's hits, the candidates) fetched the vector from the TOAST table first.
-- MAIN keeps a value in the row unless the row would not fit in a page; the other values leave first.
--
-- SET STORAGE rewrites no row: rows written before keep their values where they are until they are
-- written again; `VACUUM FULL memory_units` rewrites them all (README, "Performance").
ALTER TABLE memory_units
    ALTER COLUMN embedding SET STORAGE MAIN,
    ALTER COLUMN text SET STORAGE MAIN;
