-- Dense recall: each memory entry's sentence embedding (unit-length float32), kept beside it
-- and deleted with it.
CREATE TABLE memory_vectors (
    user_id  TEXT NOT NULL,
    id       TEXT NOT NULL,
    model    TEXT NOT NULL,
    vector   BLOB NOT NULL,
    PRIMARY KEY (user_id, id),
    FOREIGN KEY (user_id, id) REFERENCES memory_entries (user_id, id) ON DELETE CASCADE
);
