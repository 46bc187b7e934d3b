-- A fact's consolidation status moves out of memory_units into a narrow table of its own.
--
-- Consolidation marks every fact it is done with. On memory_units that mark was an UPDATE of a
-- ~2 kB row (the vector is stored inline) on a page with no room for a second version, and a
-- partial index named consolidated_at: the update could never be HOT, so each mark wrote a new
-- row version into every index of the table, the HNSW one included (~1.5 ms a fact, a quarter of
-- PostgreSQL's time during bulk ingest), and left a dead HNSW entry behind. Here a mark rewrites a
-- ~100-byte row with two b-tree entries.
--
-- Every memory unit has exactly one row, written by the trigger below whoever inserts the unit, and
-- removed with it. `queued_at` is the unit's created_at (kept in step by the import, which restores
-- archived creation times), so the queue is read in order from one partial index.
CREATE TABLE consolidation_status (
    unit_id         uuid PRIMARY KEY REFERENCES memory_units (id) ON DELETE CASCADE,
    bank_id         text NOT NULL,
    queued_at       timestamptz NOT NULL,
    consolidated_at timestamptz,
    failed_at       timestamptz,
    error           text
);
CREATE INDEX consolidation_status_pending ON consolidation_status (bank_id, queued_at, unit_id)
    WHERE consolidated_at IS NULL AND failed_at IS NULL;
CREATE INDEX consolidation_status_failed ON consolidation_status (bank_id)
    WHERE failed_at IS NOT NULL AND consolidated_at IS NULL;
-- A bank's last consolidation (stats) and the bank-wide resets.
CREATE INDEX consolidation_status_bank ON consolidation_status (bank_id, consolidated_at);

INSERT INTO consolidation_status (unit_id, bank_id, queued_at, consolidated_at, failed_at, error)
SELECT id, bank_id, created_at, consolidated_at, consolidation_failed_at, consolidation_error FROM memory_units;

-- An observation is written by consolidation, so it is consolidated when it is written.
CREATE FUNCTION consolidation_status_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO consolidation_status (unit_id, bank_id, queued_at, consolidated_at)
    SELECT id, bank_id, created_at, CASE WHEN fact_type = 'observation' THEN created_at END FROM added_units;
    RETURN NULL;
END $$;

CREATE TRIGGER consolidation_status_added AFTER INSERT ON memory_units
    REFERENCING NEW TABLE AS added_units FOR EACH STATEMENT EXECUTE FUNCTION consolidation_status_added();

DROP INDEX memory_units_unconsolidated;
ALTER TABLE memory_units DROP COLUMN consolidated_at, DROP COLUMN consolidation_failed_at,
    DROP COLUMN consolidation_error;
