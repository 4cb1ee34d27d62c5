-- The append-only conversation log. Items are never updated; a fork is a new branch.
CREATE TABLE conversations (
    id          TEXT PRIMARY KEY,
    created_at  TEXT NOT NULL,
    title       TEXT,
    system      TEXT,
    metadata    TEXT NOT NULL DEFAULT '{}'
);

CREATE TABLE branches (
    conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    name            TEXT NOT NULL,
    parent          TEXT,     -- the branch the fork point lives on; NULL for main
    fork_seq        INTEGER,  -- the item this branch grows from; NULL for main
    created_at      TEXT NOT NULL,
    PRIMARY KEY (conversation_id, name)
);

CREATE TABLE items (
    conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    seq             INTEGER NOT NULL,  -- conversation-wide, increasing across all branches
    branch          TEXT NOT NULL,
    parent_seq      INTEGER,
    turn            INTEGER NOT NULL,
    kind            TEXT NOT NULL,
    content         TEXT NOT NULL,     -- canonical JSON
    hash            TEXT NOT NULL,     -- algorithm-tagged, chained to the parent's hash
    client_msg_id   TEXT,
    created_at      TEXT NOT NULL,
    PRIMARY KEY (conversation_id, seq)
);
CREATE INDEX items_by_branch ON items (conversation_id, branch, seq);
-- partial: most items carry no client id, and they cost no index entry
CREATE UNIQUE INDEX items_by_client_msg_id ON items (client_msg_id)
    WHERE client_msg_id IS NOT NULL;

CREATE TABLE model_calls (
    id                TEXT PRIMARY KEY,
    conversation_id   TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    branch            TEXT NOT NULL,
    turn              INTEGER NOT NULL,
    head_seq          INTEGER NOT NULL,
    reply_seq         INTEGER,
    status            TEXT NOT NULL,
    model             TEXT NOT NULL,
    base_call_id      TEXT,           -- the request is stored as a delta against this call's
    request_delta     TEXT NOT NULL,
    response          TEXT NOT NULL,
    prompt_tokens     INTEGER NOT NULL,
    cached_tokens     INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    ttft_ms           REAL,
    total_ms          REAL NOT NULL,
    error             TEXT,
    started_at        TEXT NOT NULL
);
CREATE INDEX model_calls_by_branch ON model_calls (conversation_id, branch);
