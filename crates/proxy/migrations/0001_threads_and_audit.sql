-- Portable between SQLite and PostgreSQL (the proxy talks to both through sqlx's Any driver).
CREATE TABLE IF NOT EXISTS threads (
    id               TEXT PRIMARY KEY,
    status           TEXT NOT NULL,
    question         TEXT NOT NULL,
    conversation_key TEXT,
    state            TEXT NOT NULL,
    created_at       BIGINT NOT NULL,
    updated_at       BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS threads_conversation ON threads (conversation_key, status);
CREATE INDEX IF NOT EXISTS threads_updated ON threads (updated_at);

CREATE TABLE IF NOT EXISTS audit_records (
    thread_id TEXT NOT NULL,
    seq       BIGINT NOT NULL,
    record    TEXT NOT NULL,
    PRIMARY KEY (thread_id, seq)
);
