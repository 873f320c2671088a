-- forklift schema, version 15: a rollup of the stats window's closed minutes.
--
-- A one-shot stats call read every finished job of its window (20,000 rows for a 30-minute
-- window at 700 jobs a minute); the leader now writes each closed minute once, per queue,
-- and stats reads those rows plus the open tail (forklift.ops.stats_rollup).


-- One row per queue and closed minute (epoch seconds / 60) that saw an outcome, written once by
-- the leader's stats-rollup chore (no trigger: job writes pay nothing), pruned after its
-- retention. Run times as the stats window counts them: log-scale bins (bins[i] holds runs[i]).
CREATE TABLE {s}.stats_minutes (
    minute      bigint     NOT NULL,
    queue       text       NOT NULL,
    completed   integer    NOT NULL DEFAULT 0,
    dead        integer    NOT NULL DEFAULT 0,
    failed      integer    NOT NULL DEFAULT 0,
    run_seconds float8     NOT NULL DEFAULT 0,
    bins        smallint[] NOT NULL DEFAULT '{}',
    runs        integer[]  NOT NULL DEFAULT '{}',
    PRIMARY KEY (minute, queue)
);

-- The minutes [lo, hi) that stats_minutes covers (NULL: none yet); one row.
CREATE TABLE {s}.stats_rollup (
    name       text        PRIMARY KEY DEFAULT 'minutes' CHECK (name = 'minutes'),
    lo         bigint,
    hi         bigint,
    updated_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT stats_rollup_range CHECK ((lo IS NULL) = (hi IS NULL) AND lo <= hi)
);
INSERT INTO {s}.stats_rollup (name) VALUES ('minutes');
