-- How many valid facts of a bank and fact type hold each keyword lexeme, kept as the facts change, so
-- that recall's BM25 knows a word's document frequency without counting its matches. At 100,000 facts
-- the keyword arm spent ~90 ms scoring every fact holding any query word ("work" is in one fact of
-- eight); knowing the frequencies up front, it reads only the facts of the rarer words when the
-- common ones cannot change its list (engram.recall.keyword_plan).
--
-- Rows are deltas: a statement that adds facts inserts one row per (bank, fact type, lexeme) it
-- touched, one that removes them inserts negative counts. Nothing is updated in place, so concurrent
-- retains of one bank never wait on each other's rows (a shared counter per word would serialise
-- them and could deadlock two of them). A word's count is the sum of its rows; recall compacts a
-- bank's rows when they pile up (engram.store.keyword_frequencies).
--
-- lexeme '' is the fact type's totals: `facts` valid facts, `length` their summed lexeme counts.
-- `max_occurrences` (most positions of the lexeme in one fact) and `min_length` (fewest lexemes of a
-- fact holding it) bound what the word can add to a fact's score; removals leave them as they were,
-- which keeps them bounds.
CREATE TABLE keyword_frequencies (
    bank_id          text NOT NULL,
    fact_type        text NOT NULL,
    lexeme           text NOT NULL,
    facts            bigint NOT NULL,
    length           bigint NOT NULL DEFAULT 0,
    max_occurrences  integer,
    min_length       integer
);
CREATE INDEX keyword_frequencies_lookup ON keyword_frequencies (bank_id, lexeme);

-- The deltas of a set of valid facts, given as parallel arrays: `sign` 1 when they arrive, -1 when
-- they leave. Facts of a bank that is gone (deleted with it by cascade) count nothing: the bank's rows
-- are deleted with the bank.
CREATE FUNCTION keyword_frequency_deltas(bank_ids text[], fact_types text[], searches tsvector[], sign integer)
RETURNS TABLE (bank_id text, fact_type text, lexeme text, facts bigint, length bigint,
               max_occurrences integer, min_length integer)
LANGUAGE sql STABLE AS $$
    WITH valid AS (
        SELECT u.bank_id, u.fact_type, u.search FROM unnest(bank_ids, fact_types, searches) u(bank_id, fact_type, search)
        WHERE EXISTS (SELECT 1 FROM banks b WHERE b.bank_id = u.bank_id)
    )
    SELECT v.bank_id, v.fact_type, w.lexeme, sign * count(*), 0::bigint,
           CASE WHEN sign > 0 THEN max(coalesce(cardinality(w.positions), 1)) END,
           CASE WHEN sign > 0 THEN min(length(v.search)) END
    FROM valid v CROSS JOIN LATERAL unnest(v.search) w
    GROUP BY 1, 2, 3
    UNION ALL
    SELECT v.bank_id, v.fact_type, '', sign * count(*), sign * sum(length(v.search)), NULL, NULL
    FROM valid v GROUP BY 1, 2
$$;

-- One function for both statement triggers: each names its transition table `changed_units` and
-- passes the sign (1: the rows were inserted, -1: deleted).
CREATE FUNCTION keyword_frequencies_counted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO keyword_frequencies
    SELECT d.* FROM (SELECT array_agg(bank_id) b, array_agg(fact_type) t, array_agg(search) s
                     FROM changed_units WHERE state = 'valid') c
    CROSS JOIN LATERAL keyword_frequency_deltas(c.b, c.t, c.s, TG_ARGV[0]::integer) d;
    RETURN NULL;
END $$;

-- One row at a time: an update changes these columns rarely (an observation's text, a fact
-- invalidated), and the WHEN below keeps every other update (consolidation marks) free of it.
CREATE FUNCTION keyword_frequencies_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.state = 'valid' THEN
        INSERT INTO keyword_frequencies
        SELECT * FROM keyword_frequency_deltas(ARRAY[OLD.bank_id], ARRAY[OLD.fact_type], ARRAY[OLD.search], -1);
    END IF;
    IF NEW.state = 'valid' THEN
        INSERT INTO keyword_frequencies
        SELECT * FROM keyword_frequency_deltas(ARRAY[NEW.bank_id], ARRAY[NEW.fact_type], ARRAY[NEW.search], 1);
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER keyword_frequencies_added AFTER INSERT ON memory_units
    REFERENCING NEW TABLE AS changed_units FOR EACH STATEMENT EXECUTE FUNCTION keyword_frequencies_counted('1');
CREATE TRIGGER keyword_frequencies_removed AFTER DELETE ON memory_units
    REFERENCING OLD TABLE AS changed_units FOR EACH STATEMENT EXECUTE FUNCTION keyword_frequencies_counted('-1');
-- The WHEN names the columns `search` is generated from (migration 015), not `search` itself: a
-- condition on it would forbid a later migration to drop and redefine the column. Such a migration
-- must also call rebuild_keyword_frequencies(), as must one that changes these columns in bulk.
CREATE TRIGGER keyword_frequencies_changed AFTER UPDATE ON memory_units FOR EACH ROW
    WHEN (OLD.text IS DISTINCT FROM NEW.text OR OLD.lead_in IS DISTINCT FROM NEW.lead_in
          OR OLD.occurred_start IS DISTINCT FROM NEW.occurred_start OR OLD.mentioned_at IS DISTINCT FROM NEW.mentioned_at
          OR OLD.state IS DISTINCT FROM NEW.state OR OLD.fact_type IS DISTINCT FROM NEW.fact_type
          OR OLD.bank_id IS DISTINCT FROM NEW.bank_id)
    EXECUTE FUNCTION keyword_frequencies_changed();

-- Counts every valid fact again (for facts written before this migration, or whose `search` a later
-- migration recomputed without updating them row by row). Writers wait meanwhile: a fact committed
-- between the two statements would otherwise count twice.
CREATE FUNCTION rebuild_keyword_frequencies() RETURNS void LANGUAGE sql AS $$
    LOCK TABLE memory_units IN SHARE MODE;
    DELETE FROM keyword_frequencies;
    INSERT INTO keyword_frequencies
    SELECT d.* FROM (SELECT array_agg(bank_id) b, array_agg(fact_type) t, array_agg(search) s
                     FROM memory_units WHERE state = 'valid') m
    CROSS JOIN LATERAL keyword_frequency_deltas(m.b, m.t, m.s, 1) d;
$$;

SELECT rebuild_keyword_frequencies();
