-- One lease per conversation: the turn that holds it is the only one running there. A lease
-- expires, so a crashed holder never wedges a conversation; a waiting sender can ask the
-- holder to cancel (it checks between streamed pieces).
CREATE TABLE leases (
    conversation_id TEXT PRIMARY KEY REFERENCES conversations (id) ON DELETE CASCADE,
    holder          TEXT NOT NULL,
    expires_at      REAL NOT NULL,   -- seconds since the epoch
    cancel          INTEGER NOT NULL DEFAULT 0
);
