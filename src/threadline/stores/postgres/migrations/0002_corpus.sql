-- A user's documents for retrieval (threadline/retrieval/), as on SQLite; the full-text index
-- is a generated tsvector ('simple': lower-cased words, no stemming) with a GIN index.
CREATE TABLE corpora (
    name        text PRIMARY KEY,
    created_at  timestamptz NOT NULL
);

CREATE TABLE corpus_documents (
    corpus      text NOT NULL REFERENCES corpora (name) ON DELETE CASCADE,
    doc_id      text NOT NULL,
    source      text NOT NULL,
    bytes       bigint NOT NULL,
    added_at    timestamptz NOT NULL,
    PRIMARY KEY (corpus, doc_id)
);

CREATE TABLE corpus_chunks (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    corpus      text NOT NULL,
    doc_id      text NOT NULL,
    chunk_id    text NOT NULL,
    sentences   text NOT NULL,
    text        text NOT NULL,
    search      tsvector GENERATED ALWAYS AS (to_tsvector('simple', text)) STORED,
    UNIQUE (corpus, chunk_id),
    FOREIGN KEY (corpus, doc_id) REFERENCES corpus_documents (corpus, doc_id) ON DELETE CASCADE
);
CREATE INDEX corpus_chunks_search ON corpus_chunks USING gin (search);

CREATE TABLE corpus_vectors (
    chunk       bigint PRIMARY KEY REFERENCES corpus_chunks (id) ON DELETE CASCADE,
    model       text NOT NULL,
    vector      bytea NOT NULL
);

CREATE TABLE answer_cache (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    corpus          text NOT NULL REFERENCES corpora (name) ON DELETE CASCADE,
    query_key       text NOT NULL,
    anchors         text NOT NULL,
    passages        text NOT NULL,
    answer          text NOT NULL,
    conversation_id text NOT NULL,
    reply_seq       bigint NOT NULL,
    call_id         text NOT NULL,
    vector          bytea,
    created_at      timestamptz NOT NULL
);
CREATE INDEX answer_cache_by_key ON answer_cache (corpus, query_key);
