-- forklift schema, version 11: wake only idle workers (no NOTIFY per committing enqueue).
--
-- A worker about to wait for work on a queue leaves a row here (forklift._worker.idle); the
-- insert trigger (functions/jobs_wake_v2.sql) consumes a queue's rows and NOTIFYs only when it
-- found one. Without a row nobody is woken, and concurrent producers' commits are not
-- serialised on NOTIFY's cluster-wide lock. The race with a worker going idle is closed by an
-- advisory lock on (schema, queue): see the function.
-- No key: a worker replaces its marks (a new row each time) instead of upserting them, so
-- neither side ever waits on a row the other has locked. Unlogged: a mark is written at every
-- wait, and a logged one cost the idle worker a WAL flush each time; after a crash the table is
-- empty and nobody is woken until workers, re-listening, mark themselves again.
CREATE UNLOGGED TABLE {s}.idle_workers (
    queue      text NOT NULL,
    worker_id  text NOT NULL
);
CREATE INDEX idle_workers_queue_idx ON {s}.idle_workers (queue);

\ir ../functions/jobs_wake_v2.sql
