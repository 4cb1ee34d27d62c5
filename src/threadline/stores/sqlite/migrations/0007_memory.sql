-- Long-term memory, partitioned by user: the user id leads the key, and every read names it.
-- An update never overwrites: the old entry is invalidated (with what replaced it) and kept
-- as history. An entry derived from a conversation goes when the conversation does.
CREATE TABLE memory_entries (
    user_id         TEXT NOT NULL,
    id              TEXT NOT NULL,
    kind            TEXT NOT NULL,     -- fact | episode | procedure
    text            TEXT NOT NULL,
    source          TEXT NOT NULL,     -- user_stated | user_confirmed | model_inferred |
                                       -- tool_returned | imported
    trusted         INTEGER NOT NULL,
    conversation_id TEXT REFERENCES conversations (id) ON DELETE CASCADE,
    item_seqs       TEXT NOT NULL DEFAULT '[]',
    recorded_at     TEXT NOT NULL,     -- when threadline learned it
    valid_from      TEXT,              -- when it holds in the world
    valid_to        TEXT,
    expires_at      TEXT,              -- when it must be deleted (or revalidated)
    supersedes      TEXT,              -- the entry this one replaced
    invalidated_at  TEXT,
    invalidated_by  TEXT,              -- the entry that replaced it (null: withdrawn)
    reason          TEXT,
    PRIMARY KEY (user_id, id)
);
CREATE INDEX memory_by_conversation ON memory_entries (conversation_id);
