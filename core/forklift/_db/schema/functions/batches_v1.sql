-- Batch bookkeeping, version 1 (installed by migration 0003): the functions the batch
-- triggers call, in the transaction that moved a target. A later version is a new file
-- (batches_v2.sql) that a later migration includes; schema.sql includes the current one.

-- Insert one callback job described by spec ({kind, queue, priority, max_attempts, retry,
-- args?}); its payload is spec.args, else the summary, and the summary is in meta.batch.
CREATE OR REPLACE FUNCTION {s}.batch_callback(spec jsonb, summary jsonb) RETURNS bigint
LANGUAGE sql AS $$
    INSERT INTO {s}.jobs (queue, kind, args, state, priority, max_attempts, retry, meta)
    VALUES (spec->>'queue', spec->>'kind', coalesce(spec->'args', summary), 'available',
            (spec->>'priority')::smallint, (spec->>'max_attempts')::integer,
            nullif(spec->'retry', 'null'::jsonb), jsonb_build_object('batch', summary))
    RETURNING id
$$;

-- Release held targets, lowest index first, while the window has room. The caller holds the
-- batch row's lock. Returns how many were released.
CREATE OR REPLACE FUNCTION {s}.batch_release(bid bigint) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    b      {s}.batches%ROWTYPE;
    room   integer;
    n      integer;
    queues text[];
    q      text;
BEGIN
    SELECT * INTO b FROM {s}.batches WHERE id = bid FOR UPDATE;
    IF NOT FOUND OR b.state <> 'running' OR b.cancel_requested_at IS NOT NULL THEN
        RETURN 0;
    END IF;
    room := CASE WHEN b.mode = 'serial' THEN 1 ELSE coalesce(b.max_parallel, 2147483647) END
            - b.in_flight;
    IF room <= 0 THEN
        RETURN 0;
    END IF;
    WITH nxt AS (
        SELECT id FROM {s}.jobs
        WHERE batch_id = bid AND state = 'scheduled' AND run_at = '9999-01-01 00:00:00+00'
        ORDER BY batch_index
        LIMIT room
        FOR UPDATE
    ), moved AS (
        UPDATE {s}.jobs AS j SET state = 'available', run_at = now()
        FROM nxt WHERE j.id = nxt.id
        RETURNING j.queue
    )
    SELECT count(*), array_agg(DISTINCT queue) INTO n, queues FROM moved;
    IF n > 0 THEN
        UPDATE {s}.batches SET in_flight = in_flight + n WHERE id = bid;
        FOREACH q IN ARRAY queues LOOP
            PERFORM pg_notify({channel}, q);
        END LOOP;
    END IF;
    RETURN n;
END;
$$;

-- Apply settled-count deltas to a batch (in the transaction that moved its targets): counters,
-- TTL and rate window; then release held targets into the window, or, when the last target has
-- settled, set the terminal state and insert the callbacks. Everything happens under the batch
-- row's lock, so concurrent settles of one batch are serialised and the terminal transition
-- happens exactly once. A negative settled delta (a requeue) reopens a finished batch.
CREATE OR REPLACE FUNCTION {s}.batch_apply(
    bid bigint, d_completed integer, d_failed integer, d_cancelled integer, d_flight integer
) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    b          {s}.batches%ROWTYPE;
    d_settled  integer := d_completed + d_failed + d_cancelled;
    bucket     bigint := floor(extract(epoch FROM now()) / 60)::bigint;
    final      text;
    summary    jsonb;
    done_id    bigint;
    success_id bigint;
BEGIN
    UPDATE {s}.batches SET
        completed = completed + d_completed,
        failed = failed + d_failed,
        cancelled = cancelled + d_cancelled,
        in_flight = in_flight + d_flight,
        state = CASE WHEN d_settled < 0 THEN 'running' ELSE state END,
        finished_at = CASE WHEN d_settled < 0 THEN NULL ELSE finished_at END,
        expires_at = now() + ttl,
        updated_at = now(),
        rate_prev = CASE WHEN rate_bucket = bucket THEN rate_prev
                         WHEN rate_bucket = bucket - 1 THEN rate_n ELSE 0 END,
        rate_n = CASE WHEN rate_bucket = bucket THEN rate_n ELSE 0 END + greatest(d_settled, 0),
        rate_bucket = bucket
    WHERE id = bid
    RETURNING * INTO b;
    IF NOT FOUND OR b.state <> 'running' THEN
        RETURN;  -- a pruned batch (its targets are ordinary jobs now), or already settled
    END IF;
    IF b.completed + b.failed + b.cancelled < b.total THEN
        PERFORM {s}.batch_release(bid);
        RETURN;
    END IF;

    final := CASE WHEN b.cancel_requested_at IS NOT NULL THEN 'cancelled'
                  WHEN b.completed = b.total THEN 'done'
                  WHEN b.completed = 0 THEN 'failed'
                  ELSE 'partial' END;
    summary := jsonb_build_object(
        'batch_id', b.id, 'state', final, 'kind', b.kind, 'caller', b.caller, 'key', b.key,
        'total', b.total, 'completed', b.completed, 'failed', b.failed,
        'cancelled', b.cancelled, 'settlement', b.settlements + 1, 'meta', b.meta);
    IF b.on_complete IS NOT NULL THEN
        done_id := {s}.batch_callback(b.on_complete, summary);
    END IF;
    IF b.on_success IS NOT NULL AND final = 'done' THEN
        success_id := {s}.batch_callback(b.on_success, summary);
    END IF;
    UPDATE {s}.batches SET
        state = final, finished_at = now(), settlements = settlements + 1,
        complete_job_id = coalesce(done_id, complete_job_id),
        success_job_id = coalesce(success_id, success_job_id)
    WHERE id = bid;
END;
$$;

-- One target moved from old_state to new_state (new_state 'cancelled' for a deleted live
-- target). Called by the triggers below, in the transaction that moved it.
CREATE OR REPLACE FUNCTION {s}.batch_target_moved(
    bid bigint, job bigint, old_state text, old_held boolean, new_state text, new_held boolean
) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    b        {s}.batches%ROWTYPE;
    was_term boolean := old_state IN ('completed', 'cancelled', 'dead');
    is_term  boolean := new_state IN ('completed', 'cancelled', 'dead');
    d_flight integer := 0;
BEGIN
    IF is_term AND NOT was_term THEN
        -- The common case: a target settled.
        d_flight := CASE WHEN old_held THEN 0 ELSE -1 END;
    ELSE
        SELECT * INTO b FROM {s}.batches WHERE id = bid FOR UPDATE;
        IF NOT FOUND THEN
            RETURN;
        END IF;
        IF NOT was_term AND NOT is_term THEN
            -- A failed attempt (running -> retryable or scheduled). Once the batch is being
            -- cancelled it is not tried again; the nested update counts it.
            IF b.cancel_requested_at IS NOT NULL THEN
                UPDATE {s}.jobs SET state = 'cancelled', finished_at = now()
                WHERE id = job AND state = new_state;
            END IF;
            RETURN;
        END IF;
        IF was_term AND NOT is_term AND NOT new_held THEN
            -- Requeued straight to claimable. If the window is full it waits its turn instead
            -- (unless the batch is being cancelled: then the operator's requeue runs as asked).
            IF b.cancel_requested_at IS NULL AND b.in_flight >=
               (CASE WHEN b.mode = 'serial' THEN 1
                     ELSE coalesce(b.max_parallel, 2147483647) END) THEN
                UPDATE {s}.jobs SET state = 'scheduled', run_at = '9999-01-01 00:00:00+00'
                WHERE id = job;
            ELSE
                d_flight := 1;
            END IF;
        END IF;
    END IF;
    PERFORM {s}.batch_apply(
        bid,
        (new_state = 'completed')::integer - (old_state = 'completed')::integer,
        (new_state = 'dead')::integer - (old_state = 'dead')::integer,
        (new_state = 'cancelled')::integer - (old_state = 'cancelled')::integer,
        d_flight);
END;
$$;

CREATE OR REPLACE FUNCTION {s}.jobs_batch_moved() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM {s}.batch_target_moved(
        NEW.batch_id, NEW.id,
        OLD.state, OLD.state = 'scheduled' AND OLD.run_at = '9999-01-01 00:00:00+00',
        NEW.state, NEW.state = 'scheduled' AND NEW.run_at = '9999-01-01 00:00:00+00');
    RETURN NULL;
END;
$$;

CREATE OR REPLACE FUNCTION {s}.jobs_batch_deleted() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM {s}.batch_target_moved(
        OLD.batch_id, OLD.id,
        OLD.state, OLD.state = 'scheduled' AND OLD.run_at = '9999-01-01 00:00:00+00',
        'cancelled', false);
    RETURN NULL;
END;
$$;

