-- forklift schema, version 25: a job may carry a start-by deadline (`expires_at`): not started
-- by then, it is never started and goes dead with the error code `expired`, its attempt unspent
-- (the worker checks the deadline of what it claimed before the handler starts; the leader ends
-- waiting jobs past theirs in batches). And a debounce key (`debounce_key`, with the latest
-- start its debounce allows, `debounce_until`): one waiting job per kind and key.
--
-- Nullable columns and partial indexes that hold only jobs that use them: a job without a
-- deadline or a debounce key never enters them (their predicates are false), so it pays nothing.
-- Workers of every older version keep working: they never read the columns (they would run an
-- expired job they claim; the leader's sweep still ends the ones that wait).

ALTER TABLE {s}.jobs ADD COLUMN expires_at timestamptz;
CREATE INDEX jobs_expires_idx ON {s}.jobs (expires_at)
    WHERE expires_at IS NOT NULL AND state = ANY ('{scheduled,available,retryable}'::text[]);

-- Debounce: at most one waiting job per kind and debounce key, a job never yet attempted that
-- waits for its time; an enqueue with the key updates that one (its payload, its start) in one
-- INSERT ... ON CONFLICT on this index. A job leaves it as it becomes due or starts, so the next
-- enqueue makes a new job. A job without a key never enters it.
ALTER TABLE {s}.jobs ADD COLUMN debounce_key text;
ALTER TABLE {s}.jobs ADD COLUMN debounce_until timestamptz;
CREATE UNIQUE INDEX jobs_debounce_idx ON {s}.jobs (kind, debounce_key)
    WHERE debounce_key IS NOT NULL AND state = 'scheduled' AND attempted_at IS NULL;

-- Partitioned history (forklift._features.history) copies rows with SELECT *: keep its columns
-- in step, 0023's tenant and enqueued_by included (that migration did not add them to a
-- history table created before it).
DO $$
BEGIN
    IF to_regclass('{s}.jobs_history') IS NOT NULL THEN
        ALTER TABLE {s}.jobs_history ADD COLUMN IF NOT EXISTS tenant text;
        ALTER TABLE {s}.jobs_history ADD COLUMN IF NOT EXISTS enqueued_by text;
        ALTER TABLE {s}.jobs_history ADD COLUMN IF NOT EXISTS expires_at timestamptz;
        ALTER TABLE {s}.jobs_history ADD COLUMN IF NOT EXISTS debounce_key text;
        ALTER TABLE {s}.jobs_history ADD COLUMN IF NOT EXISTS debounce_until timestamptz;
        CREATE INDEX IF NOT EXISTS jobs_history_tenant_idx ON {s}.jobs_history (tenant, id)
            WHERE tenant IS NOT NULL;
    END IF;
END $$;
