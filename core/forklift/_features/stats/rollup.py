"""The stats rollup: each closed minute of the stats window, per queue, written once.

The leader's ``stats-rollup`` chore (forklift._worker.maintenance.stats_rollup) writes, for the
minutes that closed at least SETTLE_MARGIN ago, one ``stats_minutes`` row per queue (migration
0015): completed, dead, failed attempts, summed run time and the run-time bins, read with the
same statements as the raw window. ``stats_rollup`` holds the minutes covered, [lo, hi). A stats
call whose bucket is whole minutes reads those rows for the window's covered minutes and scans
jobs only from ``hi`` on; with no chore running (no worker, a stale rollup) it scans them all.
Nothing is added to job writes: no trigger, no extra column.

How the rollup differs from a raw read, all of it as a WindowCache differs: a minute keeps what
it held when it was written. A job whose finishing transaction commits more than SETTLE_MARGIN
after its minute closed, a requeue, delete or prune of a job finished in a covered minute, and a
failed attempt whose job is back in the available backlog (a raw read misses it until it runs
again; the rollup keeps it) are not reflected in a covered minute.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import psycopg

from forklift._db.sqltext import render
from forklift._features.history import source
from forklift._features.stats.sql import FAILED, FINISHED, SETTLE_MARGIN

__all__ = ["CHUNK", "KEEP", "READ_SQL", "ROLLUP_SQL", "covered", "plan", "rollup"]

#: How far back the rollup keeps minutes (a stats window reaching further back reads jobs).
KEEP = timedelta(hours=24)
#: The most minutes one pass writes: a first pass, or one after a longer pause, starts with
#: this many of the newest (older ones are read from the jobs).
CHUNK = 60

# The window's covered minutes [%(lo)s, %(hi)s), as written (forklift.ops.stats_window adds
# them up: a per-row unnest of the bins on the server cost twice what the client's sums do).
READ_SQL = """
SELECT queue, minute, completed, dead, failed, run_seconds, bins, runs FROM {s}.stats_minutes
WHERE minute >= %(lo)s AND minute < %(hi)s
"""


def covered(width: float, since: float, lo: int | None, hi: int | None) -> tuple[int, int] | None:
    """The rolled-up minutes a read from epoch ``since`` can use: [since's minute, hi), when
    the bucket is whole minutes and the rollup reaches back to ``since``."""
    if lo is None or hi is None or width % 60 or since % 60:
        return None
    m = int(since // 60)
    return (m, hi) if lo <= m < hi else None


_A, _Z = "to_timestamp(%(a)s * 60.0)", "to_timestamp(%(z)s * 60.0)"
# One statement a pass: the minutes [a, z) written, older ones pruned, the range recorded.
ROLLUP_SQL = f"""
WITH fin (queue, state, minute, bin, c, run) AS (
{FINISHED.replace("<SINCE>", _A).replace("<UNTIL>", f" AND finished_at < {_Z}")}
), fail (queue, minute, c) AS (
{FAILED.replace("<SINCE>", _A).replace("<UNTIL>", _Z)}
), per AS (
    SELECT queue, minute,
           coalesce(sum(c) FILTER (WHERE state = 'completed'), 0) AS completed,
           coalesce(sum(c) FILTER (WHERE state = 'dead'), 0) AS dead,
           sum(run) AS run_seconds,
           array_agg(bin::int2 ORDER BY bin) FILTER (WHERE bin IS NOT NULL) AS bins,
           array_agg(c::int4 ORDER BY bin) FILTER (WHERE bin IS NOT NULL) AS runs
    FROM fin GROUP BY 1, 2
), written AS (
    INSERT INTO {{s}}.stats_minutes AS t
        (minute, queue, completed, dead, failed, run_seconds, bins, runs)
    SELECT coalesce(p.minute, f.minute), coalesce(p.queue, f.queue), coalesce(p.completed, 0),
           coalesce(p.dead, 0), coalesce(f.c, 0), coalesce(p.run_seconds, 0),
           coalesce(p.bins, '{{}}'), coalesce(p.runs, '{{}}')
    FROM per p FULL JOIN fail f ON f.queue = p.queue AND f.minute = p.minute
    ON CONFLICT (minute, queue) DO NOTHING
    RETURNING 1
), pruned AS (
    DELETE FROM {{s}}.stats_minutes WHERE minute < %(lo)s RETURNING 1
)
UPDATE {{s}}.stats_rollup SET lo = %(lo)s, hi = %(hi)s, updated_at = now()
RETURNING (SELECT count(*) FROM written), (SELECT count(*) FROM pruned)
"""

STATE_SQL = f"""
SELECT r.lo, r.hi, floor((date_part('epoch', now()) - {SETTLE_MARGIN}) / 60)::bigint,
       to_regclass(%s) IS NOT NULL
FROM {{s}}.stats_rollup r FOR UPDATE
"""

_JOBS = re.compile(r"\{s\}\.jobs(?![A-Za-z0-9_])")


def plan(lo: int | None, hi: int | None, closed: int, keep: int = int(KEEP.total_seconds() // 60),
         chunk: int = CHUNK) -> tuple[int, int, int, int] | None:
    """The minutes a pass writes, [a, z), and the range covered after it, (lo, hi); None when
    nothing is due. ``closed``: minutes below it are settled.

    Only forwards, at most ``chunk`` minutes: a pass reads the jobs finished since its first
    minute (a failed attempt's job may finish any time later), so older minutes are never
    filled in; a first pass, or one after a pause longer than ``chunk``, starts over with the
    newest ``chunk`` minutes (the last hour: a default 30-minute window at once)."""
    floor = closed - keep
    if lo is None or hi is None or hi < closed - chunk:
        a = max(floor, closed - chunk)
        return (a, closed, a, closed) if a < closed else None
    kept = max(lo, floor)
    if hi < closed:
        return hi, closed, kept, closed
    return (hi, hi, kept, hi) if kept != lo else None


async def rollup(conn: psycopg.AsyncConnection[Any], schema: str, *,
                 keep: timedelta = KEEP, chunk: int = CHUNK) -> int:
    """One pass (its own transaction): the minutes due written, those past ``keep`` pruned;
    the minutes written (0: nothing was due)."""
    async with conn.transaction():
        cur = await conn.execute(render(STATE_SQL, schema), (f"{schema}.jobs_history",))
        row = await cur.fetchone()
        if row is None:
            return 0
        lo, hi, closed, partitioned = row
        step = plan(lo, hi, int(closed), int(keep.total_seconds() // 60), chunk)
        if step is None:
            return 0
        a, z, new_lo, new_hi = step
        text = ROLLUP_SQL
        if partitioned:  # job history in two tables: read both (forklift._features.history)
            text = _JOBS.sub(lambda _m: source(schema, True) + " AS jobs", text)
        await conn.execute(render(text, schema),
                           {"a": a, "z": z, "lo": new_lo, "hi": new_hi, "b": 60.0})
        return z - a
