"""The statements ``forklift.ops.stats`` sends, and how the window's values are written in.

Live counts come from the partial indexes on live states (and the dead-letter index of
migration 0002), so they grow with the backlog, not with history. The window reads only jobs
finished inside it, through the finished-time index, and (forklift.ops.stats_rollup) only the
minutes the leader has not rolled up yet.
"""

from __future__ import annotations

from typing import Any

from forklift.ops.stats_window import RT_BINS, RT_LN_MAX, RT_LN_MIN, RT_MIN

__all__ = [
    "COUNTS_SQL", "FAILED_SQL", "HELD_SQL", "TIME_SQL", "WINDOW_SQL", "inline",
]

# Each arm's WHERE is exactly one partial index's predicate, so each is an index(-only) scan
# over live (or dead-letter) rows and never touches the finished ones.
COUNTS_SQL = """
SELECT queue, 'available', count(*), min(run_at) FROM {s}.jobs WHERE state = 'available' GROUP BY queue
UNION ALL
SELECT queue, 'running', count(*), NULL FROM {s}.jobs WHERE state = 'running' GROUP BY queue
UNION ALL
SELECT queue, state, count(*), NULL FROM {s}.jobs
    WHERE state IN ('scheduled', 'retryable') GROUP BY queue, state
UNION ALL
SELECT queue, 'dead', count(*), NULL FROM {s}.jobs WHERE state = 'dead' GROUP BY queue
"""

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
WINDOW_SQL = FINISHED.replace("<SINCE>", SINCE).replace("<UNTIL>", "")

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
    WHERE x.code NOT IN ('cancelled', 'interrupted')
    OFFSET 0
) e
WHERE e.at >= <SINCE> AND e.at < <UNTIL>
GROUP BY 1, 2
"""
FAILED_SQL = FAILED.replace("<SINCE>", SINCE).replace("<UNTIL>", "now() + interval '1 minute'")

# The clock, the window's first bucket, and the rollup's minutes (forklift.ops.stats_rollup),
# all in the snapshot every other read of the call shares.
TIME_SQL = (f"SELECT now(), {START}, extract(epoch FROM now())::float8, r.lo, r.hi"
            " FROM (SELECT 1) one LEFT JOIN {s}.stats_rollup r ON true")
# Running jobs per holder, in the same snapshot as the counts (a worker's own in_use is as old
# as its last heartbeat, and counts buffered jobs differently).
HELD_SQL = "SELECT worker_id, count(*) FROM {s}.jobs WHERE state = 'running' GROUP BY worker_id"


def inline(text: str, p: dict[str, Any]) -> str:
    """``text`` with the window's parameters written in as typed literals.

    A statement with parameters is planned anew on every call (its custom plan looked cheaper
    than the generic one, estimated for any ``since``): 3 ms of server CPU each for the window
    and failed-attempts reads, a sixth of a stats call. Without parameters the prepared
    statement keeps its one plan (estimated with the real now(): index scans), and a
    connection that reads stats again (a console, ``--watch``, the bench) plans it once. The
    values are numbers and a timestamp computed here, never text from a caller.
    """
    since = "NULL" if p["since"] is None else f"'{p['since'].isoformat()}'"
    return (text.replace("%(b)s", f"'{float(p['b'])!r}'::float8")
            .replace("%(n)s", f"{int(p['n'])}::int4").replace("%(since)s", since))
