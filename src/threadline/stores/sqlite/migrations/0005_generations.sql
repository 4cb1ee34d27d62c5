-- Text as it streams, by generation id, so a client that lost its connection resumes from its
-- offset (through any replica) instead of running inference again.
CREATE TABLE generations (
    id              TEXT PRIMARY KEY,
    conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    text            TEXT NOT NULL,
    done            INTEGER NOT NULL DEFAULT 0,
    result          TEXT,            -- JSON: the finished turn, or the error
    updated_at      TEXT NOT NULL
);
