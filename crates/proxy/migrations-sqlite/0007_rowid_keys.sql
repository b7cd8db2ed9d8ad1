-- SQLite only (PostgreSQL has no rowid: its tables are heaps with the key as one index).
-- A SQLite table is a B-tree keyed by its rowid, and a primary key other than `INTEGER
-- PRIMARY KEY` is a second B-tree beside it: every insert wrote both. The log's leaf and hash
-- indexes become the rowid itself, and thread owners (small rows, looked up by thread) are
-- stored in their key's B-tree (WITHOUT ROWID). Together with 0006, a request's commit writes
-- about 16 pages to the write-ahead log instead of about 21.
CREATE TABLE log_leaves_by_rowid (
    idx        INTEGER PRIMARY KEY,
    thread_id  TEXT NOT NULL,
    seq        BIGINT NOT NULL,
    head_hash  TEXT NOT NULL,
    deleted    BIGINT NOT NULL,
    note       TEXT NOT NULL,
    at         BIGINT NOT NULL
);
INSERT INTO log_leaves_by_rowid (idx, thread_id, seq, head_hash, deleted, note, at)
    SELECT idx, thread_id, seq, head_hash, deleted, note, at FROM log_leaves ORDER BY idx;
DROP TABLE log_leaves;
ALTER TABLE log_leaves_by_rowid RENAME TO log_leaves;
CREATE INDEX log_leaves_thread ON log_leaves (thread_id, idx);

CREATE TABLE log_hashes_by_rowid (
    idx   INTEGER PRIMARY KEY,
    hash  TEXT NOT NULL
);
INSERT INTO log_hashes_by_rowid (idx, hash) SELECT idx, hash FROM log_hashes ORDER BY idx;
DROP TABLE log_hashes;
ALTER TABLE log_hashes_by_rowid RENAME TO log_hashes;

CREATE TABLE thread_owners_by_key (
    thread_id  TEXT NOT NULL PRIMARY KEY,
    owner_key  TEXT NOT NULL,
    end_user   TEXT NOT NULL,
    created_at BIGINT NOT NULL
) WITHOUT ROWID;
INSERT INTO thread_owners_by_key (thread_id, owner_key, end_user, created_at)
    SELECT thread_id, owner_key, end_user, created_at FROM thread_owners;
DROP TABLE thread_owners;
ALTER TABLE thread_owners_by_key RENAME TO thread_owners;
CREATE INDEX thread_owners_owner ON thread_owners (owner_key, end_user, created_at);
