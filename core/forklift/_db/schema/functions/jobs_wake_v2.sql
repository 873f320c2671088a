-- The insert trigger's function, version 2 (installed by migration 0011; v1 was 0001's).
--
-- One pass over the statement's new rows per queue: the queue is recorded (a read first: the
-- INSERT ... ON CONFLICT cost ~20 us a statement even when the queue was known), and workers
-- are woken only when one of them may be waiting idle on that queue.
--
-- Why not NOTIFY on every insert: PostgreSQL serialises every notifying commit on one
-- cluster-wide lock, taken before the commit record is written and held until it is flushed,
-- so concurrent producers that all NOTIFY commit one after another (no group commit). A worker
-- about to wait for work leaves a mark in idle_workers (one row per queue it serves); an insert
-- that makes jobs available on a queue NOTIFYs only if it sees a mark there, and takes away
-- the marks no other producer is taking (SKIP LOCKED: producers never wait on each other, and
-- one that sees a mark another is taking NOTIFYs too, so a rollback of that one strands
-- nothing). A busy worker has no mark: it claims again as soon as it has room.
--
-- The race with a worker going idle, and why no job is stranded:
--   a producer takes a shared advisory lock on (schema, queue) before it looks for marks, and
--   holds it until its transaction ends; a worker marks itself idle and, in the same statement,
--   tries the exclusive lock on the same key (never waiting), then claims once more before it
--   waits. If the try succeeds, every producer that looked for marks before the mark was
--   committed had already finished (its jobs are visible to that last claim), and every later
--   one waits for the mark's commit and then sees it (a new snapshot per statement). If the try
--   fails, a producer was in flight: the worker claims again after a short, growing delay until
--   a try succeeds. Either way LISTEN stays a hint: the worker's poll is the backstop, and a
--   transaction that is not READ COMMITTED (its snapshot may predate the mark) always NOTIFYs.
CREATE OR REPLACE FUNCTION {s}.jobs_after_insert() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    q text;
    ready boolean;
BEGIN
    FOR q, ready IN
        SELECT n.queue, bool_or(n.state = 'available') FROM new_jobs n GROUP BY n.queue
    LOOP
        IF NOT EXISTS (SELECT FROM {s}.queues WHERE name = q) THEN
            INSERT INTO {s}.queues (name) VALUES (q) ON CONFLICT (name) DO NOTHING;
        END IF;
        CONTINUE WHEN NOT ready;
        IF current_setting('transaction_isolation') <> 'read committed' THEN
            PERFORM pg_notify({channel}, q);
            CONTINUE;
        END IF;
        PERFORM pg_advisory_xact_lock_shared(hashtext({channel}), hashtext(q));
        IF EXISTS (SELECT FROM {s}.idle_workers WHERE queue = q) THEN
            DELETE FROM {s}.idle_workers WHERE ctid = ANY (ARRAY(
                SELECT ctid FROM {s}.idle_workers WHERE queue = q FOR UPDATE SKIP LOCKED));
            PERFORM pg_notify({channel}, q);
        END IF;
    END LOOP;
    RETURN NULL;
END;
$$;
