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
