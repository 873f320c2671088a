-- forklift schema, version 32: weighted jobs. A kind or a job may cost more than one of a
-- worker's slots, of its queue's concurrency limit and of its keys' limits, and take as many
-- tokens of a rate (forklift._features.flow.claim).
--
-- A nullable column only, written only for a job that weighs more than one: every other job
-- leaves it empty (weight 1) and pays nothing. Its queue is flagged `weighted` (and `flow`) by
-- the insert trigger in the enqueue's transaction, so only the flow claim takes it; a queue
-- without weighted jobs keeps the claim it had. `strict` says whether a queue's jobs are
-- claimed only for slots free now (fair share, a rate, a concurrency limit, or weights): one
-- column the claims and the hand-off read, computed by the server. Workers of older versions
-- keep working against it: they claim a weighted queue by the flow claim, one slot a job.

ALTER TABLE {s}.jobs ADD COLUMN weight smallint;
-- A schedule's weight (its kind's), so a job run from it by hand carries it as a tick's does.
ALTER TABLE {s}.schedules ADD COLUMN weight smallint;
ALTER TABLE {s}.queues ADD COLUMN weighted boolean NOT NULL DEFAULT false;
ALTER TABLE {s}.queues ADD COLUMN strict boolean GENERATED ALWAYS AS (
    fair OR rate_limit IS NOT NULL OR concurrency IS NOT NULL OR weighted) STORED;

-- Partitioned history (forklift._features.history) copies rows with SELECT *: keep its columns
-- in step.
DO $$
BEGIN
    IF to_regclass('{s}.jobs_history') IS NOT NULL THEN
        ALTER TABLE {s}.jobs_history ADD COLUMN IF NOT EXISTS weight smallint;
    END IF;
END $$;

\ir ../functions/flow_v2.sql

DROP TRIGGER jobs_keyed ON {s}.jobs;
CREATE TRIGGER jobs_keyed AFTER INSERT ON {s}.jobs
    FOR EACH ROW WHEN (NEW.keys IS NOT NULL OR NEW.weight IS NOT NULL)
    EXECUTE FUNCTION {s}.jobs_keyed();
