-- Audit format 2: a trail's THREAD_STARTED names its policy document (the rules, variables and
-- translation vocabulary) by the SHA-256 of its canonical JSON instead of holding it; each
-- document is stored once per policy version and handed out with the trails that name it.
CREATE TABLE IF NOT EXISTS policy_documents (
    hash       TEXT PRIMARY KEY,
    document   TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
