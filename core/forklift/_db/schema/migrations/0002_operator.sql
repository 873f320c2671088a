-- forklift schema, version 2: what the operator API needs.

-- Dead letters per queue, newest last: stats count them (an index-only scan over dead rows, not
-- over every finished job) and the console lists them by queue and finish time.
CREATE INDEX jobs_dead_idx ON {s}.jobs (queue, finished_at) WHERE state = 'dead';

-- The stats window: jobs finished in the last minutes, per queue and state, with their run time,
-- read by an index-only scan so the cost follows the window's volume, not the retained history.
CREATE INDEX jobs_window_idx ON {s}.jobs (finished_at) INCLUDE (queue, state, attempted_at)
    WHERE state IN ('completed', 'dead');

-- Completed jobs that failed before: the only finished ones whose error history stats read.
CREATE INDEX jobs_retried_idx ON {s}.jobs (finished_at) WHERE state = 'completed' AND attempt > 1;

-- The audit trail is append-only: the API never updates or deletes it, and neither may anyone
-- else by accident. (A superuser who must purge it can drop this trigger, on purpose.)
CREATE FUNCTION {s}.audit_append_only() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'forklift audit rows are append-only: % refused', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END;
$$;

CREATE TRIGGER audit_append_only BEFORE UPDATE OR DELETE ON {s}.audit
    FOR EACH ROW EXECUTE FUNCTION {s}.audit_append_only();
