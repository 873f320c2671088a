-- forklift schema, version 5: what the worker's services record on their rows.

-- Restarts of the worker's services (name -> count), written with the heartbeat.
ALTER TABLE {s}.workers ADD COLUMN restarts jsonb NOT NULL DEFAULT '{}';

-- The kinds a worker has handlers for (kind -> {"retry": backoff, "lease_expiries": n}): the
-- claim takes only those, explain names a kind no live worker knows, and the rescuer reads a
-- kind's backoff and lease-expiry limit from here (the leader need not know the kind).
ALTER TABLE {s}.workers ADD COLUMN kinds jsonb;

-- Workers that exited stay listed for a while (pruned by the leader after a day): when, and how
-- (drained; lease_lost: drained after some of its leases were lost; killed: its heartbeat
-- stopped and the leader marked it).
ALTER TABLE {s}.workers ADD COLUMN exited_at timestamptz;
ALTER TABLE {s}.workers ADD COLUMN exit_reason text
    CHECK (exit_reason IN ('drained', 'lease_lost', 'killed'));
ALTER TABLE {s}.workers DROP CONSTRAINT workers_state_check;
ALTER TABLE {s}.workers ADD CONSTRAINT workers_state_check
    CHECK (state IN ('running', 'draining', 'exited'));

-- Attempts in a row of a job that ended by lease expiry (reset by any other outcome): after
-- the kind's limit the job goes dead with worker_lost.
ALTER TABLE {s}.jobs ADD COLUMN lost integer NOT NULL DEFAULT 0;

-- The claim walks the index once per (queue, kind) of the worker: a backlog of a kind it does
-- not know is never read.
DROP INDEX {s}.jobs_claim_idx;
CREATE INDEX jobs_claim_idx ON {s}.jobs (queue, kind, priority, run_at, id) WHERE state = 'available';
