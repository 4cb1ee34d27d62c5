-- What an audit export reads first: which conversations were active on which UTC day. These
-- cover that read (the time and the conversation, nothing else), so finding a day's
-- conversations no longer reads every item and call, requests included. Building them on a
-- long log's first open after this migration reads each table once.
CREATE INDEX items_by_time ON items (created_at, conversation_id);
CREATE INDEX model_calls_by_time ON model_calls (started_at, conversation_id);
