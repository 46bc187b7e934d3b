-- The temporal arm wants the facts whose time span (event dates, else when they were said) overlaps
-- the query's window. The said-time index could only bound the start (< the window's end), so a window
-- in 2014 read every fact of the bank said before 2015: 8,600 rows for 215 kept, 64 ms at 100,000
-- facts. A GiST index on the span answers the overlap directly. least/greatest keep the range valid
-- when an event's end was stored before its start; the arm still applies its exact conditions.
CREATE EXTENSION IF NOT EXISTS btree_gist;
CREATE INDEX IF NOT EXISTS memory_units_time_span ON memory_units USING gist (
    bank_id,
    tstzrange(
        least(coalesce(occurred_start, mentioned_at), coalesce(occurred_end, occurred_start, mentioned_at)),
        greatest(coalesce(occurred_start, mentioned_at), coalesce(occurred_end, occurred_start, mentioned_at)),
        '[]')
);
