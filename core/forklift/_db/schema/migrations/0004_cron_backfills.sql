-- forklift schema, version 4: cron schedules and paced backfills.

-- Schedules are declared in code; the leader records each definition here so operators can
-- list, pause and run them without loading the app. Pausing is state of the row, not the code.
CREATE TABLE {s}.schedules (
    name          text PRIMARY KEY,
    kind          text        NOT NULL,
    cron          text        NOT NULL,
    tz            text        NOT NULL DEFAULT 'UTC',
    policy        text        NOT NULL DEFAULT 'skip' CHECK (policy IN ('skip', 'catch_up')),
    max_catch_up  integer     NOT NULL DEFAULT 1 CHECK (max_catch_up >= 1),
    queue         text        NOT NULL,
    args          jsonb       NOT NULL DEFAULT '{}',
    priority      smallint    NOT NULL DEFAULT 0,
    max_attempts  integer     NOT NULL DEFAULT 20,
    paused        boolean     NOT NULL DEFAULT false,
    paused_by     text,
    paused_at     timestamptz,
    pause_reason  text,
    -- ticks up to the latest of these three are not due: a new or resumed schedule starts now
    resumed_at    timestamptz,
    last_tick_at  timestamptz,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now()
) WITH (fillfactor = 70);

-- One row per fired tick, written in the same transaction as its job: the primary key is what
-- makes a second enqueue of a tick impossible, whichever worker leads and whatever became of
-- the first job. Manual runs (run-now) are recorded too, stamped with the moment they were asked.
CREATE TABLE {s}.schedule_ticks (
    schedule     text        NOT NULL REFERENCES {s}.schedules (name) ON DELETE CASCADE,
    tick_at      timestamptz NOT NULL,
    job_id       bigint,
    manual       boolean     NOT NULL DEFAULT false,
    actor        text,
    enqueued_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (schedule, tick_at)
);

-- Backfill definitions as the app declared them (the leader and `backfills start --app` keep
-- this current): what a run needs to enqueue its job, and the code hash `changed` compares.
CREATE TABLE {s}.backfills (
    name          text PRIMARY KEY,
    code_hash     text             NOT NULL,
    page_size     integer          NOT NULL CHECK (page_size >= 1),
    rate          double precision NOT NULL CHECK (rate > 0),
    queue         text             NOT NULL,
    kind          text             NOT NULL,
    max_attempts  integer          NOT NULL CHECK (max_attempts >= 1),
    retry         jsonb,
    declared_at   timestamptz      NOT NULL DEFAULT now(),
    updated_at    timestamptz      NOT NULL DEFAULT now()
);

-- A run walks one backfill from a cursor to the end. The checkpoint (cursor and counters) is
-- updated in the same transaction as the page's own writes, fenced on (job_id, pages_done).
CREATE TABLE {s}.backfill_runs (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name          text             NOT NULL,
    state         text             NOT NULL DEFAULT 'running'
                  CHECK (state IN ('running', 'paused', 'failed', 'completed', 'cancelled')),
    cursor        jsonb,
    start_cursor  jsonb,
    rate          double precision NOT NULL CHECK (rate > 0),
    page_size     integer          NOT NULL CHECK (page_size >= 1),
    pages_done    bigint           NOT NULL DEFAULT 0,
    items_done    bigint           NOT NULL DEFAULT 0,
    total         bigint,
    -- [[epoch second, pages, items], ...] for the last minutes: the pace window and sparkline
    pace          jsonb            NOT NULL DEFAULT '[]',
    last_error    jsonb,
    error_count   integer          NOT NULL DEFAULT 0,
    code_hash     text             NOT NULL,
    job_id        bigint,
    started_by    text,
    paused_by     text,
    paused_at     timestamptz,
    created_at    timestamptz      NOT NULL DEFAULT now(),
    updated_at    timestamptz      NOT NULL DEFAULT now(),
    finished_at   timestamptz,
    CONSTRAINT backfill_runs_finished_iff_terminal CHECK (
        (state IN ('completed', 'cancelled')) = (finished_at IS NOT NULL))
) WITH (fillfactor = 70);

-- One live run per backfill; a failed run keeps its cursor and its place until resumed or
-- replaced with --force.
CREATE UNIQUE INDEX backfill_runs_live_idx ON {s}.backfill_runs (name)
    WHERE state IN ('running', 'paused', 'failed');
CREATE INDEX backfill_runs_name_idx ON {s}.backfill_runs (name, id DESC);
