-- Dead letters grouped on the server, version 2 (installed by migration 0031): the bookkeeping
-- of version 1's trigger function as a plain function, so the jobs table's one state-change
-- trigger (functions/state_moves_v1.sql) calls it too. error_fingerprint and dead_group_key are
-- version 1's, unchanged.

-- Keep {s}.dead_letters equal to the dead jobs for one job: added (or updated) with its last
-- error's code and shape when it is dead now, removed when it left `dead` (requeue, delete,
-- retention). Plain values, not a row: the trigger on partitioned history passes its own rows.
CREATE OR REPLACE FUNCTION {s}.dead_letter_sync(
    job bigint, dead boolean, job_kind text, job_queue text, errors jsonb,
    job_finished_at timestamptz
) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_code text;
    v_shape text;
BEGIN
    IF NOT dead THEN
        DELETE FROM {s}.dead_letters WHERE job_id = job;
        RETURN;
    END IF;
    v_code := coalesce(errors -> -1 ->> 'code', 'unknown');
    v_shape := {s}.error_fingerprint(errors -> -1 ->> 'message');
    INSERT INTO {s}.dead_letters (job_id, group_key, kind, code, fingerprint, queue, finished_at)
    VALUES (job, {s}.dead_group_key(job_kind, v_code, v_shape), job_kind, v_code, v_shape,
            job_queue, coalesce(job_finished_at, now()))
    ON CONFLICT (job_id) DO UPDATE SET
        group_key = excluded.group_key, kind = excluded.kind, code = excluded.code,
        fingerprint = excluded.fingerprint, queue = excluded.queue,
        finished_at = excluded.finished_at;
END
$$;

-- The insert and delete triggers of jobs and of partitioned history (forklift._features.history).
CREATE OR REPLACE FUNCTION {s}.jobs_dead_moved() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' OR NEW.state <> 'dead' THEN
        PERFORM {s}.dead_letter_sync(OLD.id, false, NULL, NULL, NULL, NULL);
    ELSE
        PERFORM {s}.dead_letter_sync(NEW.id, true, NEW.kind, NEW.queue, NEW.errors,
                                     NEW.finished_at);
    END IF;
    RETURN NULL;
END
$$;
