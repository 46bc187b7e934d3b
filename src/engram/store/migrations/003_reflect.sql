-- Reflect's state: mental models (stored answers to standing questions, with their history) and
-- directives (hard rules reflect must follow).

CREATE TABLE mental_models (
    bank_id                text NOT NULL REFERENCES banks ON DELETE CASCADE,
    id                     text NOT NULL,
    name                   text NOT NULL,
    source_query           text NOT NULL,
    content                text,
    tags                   text[] NOT NULL DEFAULT '{}',
    max_tokens             integer NOT NULL DEFAULT 2048,
    trigger                jsonb NOT NULL DEFAULT '{}',
    embedding              vector(384),
    reflect_response       jsonb,
    last_refreshed_at      timestamptz,
    last_memory_seen_at    timestamptz,
    last_refresh_failed_at timestamptz,
    last_refresh_error     text,
    created_at             timestamptz NOT NULL DEFAULT now(),
    updated_at             timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (bank_id, id)
);

CREATE TABLE mental_model_history (
    id              bigserial PRIMARY KEY,
    bank_id         text NOT NULL,
    mental_model_id text NOT NULL,
    content         text,
    refreshed_at    timestamptz,
    replaced_at     timestamptz NOT NULL DEFAULT now(),
    FOREIGN KEY (bank_id, mental_model_id) REFERENCES mental_models (bank_id, id) ON DELETE CASCADE
);
CREATE INDEX mental_model_history_model ON mental_model_history (bank_id, mental_model_id, replaced_at DESC);

CREATE TABLE directives (
    id         uuid PRIMARY KEY,
    bank_id    text NOT NULL REFERENCES banks ON DELETE CASCADE,
    name       text NOT NULL,
    content    text NOT NULL,
    priority   integer NOT NULL DEFAULT 0,
    is_active  boolean NOT NULL DEFAULT true,
    tags       text[] NOT NULL DEFAULT '{}',
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX directives_bank ON directives (bank_id, priority DESC);
