-- Full-text search over memory entries, for recall. An external-content FTS5 index (no copy of
-- the text: deleting an entry removes its tokens), Porter-stemmed so "groups" finds "group".
-- Queries join back to memory_entries and name the user there.
CREATE VIRTUAL TABLE memory_fts USING fts5(
    text, content='memory_entries', content_rowid='rowid',
    tokenize='porter unicode61 remove_diacritics 2');
CREATE TRIGGER memory_entries_indexed AFTER INSERT ON memory_entries BEGIN
    INSERT INTO memory_fts (rowid, text) VALUES (new.rowid, new.text);
END;
CREATE TRIGGER memory_entries_unindexed AFTER DELETE ON memory_entries BEGIN
    INSERT INTO memory_fts (memory_fts, rowid, text) VALUES ('delete', old.rowid, old.text);
END;
CREATE TRIGGER memory_entries_reindexed AFTER UPDATE OF text ON memory_entries BEGIN
    INSERT INTO memory_fts (memory_fts, rowid, text) VALUES ('delete', old.rowid, old.text);
    INSERT INTO memory_fts (rowid, text) VALUES (new.rowid, new.text);
END;
INSERT INTO memory_fts (rowid, text) SELECT rowid, text FROM memory_entries;
