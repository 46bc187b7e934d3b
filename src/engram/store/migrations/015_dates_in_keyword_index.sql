-- A fact's date in its keyword index: "What did Maria do in May 2023?" is answered by a turn that
-- says "last weekend" in a session dated 14 May 2023, a date that lives only in the fact's metadata.
-- The day, month name and year of the fact's event date (else when it was said), in UTC, are
-- indexed at weight C next to the fact's own words (A) and its lead-in (B); recall's BM25 counts a
-- date word at DATE_WEIGHT (engram.recall.arms). Dropping and adding the generated column computes it
-- for every existing row. A stored column may only use immutable functions, so the month's name
-- comes from an array rather than to_char; an infinite date (written by older versions) adds nothing.
DROP INDEX IF EXISTS memory_units_search;
ALTER TABLE memory_units DROP COLUMN search;
ALTER TABLE memory_units ADD COLUMN search tsvector GENERATED ALWAYS AS (
    setweight(to_tsvector('english', coalesce(lead_in, '')), 'B')
    || setweight(to_tsvector('english', text), 'A')
    || setweight(to_tsvector('english', CASE WHEN isfinite(coalesce(occurred_start, mentioned_at)) THEN
        extract(day FROM coalesce(occurred_start, mentioned_at) AT TIME ZONE 'UTC')::int::text || ' '
        || (ARRAY['January', 'February', 'March', 'April', 'May', 'June', 'July', 'August', 'September',
                  'October', 'November', 'December'])[
               extract(month FROM coalesce(occurred_start, mentioned_at) AT TIME ZONE 'UTC')::int]
        || ' ' || extract(year FROM coalesce(occurred_start, mentioned_at) AT TIME ZONE 'UTC')::int::text
        ELSE '' END), 'C')
) STORED;
CREATE INDEX memory_units_search ON memory_units USING gin (search);
