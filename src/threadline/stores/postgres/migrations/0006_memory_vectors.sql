-- Dense recall: each memory entry's sentence embedding (unit-length float32), kept beside it
-- and deleted with it.
CREATE TABLE memory_vectors (
    user_id  text NOT NULL,
    id       text NOT NULL,
    model    text NOT NULL,
    vector   bytea NOT NULL,
    PRIMARY KEY (user_id, id),
    FOREIGN KEY (user_id, id) REFERENCES memory_entries (user_id, id) ON DELETE CASCADE
);
