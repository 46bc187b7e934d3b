-- Webhooks and their deliveries. A delivery is a durable row written in the transaction that
-- records the event (an operation completing), and sent by the worker: it survives restarts, is
-- retried with backoff, and keeps the outcome of its last attempt.
CREATE TABLE webhooks (
    id           uuid PRIMARY KEY,
    bank_id      text NOT NULL REFERENCES banks ON DELETE CASCADE,
    url          text NOT NULL,
    secret       text,
    event_types  text[] NOT NULL,
    enabled      boolean NOT NULL DEFAULT true,
    http_config  jsonb NOT NULL DEFAULT '{}',
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhooks_bank ON webhooks (bank_id, created_at);

CREATE TABLE webhook_deliveries (
    id                   uuid PRIMARY KEY,
    webhook_id           uuid NOT NULL REFERENCES webhooks ON DELETE CASCADE,
    bank_id              text NOT NULL,
    event_id             uuid NOT NULL,
    event_type           text NOT NULL,
    url                  text NOT NULL,
    body                 text NOT NULL,  -- the exact bytes signed and sent
    status               text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'failed')),
    attempts             integer NOT NULL DEFAULT 0,
    next_attempt_at      timestamptz NOT NULL DEFAULT now(),
    locked_until         timestamptz,   -- a sender holds it until then; a dead sender's claim expires
    last_error           text,
    last_response_status integer,
    last_response_body   text,
    last_latency_ms      double precision,
    last_attempt_at      timestamptz,
    created_at           timestamptz NOT NULL DEFAULT now(),
    updated_at           timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_of ON webhook_deliveries (webhook_id, created_at DESC, id DESC);
