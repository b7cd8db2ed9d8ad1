-- API keys (issue 12): only the SHA-256 of each key is stored. Portable between SQLite and
-- PostgreSQL, like 0001.
CREATE TABLE IF NOT EXISTS api_keys (
    id         TEXT PRIMARY KEY,
    name       TEXT NOT NULL,
    key_hash   TEXT NOT NULL UNIQUE,
    scopes     TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    expires_at BIGINT,
    revoked_at BIGINT
);

-- Who a thread belongs to: the key that started it and the OpenAI `user` of the request
-- ('' when none). Written before the thread's first save, so no saved thread is ever without
-- an owner; threads from before this migration have none and are visible to admins only.
CREATE TABLE IF NOT EXISTS thread_owners (
    thread_id  TEXT PRIMARY KEY,
    owner_key  TEXT NOT NULL,
    end_user   TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS thread_owners_owner ON thread_owners (owner_key, end_user);
