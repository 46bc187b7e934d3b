-- Entity candidates by trigram distance: a GiST index answers "the k closest names in this bank"
-- directly (KNN order), where the GIN index left the planner scanning and scoring every name.
CREATE EXTENSION IF NOT EXISTS btree_gist;
DROP INDEX IF EXISTS entities_name_trgm;
CREATE INDEX entities_name_knn ON entities USING gist (bank_id, lower(canonical_name) gist_trgm_ops);
