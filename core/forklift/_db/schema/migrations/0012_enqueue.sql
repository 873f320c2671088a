-- forklift schema, version 12: a cheaper insert trigger (functions/jobs_wake_v3.sql).
--
-- The same wake-up and queue registration as version 11, in two statements per insert
-- instead of four: a session remembers the queues it has recorded, and the advisory lock is
-- taken without a query. The trigger itself is unchanged; only its function is replaced.
\ir ../functions/jobs_wake_v3.sql
