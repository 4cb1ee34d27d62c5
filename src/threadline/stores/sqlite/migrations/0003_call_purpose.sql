-- Why a call was made: "turn" (answering the user) or a side call such as "compaction"
-- (extracting constraints before one). Prefix reports compare a turn with the previous turn.
ALTER TABLE model_calls ADD COLUMN purpose TEXT NOT NULL DEFAULT 'turn';
