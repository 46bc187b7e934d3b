-- Temporal links pick, for each new fact, the facts of its bank and type nearest to it in time. With
-- no index on that time, every new fact read the whole bank (19 ms a fact at 5,000 facts, growing
-- with the bank); this index lets it read its nearest neighbours on either side instead.
CREATE INDEX IF NOT EXISTS memory_units_said_time
    ON memory_units (bank_id, fact_type, (coalesce(occurred_start, mentioned_at)));
