-- The memory writer's queue: one job per message to learn from, done off the request path.
-- The key makes enqueueing idempotent; a claim expires, so a crashed worker's job is retried.
CREATE TABLE memory_jobs (
    conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    seq             INTEGER NOT NULL,
    user_id         TEXT NOT NULL,
    status          TEXT NOT NULL DEFAULT 'pending',  -- pending | done | failed
    attempts        INTEGER NOT NULL DEFAULT 0,
    claimed_until   REAL,                             -- seconds since the epoch
    decisions       TEXT,                             -- JSON: what the gate decided, and why
    error           TEXT,
    PRIMARY KEY (conversation_id, seq)
);
CREATE INDEX memory_jobs_pending ON memory_jobs (status, claimed_until);
