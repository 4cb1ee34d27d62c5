-- What a Responses API response id names: a point in a branch (the message a request added
-- and the reply that answered it), and what the request said that the log does not keep.
-- A deleted response keeps its row as a tombstone (deleted_at), so its id never resolves
-- again; the log's items are not touched. Deleting the conversation removes its responses.
CREATE TABLE responses (
    id                   TEXT PRIMARY KEY,
    conversation_id      TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    branch               TEXT NOT NULL,
    message_seq          INTEGER NOT NULL,
    reply_seq            INTEGER NOT NULL,
    call_id              TEXT NOT NULL,
    created_at           TEXT NOT NULL,
    previous_response_id TEXT,
    instructions         TEXT,
    metadata             TEXT NOT NULL DEFAULT '{}',   -- canonical JSON
    deleted_at           TEXT
);
-- a message is one request's: a retried request finds the first one's response
CREATE UNIQUE INDEX responses_by_message ON responses (conversation_id, message_seq);
