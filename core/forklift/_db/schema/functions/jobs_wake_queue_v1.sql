-- One queue's part of an insert's wake-up, version 1 (installed by migration 0033): what the
-- insert trigger (functions/jobs_wake_v5.sql) does for each queue of its rows, and the single
-- enqueue (functions/jobs_wake_one_v1.sql) for its one. Returns the queue.
--
-- The queue is registered, once a session (forklift.queues_seen lists the ones this session
-- has seen, each framed by separators no queue name holds: forklift refuses control
-- characters in names). When a job of it is due now (`ready`), the queue's idle workers are
-- woken: outside READ COMMITTED always, since the snapshot may predate a worker's mark;
-- otherwise only when a worker left its mark (forklift._worker.idle), looked for under the
-- queue's wake lock held shared to the end of the transaction, and the marks found are taken.
CREATE OR REPLACE FUNCTION {s}.jobs_wake_queue(q text, ready boolean) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    seen text := current_setting('forklift.queues_seen', true);
    known text := chr(30) || '{s}' || chr(31) || q || chr(30);
BEGIN
    IF seen IS NULL OR strpos(seen, known) = 0 THEN
        IF NOT EXISTS (SELECT FROM {s}.queues WHERE name = q) THEN
            INSERT INTO {s}.queues (name) VALUES (q) ON CONFLICT (name) DO NOTHING;
        END IF;
        -- bounded: a session writing to thousands of queues starts the list over
        seen := set_config('forklift.queues_seen',
                           CASE WHEN length(seen) < 8000 THEN seen ELSE '' END || known,
                           false);
    END IF;
    IF NOT ready THEN
        RETURN q;
    END IF;
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        PERFORM pg_notify({channel}, q);
        RETURN q;
    END IF;
    -- (void cast to text is never NULL: the IF only evaluates the call)
    IF pg_advisory_xact_lock_shared(hashtext({channel}), hashtext(q))::text IS NULL THEN
        NULL;
    END IF;
    IF EXISTS (SELECT FROM {s}.idle_workers WHERE queue = q) THEN
        DELETE FROM {s}.idle_workers WHERE ctid = ANY (ARRAY(
            SELECT ctid FROM {s}.idle_workers WHERE queue = q FOR UPDATE SKIP LOCKED));
        PERFORM pg_notify({channel}, q);
    END IF;
    RETURN q;
END;
$$;
