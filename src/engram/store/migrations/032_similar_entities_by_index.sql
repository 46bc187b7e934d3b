-- A bank's free-form entities nearest to each name, by trigram distance through the GiST index
-- (migration 005), with sorting switched off while the function plans: the other plan reads every
-- entity of the bank by its name index and sorts them all by distance. The planner takes that one
-- when its statistics hold no count for the bank, which is how a bank that grows by small retains
-- stays (only a bulk retain analyses the tables, and autovacuum waits for a tenth of the whole table
-- to change): a new name then cost ~1.8 ms at 400 entities in the bank instead of ~0.3 through the
-- index, and the cost grows with the bank (it computes every name's trigrams).
CREATE FUNCTION similar_free_entities(bank text, names text[], min_similarity real, per_name integer)
RETURNS TABLE (key text, id uuid, canonical_name text, similarity real, last_seen timestamptz, mention_count integer)
LANGUAGE sql STABLE
SET enable_sort = off
AS $$
    SELECT n.key, c.id, c.canonical_name, c.similarity, c.last_seen, c.mention_count
    FROM unnest(names) AS n(key)
    CROSS JOIN LATERAL (
        SELECT e.id, e.canonical_name, e.last_seen, e.mention_count,
               similarity(lower(e.canonical_name), n.key) AS similarity
        FROM entities e
        WHERE e.bank_id = bank AND e.entity_kind = 'free'
        ORDER BY lower(e.canonical_name) <-> n.key  -- KNN on the GiST index: nearest names first
        LIMIT per_name
    ) c
    WHERE c.similarity >= min_similarity
$$;
