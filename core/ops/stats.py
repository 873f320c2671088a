"""Stats: per queue and in total, cheap however many finished jobs are retained.

Costs: live counts come from the partial indexes on live states (and the dead-letter index of
migration 0002), so they grow with the backlog, not with history. Rates and run times read only
jobs finished inside a recent, bounded window through the finished-time index. Everything travels
in one pipelined round trip inside one transaction, so every figure shares one ``now()``.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import psycopg

from forklift.job import LIVE_STATES
from forklift.ops.context import OpsContext
from forklift.ops.errors import InvalidFilter
from forklift.ops.queues import LIST_SQL as QUEUES_SQL
from forklift.ops.queues import QueueInfo
from forklift.ops.shape import Shape
from forklift.ops.workers import LIST_SQL as WORKERS_SQL
from forklift.ops.workers import STALE_AFTER, WorkerInfo
from forklift.sqltext import render

COUNTED_STATES: tuple[str, ...] = (*LIVE_STATES, "dead")
DEFAULT_WINDOW = timedelta(minutes=30)
DEFAULT_BUCKET = timedelta(minutes=1)
MAX_POINTS = 1440

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
_START = (
    "(to_timestamp(floor(extract(epoch FROM now()) / %(b)s) * %(b)s)"
    " - make_interval(secs => %(b)s * (%(n)s - 1)))"
)

# Jobs finished inside the window: counts per bucket, and run times of the completed ones.
WINDOW_SQL = f"""
WITH w AS MATERIALIZED (
    SELECT queue, state, finished_at, attempted_at, {_START} AS start
    FROM {{s}}.jobs
    WHERE state IN ('completed', 'dead') AND finished_at >= {_START}
)
SELECT 'bucket', queue, state,
       floor(extract(epoch FROM finished_at - start) / %(b)s)::int, count(*), NULL::float8, NULL::float8
FROM w GROUP BY queue, state, 4
UNION ALL
SELECT 'runtime', queue, NULL, NULL, count(*),
       avg(extract(epoch FROM finished_at - attempted_at))::float8,
       percentile_cont(0.95) WITHIN GROUP (ORDER BY extract(epoch FROM finished_at - attempted_at))
FROM w WHERE state = 'completed' AND attempted_at IS NOT NULL
GROUP BY GROUPING SETS ((queue), ())
"""

# Failed attempts inside the window, by the time on each error entry. They are read from jobs
# finished inside the window and from jobs now waiting to retry or running a retry, all bounded
# sets; a job that failed and now waits in an 'available' backlog is counted once it runs again.
FAILED_SQL = f"""
SELECT j.queue, floor(extract(epoch FROM e.at - {_START}) / %(b)s)::int, count(*)
FROM (
    SELECT queue, errors FROM {{s}}.jobs
        WHERE state IN ('completed', 'dead') AND finished_at >= {_START}
    UNION ALL
    SELECT queue, errors FROM {{s}}.jobs WHERE state = 'retryable'
    UNION ALL
    SELECT queue, errors FROM {{s}}.jobs WHERE state = 'running'
) j
CROSS JOIN LATERAL (
    SELECT (x ->> 'at')::timestamptz AS at FROM jsonb_array_elements(j.errors) x
    WHERE x ->> 'code' NOT IN ('cancelled', 'interrupted')
      AND x ->> 'at' ~ '^\\d{{4}}-\\d\\d-\\d\\dT'
) e
WHERE e.at >= {_START} AND e.at < now() + interval '1 minute'
GROUP BY 1, 2
"""

TIME_SQL = f"SELECT now(), {_START}"


@dataclass(frozen=True)
class RunTime(Shape):
    #: Completed jobs in the window that the figures cover.
    samples: int = 0
    mean_seconds: float | None = None
    p95_seconds: float | None = None


@dataclass(frozen=True)
class Series(Shape):
    """One point per bucket, oldest first; the last bucket is the one in progress."""

    completed: list[int]
    failed: list[int]
    dead: list[int]

    def total(self, what: str) -> int:
        return sum(getattr(self, what))


@dataclass(frozen=True)
class QueueStats(Shape):
    name: str
    #: scheduled, available, running, retryable, dead
    counts: dict[str, int]
    paused: bool
    paused_by: str | None
    paused_at: datetime | None
    pause_reason: str | None
    pause_expires_at: datetime | None
    concurrency: int | None
    #: Age of the oldest available job (how long work waits for a slot); None when none waits.
    pickup_lag_seconds: float | None
    oldest_available_at: datetime | None
    series: Series
    completed: int
    failed: int
    dead_in_window: int
    run_time: RunTime
    #: Live workers that listen on this queue, and their free slots.
    workers: int
    free_slots: int


@dataclass(frozen=True)
class Totals(Shape):
    counts: dict[str, int]
    series: Series
    completed: int
    failed: int
    dead_in_window: int
    completed_per_minute: float
    failed_per_minute: float
    run_time: RunTime
    queues: int
    paused_queues: int
    workers: int
    live_workers: int
    draining_workers: int
    slots: int
    in_use: int


@dataclass(frozen=True)
class Stats(Shape):
    at: datetime
    window_seconds: float
    bucket_seconds: float
    #: Start of each bucket, oldest first.
    buckets: list[datetime]
    queues: list[QueueStats]
    workers: list[WorkerInfo]
    totals: Totals
    stale_after_seconds: float = field(default=STALE_AFTER)

    def queue(self, name: str) -> QueueStats | None:
        return next((q for q in self.queues if q.name == name), None)


def _points(window: timedelta, bucket: timedelta) -> int:
    if bucket.total_seconds() < 1:
        raise InvalidFilter("the stats bucket must be at least one second", field="bucket")
    n = round(window.total_seconds() / bucket.total_seconds())
    if not 1 <= n <= MAX_POINTS:
        raise InvalidFilter(
            f"window / bucket gives {n} points: keep it between 1 and {MAX_POINTS}", field="window"
        )
    return n


def stats(
    conn: psycopg.Connection[Any],
    ctx: OpsContext,
    *,
    window: timedelta = DEFAULT_WINDOW,
    bucket: timedelta = DEFAULT_BUCKET,
) -> Stats:
    n = _points(window, bucket)
    p = {"b": bucket.total_seconds(), "n": n}
    s = ctx.schema
    cursors = [conn.cursor() for _ in range(6)]
    with conn.pipeline(), conn.transaction():
        cursors[0].execute(render(TIME_SQL, s), p)
        cursors[1].execute(render(COUNTS_SQL, s))
        cursors[2].execute(render(WINDOW_SQL, s), p)
        cursors[3].execute(render(FAILED_SQL, s), p)
        cursors[4].execute(render(QUEUES_SQL, s))
        cursors[5].execute(render(WORKERS_SQL, s))
    t, counts, window_rows, failed_rows, queue_rows, worker_rows = (c.fetchall() for c in cursors)
    for c in cursors:
        c.close()
    now, start = t[0]

    queues = {r[0]: QueueInfo(*r) for r in queue_rows}
    workers = [WorkerInfo.from_row(r) for r in worker_rows]

    by_queue: dict[str, dict[str, int]] = defaultdict(lambda: dict.fromkeys(COUNTED_STATES, 0))
    oldest: dict[str, datetime] = {}
    for queue, state, count, min_run_at in counts:
        by_queue[queue][state] = int(count)
        if min_run_at is not None:
            oldest[queue] = min_run_at

    def zeros() -> list[int]:
        return [0] * n

    series: dict[str, dict[str, list[int]]] = defaultdict(
        lambda: {"completed": zeros(), "failed": zeros(), "dead": zeros()}
    )
    runtimes: dict[str | None, RunTime] = {}
    for kind, queue, state, b, count, mean, p95 in window_rows:
        if kind == "bucket":
            if 0 <= b < n:
                series[queue][state][b] += int(count)
        else:
            runtimes[queue] = RunTime(int(count), mean, p95)
    for queue, b, count in failed_rows:
        if 0 <= b < n:
            series[queue]["failed"][b] += int(count)

    names = sorted(set(queues) | set(by_queue) | set(series))
    out: list[QueueStats] = []
    for name in names:
        info = queues.get(name)
        sr = Series(**series[name]) if name in series else Series(zeros(), zeros(), zeros())
        listening = [w for w in workers if not w.stale and name in w.queues]
        out.append(
            QueueStats(
                name=name,
                counts=dict(by_queue[name]) if name in by_queue else dict.fromkeys(COUNTED_STATES, 0),
                paused=bool(info and info.paused),
                paused_by=info.paused_by if info and info.paused else None,
                paused_at=info.paused_at if info and info.paused else None,
                pause_reason=info.pause_reason if info and info.paused else None,
                pause_expires_at=info.pause_expires_at if info and info.paused else None,
                concurrency=info.concurrency if info else None,
                pickup_lag_seconds=(now - oldest[name]).total_seconds() if name in oldest else None,
                oldest_available_at=oldest.get(name),
                series=sr,
                completed=sr.total("completed"),
                failed=sr.total("failed"),
                dead_in_window=sr.total("dead"),
                run_time=runtimes.get(name, RunTime()),
                workers=len(listening),
                free_slots=sum(max(0, w.slots - w.in_use) for w in listening if w.state == "running"),
            )
        )

    total_series = Series(
        *([sum(getattr(q.series, what)[i] for q in out) for i in range(n)]
          for what in ("completed", "failed", "dead"))
    )
    minutes = window.total_seconds() / 60.0
    totals = Totals(
        counts={st: sum(q.counts[st] for q in out) for st in COUNTED_STATES},
        series=total_series,
        completed=total_series.total("completed"),
        failed=total_series.total("failed"),
        dead_in_window=total_series.total("dead"),
        completed_per_minute=round(total_series.total("completed") / minutes, 3),
        failed_per_minute=round(total_series.total("failed") / minutes, 3),
        run_time=runtimes.get(None, RunTime()),
        queues=len(out),
        paused_queues=sum(1 for q in out if q.paused),
        workers=len(workers),
        live_workers=sum(1 for w in workers if not w.stale),
        draining_workers=sum(1 for w in workers if w.state == "draining"),
        slots=sum(w.slots for w in workers if not w.stale),
        in_use=sum(w.in_use for w in workers if not w.stale),
    )
    return Stats(
        at=now,
        window_seconds=window.total_seconds(),
        bucket_seconds=bucket.total_seconds(),
        buckets=[start + i * bucket for i in range(n)],
        queues=out,
        workers=workers,
        totals=totals,
    )
