-- The insert trigger's function, version 5 (installed by migration 0033; v4 was 0030's).
--
-- Version 4's work, with each queue's registration and wake-up in jobs_wake_queue()
-- (functions/jobs_wake_queue_v1.sql), which the single enqueue's jobs_wake_one() calls too.
-- The pauses' lock and flag, and the hold of a paused kind's new jobs, are version 4's.
CREATE OR REPLACE FUNCTION {s}.jobs_after_insert() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    q text;
    ready boolean;
BEGIN
    IF pg_advisory_xact_lock_shared(hashtext('forklift.pauses'), 0)::text IS NULL THEN
        NULL;
    END IF;
    FOR q, ready IN
        SELECT n.queue, bool_or(n.state = 'available') FROM new_jobs n GROUP BY n.queue
    LOOP
        IF {s}.jobs_wake_queue(q, ready) IS NULL THEN
            NULL;
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
