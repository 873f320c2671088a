-- forklift schema, version 24: a job may carry a start-by deadline (`expires_at`). A job not
-- started by then is never started: it goes dead with the error code `expired`, its attempt
-- unspent (the worker checks the deadline of what it claimed before the handler starts; the
-- leader ends waiting jobs past theirs in batches).
--
-- A nullable column and a partial index that holds only waiting jobs with a deadline: a job
-- without one never enters it (its predicate is false), so it costs such a job nothing.
-- Workers of every older version keep working: they never read the column (they would run an
-- expired job they claim; the leader's sweep still ends the ones that wait).

ALTER TABLE {s}.jobs ADD COLUMN expires_at timestamptz;
CREATE INDEX jobs_expires_idx ON {s}.jobs (expires_at)
    WHERE expires_at IS NOT NULL AND state = ANY ('{scheduled,available,retryable}'::text[]);

-- Partitioned history (forklift._features.history) copies rows with SELECT *: keep its columns
-- in step.
DO $$
BEGIN
    IF to_regclass('{s}.jobs_history') IS NOT NULL THEN
        ALTER TABLE {s}.jobs_history ADD COLUMN expires_at timestamptz;
    END IF;
END $$;
