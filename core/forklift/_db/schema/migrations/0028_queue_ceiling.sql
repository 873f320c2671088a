-- forklift schema, version 28: backpressure at enqueue. A queue may have a ceiling on its depth
-- (`ceiling_depth`, jobs available to run) and/or on the wait of its oldest available job
-- (`ceiling_age`, seconds), set by an operator (`forklift queues ceiling`). The leader measures
-- each ceilinged queue every second with a bounded read and stores what it found
-- (`measured_depth`, capped at the ceiling + 1; `measured_age`; `measured_at`) and which ceiling
-- the queue is past (`full_by`: 'depth' or 'age'; NULL while it has room); apps refuse, wait or
-- shed enqueues to a full queue as each kind declares.
--
-- Nullable columns on the small queues table only: a queue without a ceiling is never measured,
-- and its enqueues never read them. Workers of every older version keep working: they never
-- read the columns (their leader measures nothing and so marks no queue full).

ALTER TABLE {s}.queues ADD COLUMN ceiling_depth integer
    CHECK (ceiling_depth IS NULL OR ceiling_depth >= 1);
ALTER TABLE {s}.queues ADD COLUMN ceiling_age double precision
    CHECK (ceiling_age IS NULL OR ceiling_age > 0);
ALTER TABLE {s}.queues ADD COLUMN full_by text CHECK (full_by IN ('depth', 'age'));
ALTER TABLE {s}.queues ADD COLUMN measured_depth integer;
ALTER TABLE {s}.queues ADD COLUMN measured_age double precision;
ALTER TABLE {s}.queues ADD COLUMN measured_at timestamptz;
