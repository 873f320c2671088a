-- forklift schema, version 20: consumers (app.consumer). One row a consumer: the cursor of its
-- source, moved in the same transaction as the work the batch did, and what an operator needs
-- to see and steer it (lag, failure streak, back-off, pause).
-- This one only adds a table: workers of every older version keep working.

CREATE TABLE {s}.consumers (
    name          text PRIMARY KEY,
    kind          text        NOT NULL,
    queue         text        NOT NULL,
    supervisor    text,
    batch_size    integer     NOT NULL CHECK (batch_size >= 1),
    cursor        jsonb,
    cursor_at     timestamptz,
    items_done    bigint      NOT NULL DEFAULT 0,
    batches_done  bigint      NOT NULL DEFAULT 0,
    read_at       timestamptz,
    caught_up_at  timestamptz,
    job_id        bigint,
    failures      integer     NOT NULL DEFAULT 0 CHECK (failures >= 0),
    last_error    jsonb,
    failed_at     timestamptz,
    retry_at      timestamptz,
    paused        boolean     NOT NULL DEFAULT false,
    paused_by     text,
    paused_at     timestamptz,
    pause_reason  text,
    declared_at   timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now()
) WITH (fillfactor = 80);
