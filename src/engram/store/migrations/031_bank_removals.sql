-- A whole-bank clear or bank delete under way, and how far it has gone. The delete runs in one
-- transaction, whose work no one else sees until it commits (~30 min for 10 M memories), so its
-- progress is written here from a connection of its own, for clients to follow
-- (GET …/banks/{bank_id}/removal, `engram bank delete`). The row goes when the delete ends, however
-- it ends; one left by a server that died is ignored once it is minutes old. Unlogged: it is only
-- worth anything while the server that writes it runs.
CREATE UNLOGGED TABLE bank_removals (
    bank_id     text PRIMARY KEY,
    action      text NOT NULL,   -- 'clear' (its memories, or those of one type) or 'delete' (the bank)
    fact_type   text,            -- the type cleared, when only one
    done        bigint NOT NULL DEFAULT 0,
    total       bigint NOT NULL,
    started_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);
