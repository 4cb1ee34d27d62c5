-- What a Responses API response id names: a point in a branch (the message a request added
-- and the reply that answered it), and what the request said that the log does not keep.
-- A deleted response keeps its row as a tombstone (deleted_at), so its id never resolves
-- again; the log's items are not touched. Deleting the conversation removes its responses.
CREATE TABLE responses (
    id                   text PRIMARY KEY,
    conversation_id      text NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    branch               text NOT NULL,
    message_seq          bigint NOT NULL,
    reply_seq            bigint NOT NULL,
    call_id              text NOT NULL,
    created_at           timestamptz NOT NULL,
    previous_response_id text,
    instructions         text,
    metadata             text NOT NULL DEFAULT '{}',   -- canonical JSON
    deleted_at           timestamptz
);
-- a message is one request's: a retried request finds the first one's response
CREATE UNIQUE INDEX responses_by_message ON responses (conversation_id, message_seq);
