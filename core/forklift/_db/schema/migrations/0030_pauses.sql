-- forklift schema, version 30: pause and resume a workflow or a kind (forklift.ops.holds).
--
-- Two new tables, a flag (a sequence) and two new function versions. A paused job is moved out of the claimable set
-- (held `scheduled` at 9999-12-30, where it was kept in job_holds), so the claim statement does
-- not change and a job of a kind nobody paused pays nothing there. The insert trigger
-- (functions/jobs_wake_v4.sql) holds new jobs of a paused kind in their own transaction; an
-- event no longer wakes a held job (functions/workflows_v3.sql). Workers of older versions
-- keep working against it: they never pause, and never see a held job as claimable.

-- Paused workflows and kinds (forklift.ops.holds): while a row is here, the jobs it covers are
-- held out of the claim. `name` is the kind's name, or the workflow job's id.
CREATE TABLE {s}.pauses (
    target     text        NOT NULL CHECK (target IN ('kind', 'workflow')),
    name       text        NOT NULL,
    paused_by  text,
    paused_at  timestamptz NOT NULL DEFAULT now(),
    reason     text,
    PRIMARY KEY (target, name)
);
-- The jobs a pause holds, and where each would be without it (its state and run_at; a running
-- job's row says 'running' until it parks at its next step boundary). A held job waits
-- `scheduled` at 9999-12-30, a time apart from dependencies' hold, so no stager, dependency
-- release or event wake moves it; the resume puts it back.
CREATE TABLE {s}.job_holds (
    job_id  bigint      PRIMARY KEY,
    state   text        NOT NULL,
    run_at  timestamptz NOT NULL
);
-- Whether some kind may be paused, read by the insert trigger without a query
-- (pg_sequence_last_value: NULL until set, so off): while it is off, an insert never looks at
-- `pauses`. A kind's pause turns it on under the pause lock before it commits; a resume turns it
-- off, under the same lock, when no kind pause is left (forklift.ops.holds).
CREATE SEQUENCE {s}.kind_pauses_flag;

\ir ../functions/jobs_wake_v4.sql
\ir ../functions/workflows_v3.sql
