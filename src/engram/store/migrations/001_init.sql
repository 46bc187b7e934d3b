-- Engram's base schema: banks, documents, chunks, facts (memory_units), entities and their graph,
-- links between facts, and the operations queue. Every table carries bank_id (the future
-- distribution key).

CREATE EXTENSION IF NOT EXISTS vector;
CREATE EXTENSION IF NOT EXISTS pg_trgm;

CREATE TABLE banks (
    bank_id     text PRIMARY KEY,
    name        text,
    mission     text,
    background  text,
    config      jsonb NOT NULL DEFAULT '{}',
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE documents (
    bank_id            text NOT NULL REFERENCES banks ON DELETE CASCADE,
    id                 text NOT NULL,
    original_text      text,
    content_hash       text,
    tags               text[] NOT NULL DEFAULT '{}',
    metadata           jsonb,
    retain_params      jsonb,
    observation_scopes jsonb,
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (bank_id, id)
);

CREATE TABLE chunks (
    id           text PRIMARY KEY,
    bank_id      text NOT NULL,
    document_id  text NOT NULL,
    chunk_index  integer NOT NULL,
    chunk_text   text NOT NULL,
    content_hash text NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    FOREIGN KEY (bank_id, document_id) REFERENCES documents (bank_id, id) ON DELETE CASCADE
);
CREATE INDEX chunks_document ON chunks (bank_id, document_id, chunk_index);

CREATE TABLE memory_units (
    id                 uuid PRIMARY KEY,
    bank_id            text NOT NULL REFERENCES banks ON DELETE CASCADE,
    document_id        text,
    chunk_id           text REFERENCES chunks ON DELETE SET NULL,
    text               text NOT NULL,
    context            text,
    fact_type          text NOT NULL CHECK (fact_type IN ('world', 'experience', 'observation')),
    fact_kind          text,
    embedding          vector(384) NOT NULL,
    search             tsvector GENERATED ALWAYS AS (to_tsvector('english', text)) STORED,
    occurred_start     timestamptz,
    occurred_end       timestamptz,
    mentioned_at       timestamptz,
    tags               text[] NOT NULL DEFAULT '{}',
    metadata           jsonb NOT NULL DEFAULT '{}',
    observation_scopes jsonb,
    proof_count        integer NOT NULL DEFAULT 1,
    source_memory_ids  uuid[] NOT NULL DEFAULT '{}',
    consolidated_at    timestamptz,
    consolidation_failed_at timestamptz,
    state              text NOT NULL DEFAULT 'valid',
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now(),
    FOREIGN KEY (bank_id, document_id) REFERENCES documents (bank_id, id) ON DELETE CASCADE
);
CREATE INDEX memory_units_bank_type ON memory_units (bank_id, fact_type, created_at DESC);
CREATE INDEX memory_units_document ON memory_units (bank_id, document_id);
CREATE INDEX memory_units_search ON memory_units USING gin (search);
CREATE INDEX memory_units_tags ON memory_units USING gin (tags);
CREATE INDEX memory_units_embedding ON memory_units USING hnsw (embedding vector_cosine_ops);
CREATE INDEX memory_units_occurred ON memory_units (bank_id, occurred_start, occurred_end);
CREATE INDEX memory_units_unconsolidated ON memory_units (bank_id, created_at)
    WHERE consolidated_at IS NULL AND fact_type IN ('world', 'experience');

CREATE TABLE entities (
    id             uuid PRIMARY KEY,
    bank_id        text NOT NULL REFERENCES banks ON DELETE CASCADE,
    canonical_name text NOT NULL,
    entity_kind    text NOT NULL DEFAULT 'free' CHECK (entity_kind IN ('free', 'label')),
    entity_type    text,
    mention_count  integer NOT NULL DEFAULT 0,
    first_seen     timestamptz NOT NULL DEFAULT now(),
    last_seen      timestamptz NOT NULL DEFAULT now(),
    metadata       jsonb NOT NULL DEFAULT '{}'
);
-- One entity per name in a bank, whatever the case: concurrent retains resolve through ON CONFLICT.
CREATE UNIQUE INDEX entities_bank_name ON entities (bank_id, lower(canonical_name));
CREATE INDEX entities_name_trgm ON entities USING gin (lower(canonical_name) gin_trgm_ops);

CREATE TABLE unit_entities (
    unit_id   uuid NOT NULL REFERENCES memory_units ON DELETE CASCADE,
    entity_id uuid NOT NULL REFERENCES entities ON DELETE CASCADE,
    bank_id   text NOT NULL,
    mention   text,  -- the name as the fact wrote it: an entity's aliases are its distinct mentions
    PRIMARY KEY (unit_id, entity_id)
);
CREATE INDEX unit_entities_entity ON unit_entities (entity_id);

CREATE TABLE entity_cooccurrences (
    bank_id         text NOT NULL,
    entity_a        uuid NOT NULL REFERENCES entities ON DELETE CASCADE,
    entity_b        uuid NOT NULL REFERENCES entities ON DELETE CASCADE,
    count           integer NOT NULL DEFAULT 1,
    last_cooccurred timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (entity_a, entity_b),
    CHECK (entity_a < entity_b)
);
CREATE INDEX entity_cooccurrences_b ON entity_cooccurrences (entity_b);

CREATE TABLE memory_links (
    from_unit uuid NOT NULL REFERENCES memory_units ON DELETE CASCADE,
    to_unit   uuid NOT NULL REFERENCES memory_units ON DELETE CASCADE,
    bank_id   text NOT NULL,
    link_type text NOT NULL CHECK (link_type IN ('temporal', 'semantic', 'causal')),
    weight    real NOT NULL,
    PRIMARY KEY (from_unit, to_unit, link_type)
);
CREATE INDEX memory_links_to ON memory_links (to_unit);
CREATE INDEX memory_links_bank ON memory_links (bank_id, link_type);

CREATE TABLE async_operations (
    id               uuid PRIMARY KEY,
    bank_id          text NOT NULL,
    operation_type   text NOT NULL,
    status           text NOT NULL DEFAULT 'pending'
        CHECK (status IN ('pending', 'processing', 'completed', 'failed', 'cancelled')),
    payload          jsonb NOT NULL DEFAULT '{}',
    result           jsonb,
    error_message    text,
    items_count      integer NOT NULL DEFAULT 0,
    document_id      text,
    progress         jsonb,
    retry_count      integer NOT NULL DEFAULT 0,
    dedupe_key       text,
    worker_id        text,
    lease_expires_at timestamptz,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    started_at       timestamptz,
    completed_at     timestamptz
);
CREATE INDEX async_operations_claim ON async_operations (created_at) WHERE status = 'pending';
CREATE INDEX async_operations_bank ON async_operations (bank_id, created_at DESC);
-- At most one pending operation per (bank, dedupe key): consolidation requests coalesce.
CREATE UNIQUE INDEX async_operations_dedupe ON async_operations (bank_id, dedupe_key)
    WHERE status = 'pending' AND dedupe_key IS NOT NULL;
