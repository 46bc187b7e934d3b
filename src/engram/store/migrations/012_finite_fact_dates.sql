-- Facts dated at the very ends of the calendar (0001-01-01T00:00Z, 9999-12-31T23:59:59.999999Z) were
-- stored as -infinity/infinity (asyncpg's encoding of Python's datetime.min/max), which read back as
-- naive datetimes and broke recall on the bank. New writes stay one microsecond inside the calendar
-- (engram.store.instants); this brings the rows written before to the same values.
UPDATE memory_units SET occurred_start = CASE occurred_start
        WHEN 'infinity' THEN '9999-12-31 23:59:59.999998+00'::timestamptz
        WHEN '-infinity' THEN '0001-01-01 00:00:00.000001+00'::timestamptz ELSE occurred_start END,
    occurred_end = CASE occurred_end
        WHEN 'infinity' THEN '9999-12-31 23:59:59.999998+00'::timestamptz
        WHEN '-infinity' THEN '0001-01-01 00:00:00.000001+00'::timestamptz ELSE occurred_end END,
    mentioned_at = CASE mentioned_at
        WHEN 'infinity' THEN '9999-12-31 23:59:59.999998+00'::timestamptz
        WHEN '-infinity' THEN '0001-01-01 00:00:00.000001+00'::timestamptz ELSE mentioned_at END
WHERE NOT isfinite(occurred_start) OR NOT isfinite(occurred_end) OR NOT isfinite(mentioned_at);
