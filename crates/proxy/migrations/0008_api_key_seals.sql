-- A key's row sealed by the server (HMAC-SHA-256 keyed from the audit signing key, which is kept
-- out of the database): id, secret hash, scopes, expiry and revocation. A row the database's
-- holder wrote or changed (a hash of a secret they know, a scope added, a revocation undone)
-- has no valid seal and is no key. Rows from before this column are sealed once by the
-- operator (`proofgate keys seal`).
ALTER TABLE api_keys ADD COLUMN seal TEXT;
