-- The autoscaling signal: how many workers a queue needs now (forklift.ops.scale explains it).
--
-- One integer, so a KEDA `postgresql` scaler can run `SELECT {s}.desired_workers('mail')` and
-- the Prometheus gauge and `forklift queues scale` read the same number. Every count is capped
-- (a LIMIT inside the index walk), so the cost does not grow with the backlog.
--
--   demand   running jobs + jobs that could start now: available, and scheduled or retryable
--            jobs already due (with no worker left, nobody stages them: counting them keeps the
--            wake path from zero workers intact)
--   rate     completions a second over the last closed minute (the stats rollup), and the
--            per-slot rate: rate / running
--   slots    running + the slots that clear the waiting jobs within p_target seconds at the
--            per-slot rate; with no rate known (no completions yet, or long jobs), one slot for
--            each waiting job
--   workers  ceil(slots / per worker), between ceil(running / per worker) (never fewer than
--            the jobs in flight need: scale-in only removes idle capacity) and p_max; zero only
--            when nothing runs and nothing waits
--
-- per worker: p_per_worker, else the largest slot count of the queue's live workers, else 10
-- (forklift worker's default --concurrency).
--
-- scale_signal returns the inputs beside the answer (for `forklift queues scale --json`);
-- desired_workers is its last column, so the two can never disagree.
CREATE FUNCTION {s}.scale_signal(
    p_queue text,
    p_per_worker integer DEFAULT NULL,
    p_max integer DEFAULT 100,
    p_target double precision DEFAULT 30,
    OUT per_worker integer,
    OUT running integer,
    OUT waiting integer,
    OUT rate double precision,
    OUT desired integer
)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    cap integer;
    slots double precision;
    floor_workers integer;
BEGIN
    IF p_per_worker IS NOT NULL AND p_per_worker < 1 THEN
        RAISE EXCEPTION 'per_worker must be at least 1, not %', p_per_worker
            USING ERRCODE = '22023';
    END IF;
    IF p_max < 0 THEN
        RAISE EXCEPTION 'max must be 0 or more, not %', p_max USING ERRCODE = '22023';
    END IF;
    IF p_target IS NULL OR p_target <= 0 THEN
        RAISE EXCEPTION 'target must be above 0 seconds, not %', p_target USING ERRCODE = '22023';
    END IF;
    per_worker := coalesce(p_per_worker, (
        SELECT max(w.slots) FROM {s}.workers w
        WHERE p_queue = ANY (w.queues) AND w.state = 'running'
          AND w.heartbeat_at > now() - interval '2 minutes'), 10);
    cap := greatest(p_max, 1) * per_worker;
    SELECT count(*) INTO running FROM (
        SELECT 1 FROM {s}.jobs WHERE queue = p_queue AND state = 'running' LIMIT cap) r;
    SELECT count(*) INTO waiting FROM (
        (SELECT 1 FROM {s}.jobs WHERE queue = p_queue AND state = 'available' LIMIT cap)
        UNION ALL
        (SELECT 1 FROM {s}.jobs
         WHERE state IN ('scheduled', 'retryable') AND run_at <= now() AND queue = p_queue
         LIMIT cap)) w;
    IF running = 0 AND waiting = 0 THEN
        desired := 0;
        RETURN;
    END IF;
    SELECT m.completed / 60.0 INTO rate FROM {s}.stats_minutes m
    WHERE m.queue = p_queue AND m.minute >= floor(extract(epoch FROM now()) / 60)::bigint - 2
    ORDER BY m.minute DESC LIMIT 1;
    IF rate IS NOT NULL AND rate > 0 AND running > 0 THEN
        slots := running + waiting / ((rate / running) * p_target);
    ELSE
        slots := running + waiting;
    END IF;
    floor_workers := ceil(running::double precision / per_worker)::integer;
    desired := least(p_max, greatest(floor_workers, ceil(slots / per_worker)::integer, 1));
END
$$;

CREATE FUNCTION {s}.desired_workers(
    p_queue text,
    p_per_worker integer DEFAULT NULL,
    p_max integer DEFAULT 100,
    p_target double precision DEFAULT 30
) RETURNS integer
LANGUAGE sql STABLE AS $$
    SELECT desired FROM {s}.scale_signal(p_queue, p_per_worker, p_max, p_target)
$$;
