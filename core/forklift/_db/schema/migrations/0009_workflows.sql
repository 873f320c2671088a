-- forklift schema, version 9: durable workflows (steps, sleep, events, dependencies, outbox).
--
-- Everything here is built on the job rows and the same worker; jobs that use none of it pay
-- nothing: no claim clause, no trigger that fires for them (the triggers' WHEN clauses test a
-- column of the row itself).
--
-- Parked and held jobs are 'scheduled': a sleeping job until its wake time, a job waiting for
-- an event until its deadline (or 9999-12-31 when it has none), a job waiting for its
-- dependencies at 9999-12-31. The stager finds them due at that time, or never; a trigger in
-- the transaction that publishes the event or settles the last dependency makes them available.

\ir ../functions/workflows_v1.sql

-- Whether some job waits for this one to settle (set at the dependent's commit): the only
-- thing the settle trigger below looks at, so a job nobody depends on costs it one test.
ALTER TABLE {s}.jobs ADD COLUMN has_dependents boolean NOT NULL DEFAULT false;

-- Steps and parked waits -------------------------------------------------------------------------

-- One row per named step of a job: a finished step's result (ctx.step), a sleep (ctx.sleep) or a
-- wait for an event (ctx.wait_for_event). Written fenced on the job's (id, fence): one statement
-- per step. No foreign key to jobs (deleting jobs stays as cheap as before for every job): the
-- leader's workflow-retention chore deletes the rows of jobs that are gone.
CREATE TABLE {s}.job_steps (
    job_id       bigint      NOT NULL,
    name         text        NOT NULL,
    state        text        NOT NULL CHECK (state IN ('completed', 'failed', 'sleeping', 'waiting')),
    result       jsonb,
    error        jsonb,
    fence        bigint      NOT NULL,
    attempt      integer     NOT NULL,
    started_at   timestamptz NOT NULL DEFAULT now(),
    finished_at  timestamptz,
    -- a sleep's wake time, a wait's deadline (NULL: none)
    wake_at      timestamptz,
    -- a wait: the event's name, the match (data @> match), the snapshot the wait began under and
    -- the event that ended it (NULL after a timeout)
    event        text,
    match        jsonb,
    snapshot     pg_snapshot,
    event_id     bigint,
    PRIMARY KEY (job_id, name)
) WITH (fillfactor = 80);

-- The open waits per event name: what a publish reads.
CREATE INDEX job_steps_waiting_idx ON {s}.job_steps (event) WHERE state = 'waiting';

-- Events ------------------------------------------------------------------------------------------

-- Published by app.publish_event, in the publisher's transaction; xact is that transaction, so a
-- wait can tell an event committed after it began from one it could already see.
CREATE TABLE {s}.events (
    id            bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name          text        NOT NULL,
    data          jsonb       NOT NULL DEFAULT 'null',
    published_at  timestamptz NOT NULL DEFAULT now(),
    expires_at    timestamptz NOT NULL,
    xact          xid8        NOT NULL DEFAULT pg_current_xact_id()
);
CREATE INDEX events_name_idx ON {s}.events (name, id);
CREATE INDEX events_expiry_idx ON {s}.events (expires_at);

-- At the publisher's commit (deferred): wake the waits the event matches.
CREATE CONSTRAINT TRIGGER events_wake AFTER INSERT ON {s}.events
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION {s}.events_wake();

-- Dependencies ------------------------------------------------------------------------------------

-- job_id waits for depends_on; policy says what it does if depends_on ends dead or cancelled.
CREATE TABLE {s}.job_deps (
    job_id      bigint NOT NULL,
    depends_on  bigint NOT NULL,
    policy      text   NOT NULL DEFAULT 'cancel' CHECK (policy IN ('cancel', 'run')),
    PRIMARY KEY (depends_on, job_id)
);
CREATE INDEX job_deps_job_idx ON {s}.job_deps (job_id);

-- At the dependent's commit (deferred): mark the dependency and look at it once under its lock.
CREATE CONSTRAINT TRIGGER job_deps_attached AFTER INSERT ON {s}.job_deps
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION {s}.deps_attached();

-- A dependency settled (or an operator deleted it while live): look at its dependents.
CREATE TRIGGER jobs_deps_settled AFTER UPDATE OF state ON {s}.jobs
    FOR EACH ROW
    WHEN (NEW.has_dependents AND NEW.state IN ('completed', 'cancelled', 'dead')
          AND OLD.state NOT IN ('completed', 'cancelled', 'dead'))
    EXECUTE FUNCTION {s}.deps_settled();
CREATE TRIGGER jobs_deps_deleted AFTER DELETE ON {s}.jobs
    FOR EACH ROW
    WHEN (OLD.has_dependents AND OLD.state IN ('scheduled', 'available', 'running', 'retryable'))
    EXECUTE FUNCTION {s}.deps_settled();

-- The transactional outbox ------------------------------------------------------------------------

-- Recorded in the caller's transaction; the leader's relay delivers each topic in id order to
-- the sink registered for it, at least once (a delivery whose mark was lost is made again).
CREATE TABLE {s}.outbox (
    id            bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    topic         text        NOT NULL,
    payload       jsonb       NOT NULL,
    state         text        NOT NULL DEFAULT 'pending'
                  CHECK (state IN ('pending', 'delivered', 'dead')),
    attempts      integer     NOT NULL DEFAULT 0,
    created_at    timestamptz NOT NULL DEFAULT now(),
    next_at       timestamptz NOT NULL DEFAULT now(),
    delivered_at  timestamptz,
    -- the relay delivering it now, and until when that claim holds
    claimed_by    text,
    claimed_until timestamptz,
    last_error    jsonb,
    -- the job a kind sink enqueued for it
    job_id        bigint,
    CONSTRAINT outbox_delivered_iff_at CHECK ((state = 'delivered') = (delivered_at IS NOT NULL))
) WITH (fillfactor = 80);
-- Each topic's pending messages in order: the relay's heads.
CREATE INDEX outbox_pending_idx ON {s}.outbox (topic, id) WHERE state = 'pending';
-- Purging delivered messages and listing dead ones.
CREATE INDEX outbox_done_idx ON {s}.outbox (state, id) WHERE state <> 'pending';
