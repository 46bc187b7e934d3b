-- Each valid fact's keyword lexemes, one row a (fact, lexeme), holding what BM25 needs of the pair:
-- the lexeme's occurrences in the fact itself, its lead-in and its date (weights A, B and C of
-- `search`, migration 015) and the fact's length in lexemes. Recall's keyword arm reads them from the
-- primary key alone (an index-only scan), where it read and unnested each matching fact's `search`
-- from the table: at 100,000 facts ~7 µs a matching fact, and a query naming a common first name
-- matches thousands.
--
-- Kept by the triggers below as the facts change, like migration 022's counts. A migration that
-- recomputes `search`, or changes the columns it is made of in bulk without firing the triggers,
-- must call rebuild_keyword_postings() as well as rebuild_keyword_frequencies().
CREATE TABLE keyword_postings (
    bank_id     text NOT NULL,
    lexeme      text NOT NULL,
    fact_type   text NOT NULL,
    unit_id     uuid NOT NULL,
    in_fact     smallint NOT NULL,
    in_lead_in  smallint NOT NULL,
    in_date     smallint NOT NULL,
    fact_length integer NOT NULL,
    PRIMARY KEY (bank_id, lexeme, fact_type, unit_id) INCLUDE (in_fact, in_lead_in, in_date, fact_length)
);

-- The postings of a set of facts given as parallel arrays (only the valid ones have postings).
CREATE FUNCTION keyword_postings_of(bank_ids text[], fact_types text[], unit_ids uuid[], states text[], searches tsvector[])
RETURNS SETOF keyword_postings
LANGUAGE sql IMMUTABLE AS $$
    SELECT f.bank_id, w.lexeme, f.fact_type, f.unit_id,
           coalesce(cardinality(array_positions(w.weights, 'A')), 0),
           coalesce(cardinality(array_positions(w.weights, 'B')), 0),
           coalesce(cardinality(array_positions(w.weights, 'C')), 0),
           length(f.search)
    FROM unnest(bank_ids, fact_types, unit_ids, states, searches) f(bank_id, fact_type, unit_id, state, search)
    CROSS JOIN LATERAL unnest(f.search) w
    WHERE f.state = 'valid'
$$;

CREATE FUNCTION keyword_postings_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO keyword_postings
    SELECT p.* FROM (SELECT array_agg(bank_id) b, array_agg(fact_type) t, array_agg(id) i, array_agg(state) s,
                            array_agg(search) v FROM changed_units WHERE state = 'valid') c
    CROSS JOIN LATERAL keyword_postings_of(c.b, c.t, c.i, c.s, c.v) p;
    RETURN NULL;
END $$;

-- Deletes by the primary key: a removed fact's lexemes are in its `search`.
CREATE FUNCTION keyword_postings_removed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM keyword_postings p
    USING (SELECT c.bank_id, w.lexeme, c.fact_type, c.id FROM changed_units c CROSS JOIN LATERAL unnest(c.search) w
           WHERE c.state = 'valid') gone
    WHERE p.bank_id = gone.bank_id AND p.lexeme = gone.lexeme AND p.fact_type = gone.fact_type AND p.unit_id = gone.id;
    RETURN NULL;
END $$;

CREATE FUNCTION keyword_postings_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM keyword_postings p
    USING unnest(OLD.search) w
    WHERE p.bank_id = OLD.bank_id AND p.lexeme = w.lexeme AND p.fact_type = OLD.fact_type AND p.unit_id = OLD.id;
    INSERT INTO keyword_postings
    SELECT * FROM keyword_postings_of(ARRAY[NEW.bank_id], ARRAY[NEW.fact_type], ARRAY[NEW.id], ARRAY[NEW.state], ARRAY[NEW.search]);
    RETURN NULL;
END $$;

CREATE TRIGGER keyword_postings_added AFTER INSERT ON memory_units
    REFERENCING NEW TABLE AS changed_units FOR EACH STATEMENT EXECUTE FUNCTION keyword_postings_added();
CREATE TRIGGER keyword_postings_removed AFTER DELETE ON memory_units
    REFERENCING OLD TABLE AS changed_units FOR EACH STATEMENT EXECUTE FUNCTION keyword_postings_removed();
-- The columns `search` is made of, as migration 022's trigger names them.
CREATE TRIGGER keyword_postings_changed AFTER UPDATE ON memory_units FOR EACH ROW
    WHEN (OLD.text IS DISTINCT FROM NEW.text OR OLD.lead_in IS DISTINCT FROM NEW.lead_in
          OR OLD.occurred_start IS DISTINCT FROM NEW.occurred_start OR OLD.mentioned_at IS DISTINCT FROM NEW.mentioned_at
          OR OLD.state IS DISTINCT FROM NEW.state OR OLD.fact_type IS DISTINCT FROM NEW.fact_type
          OR OLD.bank_id IS DISTINCT FROM NEW.bank_id)
    EXECUTE FUNCTION keyword_postings_changed();

-- Every valid fact's postings again. Writers wait meanwhile, as in rebuild_keyword_frequencies().
CREATE FUNCTION rebuild_keyword_postings() RETURNS void LANGUAGE sql AS $$
    LOCK TABLE memory_units IN SHARE MODE;
    DELETE FROM keyword_postings;
    INSERT INTO keyword_postings
    SELECT p.* FROM memory_units m
    CROSS JOIN LATERAL keyword_postings_of(ARRAY[m.bank_id], ARRAY[m.fact_type], ARRAY[m.id], ARRAY[m.state], ARRAY[m.search]) p
    WHERE m.state = 'valid';
$$;

SELECT rebuild_keyword_postings();
-- Planned from statistics at once (autovacuum would analyse it up to a minute later).
ANALYZE keyword_postings;
