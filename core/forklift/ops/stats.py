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

from forklift._job import LIVE_STATES
from forklift._sqltext import render
from forklift.ops import history
from forklift.ops.context import OpsContext
from forklift.ops.errors import InvalidFilter
from forklift.ops.queues import LIST_SQL as QUEUES_SQL
from forklift.ops.queues import QueueInfo
from forklift.ops.shape import Shape
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
# Where this call starts reading: the window's start, or where a cache's closed buckets end.
_SINCE = f"greatest({_START}, %(since)s::timestamptz)"
_SLOT = "floor(date_part('epoch', {col}) / %(b)s)::bigint"

# Run times are counted into log-scale bins (RT_BINS between RT_MIN and RT_MAX seconds), so a
# window's mean and p95 come from per-bucket histograms that merge, and closed buckets can be
# cached: the p95 is the middle of its bin, within RT_ERROR of the exact figure.
RT_BINS = 128
RT_MIN, RT_MAX = 0.001, 86400.0
_LN_MIN, _LN_MAX = math.log(RT_MIN), math.log(RT_MAX)
_BIN_WIDTH = (_LN_MAX - _LN_MIN) / RT_BINS
RT_ERROR = math.exp(_BIN_WIDTH / 2) - 1

# Jobs finished inside the window, per queue, state, bucket and run-time bin: one index-only scan
# of jobs_window_idx (migration 0002).
# date_part() (float8), not extract() (numeric, whose ln() and sums cost far more per row).
_RUN = "date_part('epoch', finished_at - attempted_at)"
WINDOW_SQL = f"""
SELECT queue, state, {_SLOT.format(col="finished_at")},
       CASE WHEN state = 'completed' AND attempted_at IS NOT NULL
            THEN width_bucket(ln(greatest({_RUN}, {RT_MIN}::float8)), {_LN_MIN}::float8,
                              {_LN_MAX}::float8, {RT_BINS})
       END,
       count(*), coalesce(sum({_RUN}) FILTER (WHERE state = 'completed'), 0)
FROM {{s}}.jobs
WHERE state IN ('completed', 'dead') AND finished_at >= {_SINCE}
GROUP BY 1, 2, 3, 4
"""

# Failed attempts inside the window, by the time on each error entry. Only jobs that can hold
# such an entry are read, each set small and indexed: retried-then-completed and dead jobs
# finished in the window, jobs waiting to retry, jobs running a retry. A job that failed and now
# waits in an 'available' backlog is counted once it runs again (or from a cache that saw it).
# An ISO time as written by the worker (guarded: a cast of anything else would fail the query)
_AT = "CASE WHEN {e} ~ '^\\d{{4}}-\\d\\d-\\d\\dT' THEN ({e})::timestamptz END"
_LAST_AT = _AT.format(e="errors -> -1 ->> 'at'")
FAILED_SQL = f"""
SELECT j.queue, {_SLOT.format(col="e.at")}, count(*)
FROM (
    SELECT queue, errors FROM {{s}}.jobs
        WHERE state = 'completed' AND attempt > 1 AND finished_at >= {_SINCE}
    UNION ALL
    SELECT queue, errors FROM {{s}}.jobs WHERE state = 'dead' AND finished_at >= {_SINCE}
    UNION ALL
    -- a live job's entries are in time order: when its last is older, all of them are
    SELECT queue, errors FROM {{s}}.jobs WHERE state = 'retryable' AND {_LAST_AT} >= {_SINCE}
    UNION ALL
    SELECT queue, errors FROM {{s}}.jobs
        WHERE state = 'running' AND attempt > 1 AND {_LAST_AT} >= {_SINCE}
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
WHERE e.at >= {_SINCE} AND e.at < now() + interval '1 minute'
GROUP BY 1, 2
"""

#: A bucket is cached once it closed this long ago: a transaction that finished a job just
#: before the boundary may commit a moment after it.
SETTLE_MARGIN = 15.0


@dataclass
class WindowCache:
    """Closed buckets of the stats window, kept between calls (``stats(..., cache=c)``).

    A finished job's ``finished_at`` never moves, so a bucket that closed stays as it was: a
    refresh reads only the buckets since the last one. (A requeue or prune of a job finished
    inside the window is not subtracted from a cached bucket; the point ages out with it.)
    """

    bucket: float = 0.0
    points: int = 0
    #: Slots (epoch // bucket) below this are held here.
    until: int | None = None
    finished: dict[int, list[tuple[str, str, int | None, int, float]]] = field(default_factory=dict)
    failed: dict[int, list[tuple[str, int]]] = field(default_factory=dict)


TIME_SQL = f"SELECT now(), {_START}, extract(epoch FROM now())::float8"
# Running jobs per holder, in the same snapshot as the counts (a worker's own in_use is as old
# as its last heartbeat, and counts buffered jobs differently).
HELD_SQL = "SELECT worker_id, count(*) FROM {s}.jobs WHERE state = 'running' GROUP BY worker_id"

#: The oldest available job waiting longer than this makes a queue "lagging".
LAG_SECONDS = 60.0
#: A queue is "failing" when at least this many outcomes in the window were mostly failures.
FAILING_MIN_OUTCOMES = 3
FAILING_RATIO = 0.5
#: Queue states, most urgent reading first where several apply.
QUEUE_STATES: tuple[str, ...] = ("paused", "no_worker", "failing", "lagging", "active", "idle")


def queue_state(
    *, paused: bool, counts: dict[str, int], workers: int, lag: float | None,
    completed: int, failed: int,
) -> str:
    """paused; no_worker (work waits and no live worker listens); failing (in the window,
    failed attempts are at least FAILING_RATIO of the outcomes); lagging (the oldest
    available job waited over LAG_SECONDS); active (work flows); idle."""
    if paused:
        return "paused"
    waiting = counts.get("available", 0) + counts.get("retryable", 0)
    if waiting and workers == 0:
        return "no_worker"
    outcomes = completed + failed
    if outcomes >= FAILING_MIN_OUTCOMES and failed >= FAILING_RATIO * outcomes:
        return "failing"
    if lag is not None and lag > LAG_SECONDS:
        return "lagging"
    live = sum(counts.get(st, 0) for st in ("available", "running", "retryable"))
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


def _p95(hist: dict[int, int], total: int) -> float | None:
    if total == 0:
        return None
    seen = 0
    for b in sorted(hist):
        seen += hist[b]
        if seen >= 0.95 * total:
            if b <= 0:
                return RT_MIN
            if b > RT_BINS:
                return RT_MAX
            return math.exp(_LN_MIN + (b - 0.5) * _BIN_WIDTH)
    return RT_MAX


def _inline(text: str, p: dict[str, Any]) -> str:
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
    if cache is not None and (cache.bucket, cache.points) != (width, n):
        cache.bucket, cache.points, cache.until = width, n, None
        cache.finished.clear()
        cache.failed.clear()
    until = cache.until if cache is not None else None
    since = datetime.fromtimestamp(until * width, UTC) if until is not None else None
    p = {"b": width, "n": n, "since": since}
    s = ctx.schema
    cursors = [conn.cursor() for _ in range(7)]
    own = conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    read = [history.render_read(q, conn, s) for q in (COUNTS_SQL, WINDOW_SQL, FAILED_SQL)]
    with conn.pipeline(), conn.transaction():
        if own:
            # One snapshot for every statement: counts, workers and the running jobs they
            # hold must agree (under READ COMMITTED each statement sees its own moment).
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            # Small index scans: starting parallel workers costs more than it saves.
            conn.execute("SET LOCAL max_parallel_workers_per_gather = 0")
        cursors[0].execute(_inline(render(TIME_SQL, s), p))
        cursors[1].execute(read[0])
        cursors[2].execute(_inline(read[1], p))
        cursors[3].execute(_inline(read[2], p))
        cursors[4].execute(render(QUEUES_SQL, s))
        cursors[5].execute(render(WORKERS_SQL, s))
        cursors[6].execute(render(HELD_SQL, s))
    t, counts, window_rows, failed_rows, queue_rows, worker_rows, held_rows = (
        c.fetchall() for c in cursors
    )
    held = {str(w): int(c) for w, c in held_rows if w is not None}
    for cur in cursors:
        cur.close()
    now, start, epoch = t[0]
    first = math.floor(epoch / width) - (n - 1)  # the slot of the window's first bucket

    # (queue, state, slot, run-time bin or None, jobs, their summed run time)
    finished: list[tuple[str, str, int, int | None, int, float]] = window_rows
    failed: list[tuple[str, int, int]] = [(q, int(slot), int(c)) for q, slot, c in failed_rows]
    if cache is not None:
        closed = math.floor((epoch - SETTLE_MARGIN) / width)
        lo = until if until is not None else first
        for slot in [k for k in cache.finished if k < first]:
            del cache.finished[slot]
        for slot in [k for k in cache.failed if k < first]:
            del cache.failed[slot]
        for q, st, slot, b, c, total in finished:
            if lo <= slot < closed:
                cache.finished.setdefault(slot, []).append((q, st, b, c, total))
        for q, slot, c in failed:
            if lo <= slot < closed:
                cache.failed.setdefault(slot, []).append((q, c))
        for slot in range(max(lo, first), closed):
            cache.finished.setdefault(slot, [])
            cache.failed.setdefault(slot, [])
        if until is not None:  # what this call did not read comes from the cache
            finished += [(q, st, slot, b, c, total)
                         for slot, rows in cache.finished.items() if first <= slot < until
                         for q, st, b, c, total in rows]
            failed += [(q, slot, c) for slot, rows in cache.failed.items()
                       if first <= slot < until for q, c in rows]
        cache.until = max(closed, until or closed)

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
    hist: dict[str | None, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    sums: dict[str | None, float] = defaultdict(float)
    total_hist = hist[None]
    for queue, state, slot, b, count, total in finished:
        i = slot - first
        if not 0 <= i < n:
            continue
        series[queue][state][i] += count
        if b is not None:  # a completed job's run time
            hist[queue][b] += count
            total_hist[b] += count
            sums[queue] += total
            sums[None] += total
    for queue, slot, count in failed:
        if 0 <= slot - first < n:
            series[queue]["failed"][slot - first] += count
    runtimes: dict[str | None, RunTime] = {}
    for key, h in hist.items():
        samples = sum(h.values())
        runtimes[key] = RunTime(samples, sums[key] / samples if samples else None, _p95(h, samples))
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
            )
        )
        made = out[-1]
        out[-1] = dataclasses.replace(made, state=queue_state(
            paused=made.paused, counts=made.counts, workers=made.workers,
            lag=made.pickup_lag_seconds, completed=made.completed, failed=made.failed))

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
