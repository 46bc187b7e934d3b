-- memory_links' two foreign keys to memory_units become statement-level triggers. A foreign key checks
-- each inserted link on each side with a query of its own: a 500-item bulk retain at 133,000 facts
-- inserts ~22,000 semantic links, and their ~44,000 checks were ~45 % of that statement (the links'
-- inserts with the keys 345-495 ms, without them 180-240 ms). The triggers keep what the keys
-- guaranteed, with one statement for all the rows a statement inserts or deletes:
--
-- * a link joins two existing facts, and both stay locked (FOR KEY SHARE, the lock a key's check
--   takes) until the inserting transaction ends: a fact deleted meanwhile fails the insert with
--   foreign_key_violation (23503), as the key did, and a delete that comes later waits for the
--   insert's transaction, then finds its links committed and removes them;
-- * deleting facts deletes their links both ways (the keys' ON DELETE CASCADE).
ALTER TABLE memory_links DROP CONSTRAINT memory_links_from_unit_fkey,
                         DROP CONSTRAINT memory_links_to_unit_fkey;

CREATE FUNCTION memory_links_joined() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    joined uuid[];
    locked bigint;
    missing uuid;
BEGIN
    SELECT array_agg(DISTINCT fact) INTO joined
    FROM (SELECT from_unit AS fact FROM written_links UNION ALL SELECT to_unit FROM written_links) ends;
    IF joined IS NULL THEN
        RETURN NULL;
    END IF;
    SELECT count(*) INTO locked FROM (SELECT FROM memory_units m WHERE m.id = ANY(joined) FOR KEY SHARE) facts;
    IF locked < cardinality(joined) THEN
        SELECT fact INTO missing FROM unnest(joined) AS j(fact)
        WHERE NOT EXISTS (SELECT FROM memory_units m WHERE m.id = j.fact) LIMIT 1;
        RAISE foreign_key_violation USING TABLE = 'memory_links',
            MESSAGE = format('a link of memory_links joins fact %s, which does not exist', missing);
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER memory_links_added AFTER INSERT ON memory_links
    REFERENCING NEW TABLE AS written_links FOR EACH STATEMENT EXECUTE FUNCTION memory_links_joined();
CREATE TRIGGER memory_links_changed AFTER UPDATE ON memory_links
    REFERENCING NEW TABLE AS written_links FOR EACH STATEMENT EXECUTE FUNCTION memory_links_joined();

CREATE FUNCTION memory_links_of_removed_facts() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM memory_links l USING removed_facts r WHERE l.from_unit = r.id;
    DELETE FROM memory_links l USING removed_facts r WHERE l.to_unit = r.id;
    RETURN NULL;
END $$;

CREATE TRIGGER memory_links_of_removed_facts AFTER DELETE ON memory_units
    REFERENCING OLD TABLE AS removed_facts FOR EACH STATEMENT EXECUTE FUNCTION memory_links_of_removed_facts();
