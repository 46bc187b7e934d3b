-- Stored files (transfer archives, uploads) kept in parts. One bytea value holds at most 1 GB, and a
-- bank's transfer archive is ~2 kB a memory, so a bank past ~500,000 memories could not be exported;
-- each part is read and written alone, so no step holds a whole archive in memory either. Archive
-- bytes are already compressed: the parts are stored as they are, without TOAST's compression attempt.
CREATE TABLE stored_file_parts (
    key   text NOT NULL REFERENCES stored_files ON DELETE CASCADE,
    part  integer NOT NULL,
    data  bytea NOT NULL,
    PRIMARY KEY (key, part)
);
ALTER TABLE stored_file_parts ALTER COLUMN data SET STORAGE EXTERNAL;
INSERT INTO stored_file_parts (key, part, data) SELECT key, 0, data FROM stored_files;
ALTER TABLE stored_files DROP COLUMN data;
ALTER TABLE stored_files ALTER COLUMN byte_size TYPE bigint;
