-- forklift schema, version 27: an attempt's own log (ctx.log, and the logging records of a kind
-- that captures them), one row per attempt that logged, written with the attempt's outcome in
-- the same transaction; shown by `forklift jobs show` and the console's job detail.
--
-- A new table only: an attempt that logs nothing writes no row, and no job pays anything. No
-- foreign key to jobs (deleting jobs stays as cheap as before for every job): the leader's
-- workflow-retention chore deletes the rows of jobs that are gone, as it does job_steps'.
-- Workers of every older version keep working: they never write it.

CREATE TABLE {s}.job_logs (
    job_id     bigint      NOT NULL,
    id         bigint      GENERATED ALWAYS AS IDENTITY,
    attempt    integer     NOT NULL,
    written_at timestamptz NOT NULL DEFAULT now(),
    -- [{at, level, message, logger?, fields?, capped?}, ...] (forklift._jobs.attempt_log); json,
    -- not jsonb: a line's fields keep the order the handler gave them
    lines      json        NOT NULL,
    PRIMARY KEY (job_id, id)
);
