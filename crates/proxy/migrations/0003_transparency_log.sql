-- The append-only log of signed thread heads (issue 11): one leaf per signed head (or trail
-- deletion), and the RFC 6962 stored hashes (c2sp tlog: ~2 per leaf) that proofs are built
-- from. One sequence for every replica: a leaf's index is its primary key, so two replicas
-- that try to append at the same index cannot both succeed (the loser retries).
CREATE TABLE IF NOT EXISTS log_leaves (
    idx        BIGINT PRIMARY KEY,
    thread_id  TEXT NOT NULL,
    seq        BIGINT NOT NULL,
    head_hash  TEXT NOT NULL,
    deleted    BIGINT NOT NULL,
    note       TEXT NOT NULL,
    at         BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS log_leaves_thread ON log_leaves (thread_id, idx);

CREATE TABLE IF NOT EXISTS log_hashes (
    idx   BIGINT PRIMARY KEY,
    hash  TEXT NOT NULL
);
