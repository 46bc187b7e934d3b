-- ANALYZE samples 300 rows per point of a table's largest statistics target: 30,000 rows at the
-- default 100. memory_links has ~37-67 links per fact, so the sample was its largest and slowest part
-- of the statistics job a bulk retain runs after each 10 % of growth: 34-48 ms of ~130 at 5,000 facts,
-- 180-440 ms at 100,000 (the pages read at random, then every column sorted). No plan needs that much:
-- recall reads links by one index lookup per fact (its statements force the lookups), and a link
-- column's statistics only size those lookups and the deletes by bank. At 30 the sample is 9,000 rows:
-- 10 ms at 5,000 facts, 54 ms at 100,000.
ALTER TABLE memory_links ALTER COLUMN from_unit SET STATISTICS 30,
                         ALTER COLUMN to_unit SET STATISTICS 30,
                         ALTER COLUMN bank_id SET STATISTICS 30,
                         ALTER COLUMN link_type SET STATISTICS 30,
                         ALTER COLUMN weight SET STATISTICS 30;
