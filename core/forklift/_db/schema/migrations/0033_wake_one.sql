-- forklift schema, version 33: the single enqueue wakes its queue itself.
--
-- The default one-job enqueue names its queue through jobs_wake_one() (functions/
-- jobs_wake_one_v1.sql), which registers the queue and wakes its idle workers before the row
-- is stored, and marks the statement; the insert trigger's new WHEN clause skips a marked
-- statement. Why: the statement trigger cost a single enqueue its transition table and a
-- second PL/pgSQL call. Measured on PostgreSQL 18 (pgbench, one client, fsync off, medians of
-- six alternated 3 s runs, one-row INSERT ... RETURNING): 309 µs through the trigger, 278
-- through jobs_wake_one(), 237 with no wake-up at all, 196 into a table of the same shape
-- with no trigger or constraint.
--
-- The trigger's function (functions/jobs_wake_v5.sql) does version 4's work, each queue's
-- part now in jobs_wake_queue() (functions/jobs_wake_queue_v1.sql), which the single enqueue
-- calls too. Every other insert (COPY, enqueue_many, delayed and unique jobs, batches, cron, a
-- plain INSERT) runs the trigger as before, which costs it one WHEN clause a statement.
-- Workers of every older version keep working: no statement of theirs changes.

\ir ../functions/jobs_wake_queue_v1.sql
\ir ../functions/jobs_wake_v5.sql
\ir ../functions/jobs_wake_one_v1.sql

DROP TRIGGER jobs_wake ON {s}.jobs;
CREATE TRIGGER jobs_wake AFTER INSERT ON {s}.jobs
    REFERENCING NEW TABLE AS new_jobs
    FOR EACH STATEMENT
    WHEN (current_setting('forklift.woken', true) IS DISTINCT FROM statement_timestamp()::text)
    EXECUTE FUNCTION {s}.jobs_after_insert();
