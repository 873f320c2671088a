-- Durable workflows, version 3 (installed by migration 0030; v2 was 0013's): an event ends the
-- wait it matches as before, but a job held by a pause (forklift.ops.holds) stays held: the
-- resume makes it available, its wait over. Only events_wake changes; the rest is v2's.

CREATE OR REPLACE FUNCTION {s}.events_wake() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    q text;
BEGIN
    PERFORM pg_advisory_xact_lock_shared(hashtextextended('forklift.event:' || NEW.name, 0));
    FOR q IN
        WITH hit AS (
            UPDATE {s}.job_steps AS w SET
                state = 'completed', result = NEW.data, event_id = NEW.id, finished_at = now()
            WHERE w.state = 'waiting' AND w.event = NEW.name
              AND (w.match IS NULL OR NEW.data @> w.match)
              AND NOT pg_visible_in_snapshot(NEW.xact, w.snapshot)
            RETURNING w.job_id
        ), woken AS (
            UPDATE {s}.jobs AS j SET state = 'available', run_at = now()
            FROM hit WHERE j.id = hit.job_id AND j.state = 'scheduled'
              AND NOT EXISTS (SELECT FROM {s}.job_holds h WHERE h.job_id = j.id)
            RETURNING j.queue
        )
        SELECT DISTINCT queue FROM woken
    LOOP
        PERFORM {s}.wake_queue(q);
    END LOOP;
    RETURN NULL;
END;
$$;
