-- Durable workflows, version 1 (installed by migration 0009): waking parked waits when an event
-- commits, and releasing (or cancelling) jobs held for their dependencies. A later version is a
-- new file (workflows_v2.sql) that a later migration includes; schema.sql includes the current.
--
-- Both wake-ups happen in the transaction that causes them (the publish, the settle), and both
-- close the race with the transaction that registers the waiter by a lock taken at COMMIT time
-- only, so neither side ever waits for the other's open transaction to end:
--
-- * events: the publisher's deferred trigger takes a shared lock on the event name; a wait takes
--   it exclusively while it registers (forklift._features.durable.waits). Whichever is first, the other
--   sees it: a wait registered first is found and woken by the publish; an event committed
--   first is found by the registering wait (it commits after the wait's snapshot was taken).
-- * dependencies: the dependent's deferred trigger updates the dependency's row (marking it
--   has_dependents) at commit; a settle of that row either commits first (and the dependent,
--   looking under the row lock, sees it settled) or waits for the dependent's commit (and then
--   fires jobs_deps_settled, which sees the dependent's rows).

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
            RETURNING j.queue
        )
        SELECT DISTINCT queue FROM woken
    LOOP
        PERFORM pg_notify({channel}, q);
    END LOOP;
    RETURN NULL;
END;
$$;

-- Look at one held dependent under its row lock: cancel it when a dependency ended dead or
-- cancelled (policy 'cancel'), release it when none is left unsettled. A dependency whose row is
-- gone counts as cancelled (only an operator's delete of a live job removes one unsettled).
CREATE OR REPLACE FUNCTION {s}.deps_release(dependent bigint) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    me       {s}.jobs%ROWTYPE;
    pending  integer;
    failed   bigint;
    why      text;
    pol      text;
BEGIN
    SELECT * INTO me FROM {s}.jobs
    WHERE id = dependent AND state = 'scheduled' AND run_at = '9999-12-31 00:00:00+00'
    FOR UPDATE;
    IF NOT FOUND THEN
        RETURN;  -- released, cancelled or deleted already
    END IF;
    SELECT count(*) FILTER (WHERE j.state IN ('scheduled', 'available', 'running', 'retryable')),
           min(d.depends_on) FILTER (WHERE j.id IS NULL OR j.state IN ('cancelled', 'dead')),
           min(coalesce(j.state, 'deleted')) FILTER (WHERE j.id IS NULL OR j.state IN ('cancelled', 'dead')),
           min(d.policy)
      INTO pending, failed, why, pol
      FROM {s}.job_deps d LEFT JOIN {s}.jobs j ON j.id = d.depends_on
     WHERE d.job_id = dependent;
    IF failed IS NOT NULL AND pol = 'cancel' THEN
        UPDATE {s}.jobs SET state = 'cancelled', finished_at = now(),
            errors = errors || jsonb_build_array(jsonb_build_object(
                'code', 'dependency_failed', 'type', 'DependencyFailed',
                'message', format('dependency %s ended %s', failed, why),
                'attempt', attempt, 'at', now(), 'dependency', failed))
        WHERE id = dependent;
    ELSIF pending = 0 THEN
        UPDATE {s}.jobs SET state = 'available', run_at = now() WHERE id = dependent;
        PERFORM pg_notify({channel}, me.queue);
    END IF;
END;
$$;

CREATE OR REPLACE FUNCTION {s}.deps_attached() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE {s}.jobs SET has_dependents = true WHERE id = NEW.depends_on;
    PERFORM {s}.deps_release(NEW.job_id);
    RETURN NULL;
END;
$$;

CREATE OR REPLACE FUNCTION {s}.deps_settled() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    settled bigint := CASE WHEN TG_OP = 'DELETE' THEN OLD.id ELSE NEW.id END;
    d bigint;
BEGIN
    FOR d IN SELECT job_id FROM {s}.job_deps WHERE depends_on = settled ORDER BY job_id LOOP
        PERFORM {s}.deps_release(d);
    END LOOP;
    RETURN NULL;
END;
$$;
