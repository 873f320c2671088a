-- The insert trigger's function, version 4 (installed by migration 0030; v3 was 0012's).
--
-- Version 3's wake-up, unchanged, plus paused kinds (forklift.ops.holds): a job inserted for a
-- kind an operator paused is held at once, in the inserting transaction, so no claim ever sees
-- it. What it adds to an insert while no kind is paused: a shared advisory lock and a look at
-- the flag {s}.kind_pauses_flag, each a plain expression (no query, no statement); only while
-- the flag is on does it look at `pauses` (one statement). The lock is what a kind's pause
-- waits for: the pause takes it exclusively, then turns the flag on, then holds the kind's
-- waiting jobs, so an insert either took the lock first (and has committed, to be held by the
-- pause, before the pause goes on) or took it after the pause committed (and sees the flag and
-- the pause, and holds its own rows).
CREATE OR REPLACE FUNCTION {s}.jobs_after_insert() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    q text;
    ready boolean;
    seen text := current_setting('forklift.queues_seen', true);
    known text;
BEGIN
    IF pg_advisory_xact_lock_shared(hashtext('forklift.pauses'), 0)::text IS NULL THEN
        NULL;
    END IF;
    FOR q, ready IN
        SELECT n.queue, bool_or(n.state = 'available') FROM new_jobs n GROUP BY n.queue
    LOOP
        -- schema and queue, each name framed by separators no queue name holds (forklift
        -- refuses control characters in names)
        known := chr(30) || TG_TABLE_SCHEMA || chr(31) || q || chr(30);
        IF seen IS NULL OR strpos(seen, known) = 0 THEN
            IF NOT EXISTS (SELECT FROM {s}.queues WHERE name = q) THEN
                INSERT INTO {s}.queues (name) VALUES (q) ON CONFLICT (name) DO NOTHING;
            END IF;
            -- bounded: a session writing to thousands of queues starts the list over
            seen := set_config('forklift.queues_seen',
                               CASE WHEN length(seen) < 8000 THEN seen ELSE '' END || known,
                               false);
        END IF;
        CONTINUE WHEN NOT ready;
        IF current_setting('transaction_isolation') <> 'read committed' THEN
            PERFORM pg_notify({channel}, q);
            CONTINUE;
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
    END LOOP;
    -- (two IFs: a condition with a subquery is a statement even when its first half is false)
    IF pg_sequence_last_value('{s}.kind_pauses_flag'::regclass) IS NOT NULL THEN
    IF EXISTS (SELECT FROM {s}.pauses WHERE target = 'kind') THEN
        -- where each would be without the pause, then out of the claim until the resume
        WITH c AS (
            SELECT j.id, j.state, j.run_at FROM new_jobs n
            JOIN {s}.pauses p ON p.target = 'kind' AND p.name = n.kind
            JOIN {s}.jobs j ON j.id = n.id
            WHERE j.state = ANY ('{scheduled,available,retryable}'::text[])
        ), h AS (
            INSERT INTO {s}.job_holds (job_id, state, run_at)
            SELECT id, state, run_at FROM c ON CONFLICT (job_id) DO NOTHING
        )
        UPDATE {s}.jobs t SET state = 'scheduled', run_at = '9999-12-30 00:00:00+00'
        FROM c WHERE t.id = c.id;
    END IF;
    END IF;
    RETURN NULL;
END;
$$;
