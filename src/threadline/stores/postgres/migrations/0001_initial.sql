-- The append-only conversation log on PostgreSQL: the same tables as the SQLite store.
--
-- conversation_id is the partition key (every row of a conversation belongs with it, and every
-- commit touches one conversation only) and seq the sort key within it; see
-- docs/postgres.md for hash partitioning across servers.
--
-- Item content, call requests and metadata are canonical JSON kept as text, not jsonb: the
-- hash chain covers these exact bytes, and jsonb would reorder keys and refuse "\u0000".
CREATE TABLE conversations (
    id          text PRIMARY KEY,
    created_at  timestamptz NOT NULL,
    title       text,
    system      text,
    metadata    text NOT NULL DEFAULT '{}'
);

CREATE TABLE branches (
    conversation_id text NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    name            text NOT NULL,
    parent          text,     -- the branch the fork point lives on; NULL for main
    fork_seq        bigint,   -- the item this branch grows from; NULL for main
    created_at      timestamptz NOT NULL,
    PRIMARY KEY (conversation_id, name)
);

CREATE TABLE items (
    conversation_id text NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    seq             bigint NOT NULL,   -- conversation-wide, increasing across all branches
    branch          text NOT NULL,
    parent_seq      bigint,
    turn            integer NOT NULL,
    kind            text NOT NULL,
    content         text NOT NULL,     -- canonical JSON
    hash            text NOT NULL,     -- algorithm-tagged, chained to the parent's hash
    client_msg_id   text,
    created_at      timestamptz NOT NULL,
    PRIMARY KEY (conversation_id, seq)
);
CREATE INDEX items_by_branch ON items (conversation_id, branch, seq);
CREATE UNIQUE INDEX items_by_client_msg_id ON items (client_msg_id)
    WHERE client_msg_id IS NOT NULL;

CREATE TABLE model_calls (
    id                text PRIMARY KEY,
    position          bigint GENERATED ALWAYS AS IDENTITY,  -- the order calls were recorded
    conversation_id   text NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    branch            text NOT NULL,
    turn              integer NOT NULL,
    head_seq          bigint NOT NULL,
    reply_seq         bigint,
    status            text NOT NULL,
    model             text NOT NULL,
    base_call_id      text,           -- the request is stored as a delta against this call's
    request_delta     text NOT NULL,
    response          text NOT NULL,
    prompt_tokens     integer NOT NULL,
    cached_tokens     integer NOT NULL,
    completion_tokens integer NOT NULL,
    ttft_ms           double precision,
    total_ms          double precision NOT NULL,
    error             text,
    started_at        timestamptz NOT NULL,
    prefix_report     text,
    purpose           text NOT NULL DEFAULT 'turn'
);
CREATE INDEX model_calls_by_branch ON model_calls (conversation_id, branch, position);

-- One lease per conversation: the turn that holds it is the only one running there.
CREATE TABLE leases (
    conversation_id text PRIMARY KEY REFERENCES conversations (id) ON DELETE CASCADE,
    holder          text NOT NULL,
    expires_at      double precision NOT NULL,   -- seconds since the epoch
    cancel          boolean NOT NULL DEFAULT false
);

-- Text as it streams, by generation id, so a reconnecting client resumes through any replica.
CREATE TABLE generations (
    id              text PRIMARY KEY,
    conversation_id text NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    text            text NOT NULL,
    done            boolean NOT NULL DEFAULT false,
    result          text,            -- JSON: the finished turn, or the error
    updated_at      timestamptz NOT NULL
);
CREATE INDEX generations_by_conversation ON generations (conversation_id);
