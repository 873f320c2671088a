-- Durable workflows, version 2 (installed by migration 0013; v1 was 0009's): wake-ups follow the
-- rule of plain enqueues (functions/jobs_wake_v2.sql): a queue's workers are NOTIFYed only when
-- one of them left an idle mark there. v1 NOTIFYed at every event wake and dependency release,
-- so each such commit took NOTIFY's cluster-wide commit lock even when every worker was busy.
-- deps_attached and deps_settled are v1's, unchanged.

-- Jobs on queue q became available in this transaction: wake the queue's idle workers, if any.
-- The same barrier as the insert trigger's (the argument is written out there): the shared
-- advisory lock on (channel, queue) is taken before the marks are read and held until this
-- transaction ends, so a worker marking itself idle meanwhile fails its lock try and claims
-- again; the marks read are consumed (SKIP LOCKED: a mark another transaction is taking away
-- is left to it, and this one NOTIFYs too). VOLATILE: the marks are read with a new snapshot,
-- taken after the lock. A transaction that is not READ COMMITTED always NOTIFYs (its snapshot
-- may predate a mark).
CREATE OR REPLACE FUNCTION {s}.wake_queue(q text) RETURNS void
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        PERFORM pg_notify({channel}, q);
        RETURN;
    END IF;
    PERFORM pg_advisory_xact_lock_shared(hashtext({channel}), hashtext(q));
    IF EXISTS (SELECT FROM {s}.idle_workers WHERE queue = q) THEN
        DELETE FROM {s}.idle_workers WHERE ctid = ANY (ARRAY(
            SELECT ctid FROM {s}.idle_workers WHERE queue = q FOR UPDATE SKIP LOCKED));
        PERFORM pg_notify({channel}, q);
    END IF;
END;
$$;

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
        PERFORM {s}.wake_queue(q);
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
        PERFORM {s}.wake_queue(me.queue);
    END IF;
END;
$$;
