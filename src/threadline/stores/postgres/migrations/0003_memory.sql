-- Long-term memory, partitioned by user: the user id leads the key, and every read names it.
-- An update never overwrites: the old entry is invalidated (with what replaced it) and kept
-- as history. An entry derived from a conversation goes when the conversation does.
CREATE TABLE memory_entries (
    user_id         text NOT NULL,
    id              text NOT NULL,
    kind            text NOT NULL,         -- fact | episode | procedure
    text            text NOT NULL,
    source          text NOT NULL,         -- user_stated | user_confirmed | model_inferred |
                                           -- tool_returned | imported
    trusted         boolean NOT NULL,
    conversation_id text REFERENCES conversations (id) ON DELETE CASCADE,
    item_seqs       text NOT NULL DEFAULT '[]',
    recorded_at     timestamptz NOT NULL,  -- when threadline learned it
    valid_from      timestamptz,           -- when it holds in the world
    valid_to        timestamptz,
    expires_at      timestamptz,           -- when it must be deleted (or revalidated)
    supersedes      text,                  -- the entry this one replaced
    invalidated_at  timestamptz,
    invalidated_by  text,                  -- the entry that replaced it (null: withdrawn)
    reason          text,
    PRIMARY KEY (user_id, id)
);
CREATE INDEX memory_by_conversation ON memory_entries (conversation_id);
