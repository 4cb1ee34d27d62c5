-- Each item's transcript hash: chained over the system prompt and the user and assistant
-- messages up to it (other items pass their parent's on), so a client that resends its whole
-- history is matched to the log by one indexed lookup. Rows from before this migration are
-- NULL until the store fills them in on open.
ALTER TABLE items ADD COLUMN transcript text;
CREATE INDEX items_by_transcript ON items (transcript)
    WHERE kind IN ('user_message', 'assistant_message');
-- partial: empty once every row has its hash, so finding one that lacks it costs nothing
CREATE INDEX items_without_transcript ON items (conversation_id) WHERE transcript IS NULL;
