-- forklift schema, version 26: priority aging. A queue may age its waiting jobs
-- (`priority_aging`, seconds): every that many seconds a job has been available raises its
-- priority one step (its number one lower), never past the queue's `aging_top`. The leader does
-- it in bounded batches; a job keeps the priority it was given in `priority_base`, written the
-- first time aging changes it (NULL: aging never touched it).
--
-- Nullable columns and one defaulted column on the small queues table: a queue without aging is
-- never read by the aging chore and its jobs pay nothing. Workers of every older version keep
-- working: they never read the columns (their leader does not age jobs).

ALTER TABLE {s}.queues ADD COLUMN priority_aging double precision
    CHECK (priority_aging IS NULL OR priority_aging > 0);
ALTER TABLE {s}.queues ADD COLUMN aging_top smallint NOT NULL DEFAULT 0;
ALTER TABLE {s}.jobs ADD COLUMN priority_base smallint;

-- Partitioned history (forklift._features.history) copies rows with SELECT *: keep its columns
-- in step.
DO $$
BEGIN
    IF to_regclass('{s}.jobs_history') IS NOT NULL THEN
        ALTER TABLE {s}.jobs_history ADD COLUMN IF NOT EXISTS priority_base smallint;
    END IF;
END $$;
