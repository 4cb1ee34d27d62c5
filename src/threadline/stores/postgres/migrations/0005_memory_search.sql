-- Full-text search over memory entries, for recall: a generated tsvector ('english': stemmed,
-- so "groups" finds "group") with a GIN index. Queries name the user beside the match.
ALTER TABLE memory_entries
    ADD COLUMN search tsvector GENERATED ALWAYS AS (to_tsvector('english', text)) STORED;
CREATE INDEX memory_entries_search ON memory_entries USING gin (search);
