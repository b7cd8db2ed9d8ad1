-- Index only the threads the indexed reads look for, so that a finished thread (nearly every
-- request's) adds no entry to either index. Portable between SQLite and PostgreSQL (both have
-- partial indexes). Only threads waiting for the user's answers have a conversation key, and
-- the maintenance loop lists only the threads still processing or waiting. A read uses an
-- index only when its WHERE implies the index's (the storage tests check the plans):
-- `conversation_key = $1` implies `conversation_key IS NOT NULL`, and the status reads repeat
-- `status IN ('processing', 'awaiting_input')` word for word.
--
-- A key's listing of its threads (newest started first) is read from the owners' index alone,
-- 200 entries, instead of sorting every thread the key ever started.
DROP INDEX IF EXISTS threads_conversation;
CREATE INDEX threads_conversation ON threads (conversation_key, status)
    WHERE conversation_key IS NOT NULL;
DROP INDEX IF EXISTS threads_status;
CREATE INDEX threads_status ON threads (status, updated_at)
    WHERE status IN ('processing', 'awaiting_input');
DROP INDEX IF EXISTS thread_owners_owner;
CREATE INDEX thread_owners_owner ON thread_owners (owner_key, end_user, created_at);
