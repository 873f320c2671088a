-- forklift schema, version 7: flow control across the fleet (forklift._features.flow).
--
-- Locks with fencing tokens, per-key concurrency limits, rate limits (token buckets) and fair
-- share. A queue none of this touches keeps the claim it had: `queues.flow` stays false and the
-- lock-free claim never looks at anything below.

-- Locks ---------------------------------------------------------------------------------------

-- Every grant of a lock takes the next token of this one sequence, so a holder's token is
-- strictly greater than every earlier holder's, whichever key, process or host.
CREATE SEQUENCE {s}.lock_token_seq;

-- One row per held lock. A holder renews `expires_at` (unindexed: renewals stay HOT); a lock
-- whose expiry passed is free, and the next grant replaces the row under a new token. Release
-- deletes the row, matching the token.
CREATE TABLE {s}.locks (
    key          text             PRIMARY KEY,
    token        bigint           NOT NULL,
    owner        text             NOT NULL,  -- the process: a worker id, or an app's process id
    job_id       bigint,                     -- the job that holds it, if a job does
    worker_id    text,
    ttl          double precision NOT NULL CHECK (ttl > 0),
    acquired_at  timestamptz      NOT NULL DEFAULT now(),
    expires_at   timestamptz      NOT NULL
) WITH (fillfactor = 50);

-- Keys: per-key concurrency, rates and the fair-share partition ---------------------------------

-- A keyed job's key values, computed at enqueue: 'name' || chr(31) || 'value' per declared key,
-- the first one being the job's partition (fair share rotates over first keys). NULL for every
-- job whose kind declares no key, which is what keeps them out of everything below.
ALTER TABLE {s}.jobs ADD COLUMN keys text[];

-- The flow claim's second door into a queue: waiting keyed jobs of each (queue, kind) by
-- partition, in claim order, so the heads of many partitions are found without reading a
-- partition's backlog.
CREATE INDEX jobs_keyed_idx ON {s}.jobs (queue, kind, (keys[1]), priority, run_at, id)
    WHERE state = 'available' AND keys IS NOT NULL;
-- Running keyed jobs by any of their key values: the holders a per-key limit counts.
-- fastupdate off: the claim reads it at once, and a pending list would be read linearly.
CREATE INDEX jobs_keyed_running_idx ON {s}.jobs USING gin (keys) WITH (fastupdate = off)
    WHERE state = 'running' AND keys IS NOT NULL;

-- A queue's flow settings. `flow` routes its claims through the flow claim: set for good by
-- the first keyed job enqueued into it (trigger below), a rate, or fair share.
ALTER TABLE {s}.queues
    ADD COLUMN flow        boolean          NOT NULL DEFAULT false,
    ADD COLUMN fair        boolean          NOT NULL DEFAULT false,
    ADD COLUMN rate_limit  integer          CHECK (rate_limit IS NULL OR rate_limit >= 1),
    ADD COLUMN rate_per    double precision CHECK (rate_per IS NULL OR rate_per > 0),
    ADD COLUMN rate_burst  integer          CHECK (rate_burst IS NULL OR rate_burst >= 1);

-- One row per key name: its limits as declared in code (`declared`, written by workers that
-- declare the key) and as in force (the columns the claim reads). An operator's change sets the
-- columns and `overridden`, which keeps a later declaration from undoing it until reset.
CREATE TABLE {s}.flow_keys (
    name         text             PRIMARY KEY,
    concurrency  integer          CHECK (concurrency IS NULL OR concurrency >= 1),
    rate_limit   integer          CHECK (rate_limit IS NULL OR rate_limit >= 1),
    rate_per     double precision CHECK (rate_per IS NULL OR rate_per > 0),
    rate_burst   integer          CHECK (rate_burst IS NULL OR rate_burst >= 1),
    declared     jsonb            NOT NULL DEFAULT '{}',
    kinds        text[]           NOT NULL DEFAULT '{}',
    overridden   boolean          NOT NULL DEFAULT false,
    set_by       text,
    set_at       timestamptz,
    declared_at  timestamptz,
    updated_at   timestamptz      NOT NULL DEFAULT now()
);

-- One row per key value (and '@' || queue for a rated queue): what serialises the claims that
-- admit jobs for it, and its token bucket. A claim locks the rows of its candidates' values
-- (FOR UPDATE SKIP LOCKED: the newest version, or nothing while another claim holds it) and
-- stamps `claim_xid` on those it admits for; a claim whose snapshot cannot see the last stamp
-- might miss that claim's jobs when it counts the running ones, and passes the value by.
CREATE TABLE {s}.flow_values (
    key          text             PRIMARY KEY,
    claim_xid    xid8,
    tokens       double precision,
    refilled_at  timestamptz,
    created_at   timestamptz      NOT NULL DEFAULT now()
) WITH (fillfactor = 50);

\ir ../functions/flow_v1.sql

-- A keyed job is never claimable before its queue is flagged and its values have rows.
CREATE TRIGGER jobs_keyed AFTER INSERT ON {s}.jobs
    FOR EACH ROW WHEN (NEW.keys IS NOT NULL)
    EXECUTE FUNCTION {s}.jobs_keyed();
