-- The audit log (one row per audited request) and LLM traces (one row per LLM call). Neither refers
-- to `banks`: the trail of a bank outlives the bank, until retention removes it.
CREATE TABLE audit_logs (
    id           uuid PRIMARY KEY,
    bank_id      text,
    action       text NOT NULL,
    transport    text NOT NULL,
    api_key_id   text,
    method       text NOT NULL,
    route        text,
    path         text NOT NULL,
    status_code  integer,
    started_at   timestamptz NOT NULL,
    ended_at     timestamptz NOT NULL,
    duration_ms  integer NOT NULL,
    request      jsonb,
    response     jsonb,
    metadata     jsonb NOT NULL DEFAULT '{}'
);
CREATE INDEX audit_logs_bank ON audit_logs (bank_id, started_at DESC, id DESC);
CREATE INDEX audit_logs_started ON audit_logs (started_at);

CREATE TABLE llm_requests (
    id            uuid PRIMARY KEY,
    bank_id       text,
    operation     text,
    scope         text,
    provider      text,
    model         text,
    status        text NOT NULL,
    started_at    timestamptz NOT NULL,
    ended_at      timestamptz NOT NULL,
    duration_ms   integer NOT NULL,
    input_tokens  integer,
    output_tokens integer,
    input         jsonb,
    output        jsonb,
    error         text,
    metadata      jsonb NOT NULL DEFAULT '{}'
);
CREATE INDEX llm_requests_bank ON llm_requests (bank_id, started_at DESC, id DESC);
CREATE INDEX llm_requests_started ON llm_requests (started_at);

-- The knowledge base: a tree of folders and pages; a page is a mental model placed in the tree.
CREATE TABLE kb_nodes (
    id              text PRIMARY KEY,
    bank_id         text NOT NULL REFERENCES banks ON DELETE CASCADE,
    kind            text NOT NULL CHECK (kind IN ('folder', 'page')),
    name            text NOT NULL,
    parent_id       text REFERENCES kb_nodes ON DELETE CASCADE,
    mental_model_id text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX kb_nodes_bank ON kb_nodes (bank_id, parent_id);
