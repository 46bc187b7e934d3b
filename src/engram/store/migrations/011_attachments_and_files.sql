-- Bytes kept in PostgreSQL itself (one store): the attachments of retained content (images and files
-- sent as content blocks, and the original of an uploaded file), and stored files such as transfer
-- archives waiting to be downloaded or imported.
CREATE TABLE attachments (
    id          uuid PRIMARY KEY,
    bank_id     text NOT NULL REFERENCES banks ON DELETE CASCADE,
    document_id text NOT NULL,
    chunk_id    text REFERENCES chunks ON DELETE SET NULL,
    block_index integer,
    text_offset integer,  -- where in the document's text it appeared: its chunk is found again after reprocessing
    kind        text NOT NULL CHECK (kind IN ('image', 'file')),
    role        text NOT NULL DEFAULT 'content' CHECK (role IN ('content', 'original')),
    media_type  text NOT NULL,
    filename    text,
    byte_size   integer NOT NULL,
    sha256      text NOT NULL,
    data        bytea NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    FOREIGN KEY (bank_id, document_id) REFERENCES documents (bank_id, id) ON DELETE CASCADE
);
CREATE INDEX attachments_document ON attachments (bank_id, document_id, block_index);

CREATE TABLE stored_files (
    key          text PRIMARY KEY,
    bank_id      text NOT NULL,
    media_type   text NOT NULL,
    filename     text,
    byte_size    integer NOT NULL,
    data         bytea NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX stored_files_bank ON stored_files (bank_id, created_at);
