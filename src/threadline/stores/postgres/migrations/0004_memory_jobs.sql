-- The memory writer's queue: one job per message to learn from, done off the request path.
-- The key makes enqueueing idempotent; a claim expires, so a crashed worker's job is retried.
CREATE TABLE memory_jobs (
    conversation_id text NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    seq             bigint NOT NULL,
    user_id         text NOT NULL,
    status          text NOT NULL DEFAULT 'pending',  -- pending | done | failed
    attempts        integer NOT NULL DEFAULT 0,
    claimed_until   double precision,                 -- seconds since the epoch
    decisions       text,                             -- JSON: what the gate decided, and why
    error           text,
    PRIMARY KEY (conversation_id, seq)
);
CREATE INDEX memory_jobs_pending ON memory_jobs (status, claimed_until);
