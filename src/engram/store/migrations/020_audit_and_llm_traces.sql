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
