-- The maintenance loop lists threads by status (processing, awaiting_input) every interval:
-- without this index that read every thread, which grows with every request ever answered.
CREATE INDEX IF NOT EXISTS threads_status ON threads (status, updated_at);
