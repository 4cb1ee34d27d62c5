-- A user's documents for retrieval, cut into chunks of sentences with stable ids
-- (threadline/retrieval/chunks.py). The full-text index over the chunks (FTS5) is created by
-- the corpus on first use, so a Python whose SQLite lacks FTS5 can still open the log.
CREATE TABLE corpora (
    name        TEXT PRIMARY KEY,
    created_at  TEXT NOT NULL
);

CREATE TABLE corpus_documents (
    corpus      TEXT NOT NULL REFERENCES corpora (name) ON DELETE CASCADE,
    doc_id      TEXT NOT NULL,     -- a hash of the text: the same text, the same id
    source      TEXT NOT NULL,     -- where it was read from
    bytes       INTEGER NOT NULL,
    added_at    TEXT NOT NULL,
    PRIMARY KEY (corpus, doc_id)
);

CREATE TABLE corpus_chunks (
    id          INTEGER PRIMARY KEY,  -- the full-text index's row id
    corpus      TEXT NOT NULL,
    doc_id      TEXT NOT NULL,
    chunk_id    TEXT NOT NULL,        -- DOC:cN
    sentences   TEXT NOT NULL,        -- JSON: [[DOC:cN:sM, text], ...]
    text        TEXT NOT NULL,
    UNIQUE (corpus, chunk_id),
    FOREIGN KEY (corpus, doc_id) REFERENCES corpus_documents (corpus, doc_id) ON DELETE CASCADE
);

-- Sentence embeddings of chunks, for corpora added with dense search (float32, unit length).
CREATE TABLE corpus_vectors (
    chunk       INTEGER PRIMARY KEY REFERENCES corpus_chunks (id) ON DELETE CASCADE,
    model       TEXT NOT NULL,
    vector      BLOB NOT NULL
);

-- Answers given from a corpus, for the answer cache: served again only for the same question
-- (exactly, or by meaning with every must-preserve token equal) finding the same passages.
CREATE TABLE answer_cache (
    id              INTEGER PRIMARY KEY,
    corpus          TEXT NOT NULL REFERENCES corpora (name) ON DELETE CASCADE,
    query_key       TEXT NOT NULL,   -- the rewritten query, normalised
    anchors         TEXT NOT NULL,   -- JSON: its must-preserve tokens, normalised and sorted
    passages        TEXT NOT NULL,   -- JSON: the chunk ids the answer was given from, sorted
    answer          TEXT NOT NULL,
    conversation_id TEXT NOT NULL,
    reply_seq       INTEGER NOT NULL,
    call_id         TEXT NOT NULL,
    vector          BLOB,            -- the query's embedding, where the corpus is dense
    created_at      TEXT NOT NULL
);
CREATE INDEX answer_cache_by_key ON answer_cache (corpus, query_key);
