"""The SQL the stats read and the stats rollup share: jobs finished, failed attempts, and
the run-time bins they are counted into.

Run times are counted into log-scale bins (RT_BINS between RT_MIN and RT_MAX seconds), so
per-bucket and per-minute histograms merge (forklift.ops.stats_window does the maths).
"""

from __future__ import annotations

import math

RT_BINS = 128
RT_MIN, RT_MAX = 0.001, 86400.0
RT_LN_MIN, RT_LN_MAX = math.log(RT_MIN), math.log(RT_MAX)
BIN_WIDTH = (RT_LN_MAX - RT_LN_MIN) / RT_BINS
RT_ERROR = math.exp(BIN_WIDTH / 2) - 1

#: A bucket (or a rollup's minute) is kept once it closed this long ago: a transaction that
#: finished a job just before the boundary may commit a moment after it.
SETTLE_MARGIN = 15.0

# The first bucket's start: bucket-aligned, so successive refreshes shift by whole points.
START = (
    "(to_timestamp(floor(extract(epoch FROM now()) / %(b)s) * %(b)s)"
    " - make_interval(secs => %(b)s * (%(n)s - 1)))"
)
# Where this call starts reading: the window's start, or where a cache's closed buckets (or the
# rollup's minutes) end.
SINCE = f"greatest({START}, %(since)s::timestamptz)"
SLOT = "floor(date_part('epoch', {col}) / %(b)s)::bigint"

# date_part() (float8), not extract() (numeric, whose ln() and sums cost far more per row).
RUN = "date_part('epoch', finished_at - attempted_at)"
# A completed job's run-time bin (forklift.ops.stats_window); NULL without a run time.
BIN = f"""CASE WHEN state = 'completed' AND attempted_at IS NOT NULL
            THEN width_bucket(ln(greatest({RUN}, {RT_MIN}::float8)), {RT_LN_MIN}::float8,
                              {RT_LN_MAX}::float8, {RT_BINS})
       END"""

# Jobs finished inside the window, per queue, state, bucket and run-time bin: one index-only scan
# of jobs_window_idx (migration 0002). <SINCE> and <UNTIL>: the bounds (the window's, or a
# rollup's minutes).
FINISHED = f"""
SELECT queue, state, {SLOT.format(col="finished_at")},
       {BIN},
       count(*), coalesce(sum({RUN}) FILTER (WHERE state = 'completed'), 0)
FROM {{s}}.jobs
WHERE state IN ('completed', 'dead') AND finished_at >= <SINCE><UNTIL>
GROUP BY 1, 2, 3, 4
"""

# Failed attempts inside the window, by the time on each error entry. Only jobs that can hold
# such an entry are read, each set small and indexed: retried-then-completed and dead jobs
# finished in the window, jobs waiting to retry, jobs running a retry. A job that failed and now
# waits in an 'available' backlog is counted once it runs again (or from a cache, or a rollup,
# that saw it). An ISO time as written by the worker (guarded: a cast of anything else would
# fail the query).
AT = "CASE WHEN {e} ~ '^\\d{{4}}-\\d\\d-\\d\\dT' THEN ({e})::timestamptz END"
LAST_AT = AT.format(e="errors -> -1 ->> 'at'")
# "The last entry is at or after <SINCE>", cheaply: a time in the worker's own form (ISO 8601 in
# UTC, "+00:00") compares as text against <SINCE> cut to the second (a regular expression and a
# cast a row were half the read); any other form is cast as before. Never narrower than
# LAST_AT >= <SINCE>, so it only picks the jobs whose entries the read then counts exactly.
# ('%%': one '%' once a driver binds parameters, and two wildcards, the same, when none.)
_LAST = "(errors -> -1 ->> 'at')"
RECENT = (f"CASE WHEN {_LAST} LIKE '____-__-__T__:__:__%%+00:00' THEN {_LAST} COLLATE \"C\" >= "
          "(SELECT to_char(<SINCE> AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"+00:00\"'))"
          f" ELSE {LAST_AT} >= <SINCE> END")
FAILED = f"""
SELECT j.queue, {SLOT.format(col="e.at")}, count(*)
FROM (
    SELECT queue, errors FROM {{s}}.jobs
        WHERE state = 'completed' AND attempt > 1 AND finished_at >= <SINCE>
    UNION ALL
    SELECT queue, errors FROM {{s}}.jobs WHERE state = 'dead' AND finished_at >= <SINCE>
    UNION ALL
    -- a live job's entries are in time order: when its last is older, all of them are
    SELECT queue, errors FROM {{s}}.jobs WHERE state = 'retryable' AND {RECENT}
    UNION ALL
    SELECT queue, errors FROM {{s}}.jobs
        WHERE state = 'running' AND attempt > 1 AND {RECENT}
) j
CROSS JOIN LATERAL (
    -- each entry's time read and cast once (OFFSET 0 keeps the planner from copying the
    -- expression into every test that uses it: three casts of the text a row were a sixth
    -- of this read's time)
    SELECT CASE WHEN x.t ~ '^\\d{{4}}-\\d\\d-\\d\\dT' THEN x.t::timestamptz END AS at
    FROM (SELECT x ->> 'at' AS t, x ->> 'code' AS code FROM jsonb_array_elements(j.errors) x
          OFFSET 0) x
    WHERE x.code NOT IN ('cancelled', 'interrupted', 'payload_version_ahead')
    OFFSET 0
) e
WHERE e.at >= <SINCE> AND e.at < <UNTIL>
GROUP BY 1, 2
"""
