-- forklift schema, version 13: durable workflows wake like enqueues, in batches.
--
-- Event wakes, dependency releases and the stager NOTIFY only idle workers (wake_queue, in
-- functions/workflows_v2.sql, the rule of migration 0011). The stager ends the sleeps (and the
-- waits' timeouts) of the parked jobs it makes available in its own statement, one per batch,
-- so a resumed job finds its sleep over and writes nothing for it; this index is what it joins,
-- and what the jobs list reads to say why a scheduled job waits.

\ir ../functions/workflows_v2.sql

-- The parked steps: sleeps and waits not yet over (a few rows, whatever job_steps holds).
CREATE INDEX job_steps_parked_idx ON {s}.job_steps (job_id) WHERE state IN ('sleeping', 'waiting');
