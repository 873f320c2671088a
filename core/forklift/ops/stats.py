"""Stats: per queue and in total, cheap however many finished jobs are retained.

Costs: live counts come from the partial indexes on live states (and the dead-letter index of
migration 0002), so they grow with the backlog, not with history. Rates and run times read only
jobs finished inside a recent, bounded window through the finished-time index. Everything travels
in one pipelined round trip inside one transaction, so every figure shares one ``now()``.
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg

from forklift._db.sqltext import render
from forklift._jobs.job import LIVE_STATES
from forklift.ops import history
from forklift.ops import stats_sql as _sql
from forklift.ops.context import OpsContext
from forklift.ops.errors import InvalidFilter
from forklift.ops.queues import LIST_SQL as QUEUES_SQL
from forklift.ops.queues import QueueInfo
from forklift.ops.shape import Shape
from forklift.ops.stats_rollup import READ_SQL, covered
from forklift.ops.stats_window import (
    RT_BINS,
    RT_ERROR,
    SETTLE_MARGIN,
    Finished,
    Minute,
    WindowCache,
    as_rows,
    p95,
    tally,
)
from forklift.ops.workers import LIST_SQL as WORKERS_SQL
from forklift.ops.workers import STALE_AFTER, WorkerInfo

__all__ = [
    "COUNTED_STATES",
    "DEFAULT_BUCKET",
    "DEFAULT_WINDOW",
    "FAILING_MIN_OUTCOMES",
    "FAILING_RATIO",
    "LAG_SECONDS",
    "MAX_POINTS",
    "QUEUE_STATES",
    "RT_BINS",
    "RT_ERROR",
    "SETTLE_MARGIN",
    "QueueStats",
    "RunTime",
    "Series",
    "Stats",
    "Totals",
    "WindowCache",
    "queue_state",
    "stats",
]

COUNTED_STATES: tuple[str, ...] = (*LIVE_STATES, "dead")
DEFAULT_WINDOW = timedelta(minutes=30)
DEFAULT_BUCKET = timedelta(minutes=1)
MAX_POINTS = 1440

# The statements (forklift.ops.stats_sql), by the names other modules import from here.
COUNTS_SQL, WINDOW_SQL, FAILED_SQL = _sql.COUNTS_SQL, _sql.WINDOW_SQL, _sql.FAILED_SQL
TIME_SQL, HELD_SQL = _sql.TIME_SQL, _sql.HELD_SQL
_START, _SINCE, _SLOT, _LAST_AT = _sql.START, _sql.SINCE, _sql.SLOT, _sql.LAST_AT
_inline = _sql.inline

#: The oldest available job waiting longer than this makes a queue "lagging".
LAG_SECONDS = 60.0
#: A queue is "failing" when at least this many outcomes in the window were mostly failures.
FAILING_MIN_OUTCOMES = 3
FAILING_RATIO = 0.5
#: Queue states, most urgent reading first where several apply.
QUEUE_STATES: tuple[str, ...] = ("paused", "no_worker", "failing", "full", "lagging", "active",
                                  "idle")


def queue_state(
    *, paused: bool, counts: dict[str, int], workers: int, lag: float | None,
    completed: int, failed: int, full: bool = False,
) -> str:
    """paused; no_worker (work waits and no live worker listens); failing (in the window,
    failed attempts are at least FAILING_RATIO of the outcomes); full (past its ceiling,
    forklift queues ceiling: enqueues are refused, wait or shed); lagging (the oldest
    available job waited over LAG_SECONDS); active (work flows); idle."""
    if paused:
        return "paused"
    waiting = counts.get("available", 0) + counts.get("retryable", 0)
    if waiting and workers == 0:
        return "no_worker"
    outcomes = completed + failed
    if outcomes >= FAILING_MIN_OUTCOMES and failed >= FAILING_RATIO * outcomes:
        return "failing"
    if full:
        return "full"
    if lag is not None and lag > LAG_SECONDS:
        return "lagging"
    live = sum(counts.get(st, 0) for st in ("available", "running", "retryable"))
    if workers == 0:
        # Nothing flows without a live worker: jobs still running are an exited worker's,
        # left until their leases lapse; finished ones in the window are history.
        return "no_worker" if live else "idle"
    return "active" if live or completed else "idle"


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
    #: One of QUEUE_STATES (see queue_state).
    state: str = "idle"
    #: Its ceiling in words (``depth 1000, age 300s``; forklift queues ceiling), None without.
    ceiling: str | None = None
    #: Which ceiling it is past (``depth``, ``age``), None while it has room or has none.
    full_by: str | None = None


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
    #: Running jobs per worker id, from the same snapshot as the counts.
    running_by_worker: dict[str, int] = field(default_factory=dict)

    def held_by(self, worker_id: str) -> int:
        """Running jobs the worker holds, in this snapshot."""
        return self.running_by_worker.get(worker_id, 0)

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
    cache: WindowCache | None = None,
) -> Stats:
    """Per-queue and total figures. Pass the same ``cache`` to successive calls (a console, a
    ``--watch`` loop) and each reads only the window's newest buckets."""
    n = _points(window, bucket)
    width = bucket.total_seconds()
    if cache is not None:
        cache.reset(width, n)
    until = cache.until if cache is not None else None
    since = datetime.fromtimestamp(until * width, UTC) if until is not None else None
    p = {"b": width, "n": n, "since": since}
    s = ctx.schema
    own = conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    with conn.pipeline(), conn.transaction():
        if own:
            # One snapshot for every statement: counts, workers and the running jobs they
            # hold must agree (under READ COMMITTED each statement sees its own moment).
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            # Small index scans: starting parallel workers costs more than it saves.
            conn.execute("SET LOCAL max_parallel_workers_per_gather = 0")
        # The clock and the rollup's range first (one more round trip, in the same snapshot):
        # the window's reads are written for them.
        now, start, epoch, lo, hi = conn.execute(_inline(render(TIME_SQL, s), p)).fetchall()[0]
        first = math.floor(epoch / width) - (n - 1)  # the slot of the window's first bucket
        rolled = covered(width, (until if until is not None else first) * width, lo, hi)
        if rolled is not None:  # jobs are read only from where the rollup ends
            p["since"] = datetime.fromtimestamp(rolled[1] * 60, UTC)
        cursors = [conn.cursor() for _ in range(7)]
        cursors[0].execute(history.render_read(COUNTS_SQL, conn, s))
        cursors[1].execute(_inline(history.render_read(WINDOW_SQL, conn, s), p))
        cursors[2].execute(_inline(history.render_read(FAILED_SQL, conn, s), p))
        cursors[3].execute(render(QUEUES_SQL, s))
        cursors[4].execute(render(WORKERS_SQL, s))
        cursors[5].execute(render(HELD_SQL, s))
        if rolled is not None:
            cursors[6].execute(render(READ_SQL, s), {"lo": rolled[0], "hi": rolled[1]})
    counts, window_rows, failed_rows, queue_rows, worker_rows, held_rows = (
        c.fetchall() for c in cursors[:6]
    )
    finished: list[Finished] = window_rows
    covered_rows: list[Minute] = cursors[6].fetchall() if rolled is not None else []
    if cache is not None and covered_rows:  # a cache keeps them per bucket
        finished += as_rows(covered_rows, width)
        covered_rows = []
    held = {str(w): int(c) for w, c in held_rows if w is not None}
    for cur in cursors:
        cur.close()
    failed: list[tuple[str, int, int]] = failed_rows
    if cache is not None:
        cache.merge(finished, failed, first=first,
                    closed=math.floor((epoch - SETTLE_MARGIN) / width))

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

    series, tallied = tally(finished, failed, first=first, n=n, minutes=covered_rows,
                             width=width)
    runtimes = {key: RunTime(k, total / k if k else None, p95(h, k))
                for key, (k, total, h) in tallied.items()}
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
                free_slots=sum(max(0, w.slots - held.get(w.id, 0))
                               for w in listening if w.state == "running"),
                ceiling=info.ceiling if info and info.ceiling != "none" else None,
                full_by=info.full_by if info else None,
            )
        )
        made = out[-1]
        out[-1] = dataclasses.replace(made, state=queue_state(
            paused=made.paused, counts=made.counts, workers=made.workers,
            lag=made.pickup_lag_seconds, completed=made.completed, failed=made.failed,
            full=made.full_by is not None))

    total_series = Series(
        *([sum(col) for col in zip(*(getattr(q.series, what) for q in out), strict=True)]
          if out else zeros() for what in ("completed", "failed", "dead"))
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
        # Running jobs held by live workers, counted in this snapshot: it agrees with the
        # running count and with the jobs a list of running jobs shows.
        in_use=sum(held.get(w.id, 0) for w in workers if not w.stale),
    )
    return Stats(
        at=now,
        window_seconds=window.total_seconds(),
        bucket_seconds=bucket.total_seconds(),
        buckets=[start + i * bucket for i in range(n)],
        queues=out,
        workers=workers,
        totals=totals,
        running_by_worker=held,
    )
