"""Paced backfills: walk a large set page by page, at a rate an operator can change live.

A backfill is declared over two functions: ``read(cursor, limit) -> (items, next_cursor)`` and
``process(items, conn)``. A run is a job of the internal kind ``forklift._backfill`` that loops
within its attempt, one page per transaction:

    BEGIN; read the checkpoint; read(cursor, limit); process(items, conn);
    UPDATE the checkpoint (cursor, counters) WHERE job_id = mine AND pages_done = as read; COMMIT

``conn`` is that transaction's connection, so when ``process`` writes to the same database its
writes and the checkpoint commit together: a crash (kill -9 included) before the commit rolls the
page back and the next attempt redoes it from the checkpoint; after the commit, the page is done
and never seen again. Writes ``process`` makes elsewhere (HTTP, another database) are
at-least-once: a crash between them and the commit repeats that page.

An attempt runs for a slice of :data:`SLICE` seconds and then snoozes (not an attempt) until its
next page is due, so a draining worker lets go of a run within seconds.

Pacing is a token bucket on the backfill's clock (:class:`SystemClock`, or a
:class:`FrozenClock` a test advances by hand). The run row's ``rate`` is re-read at every
checkpoint and while waiting, so a rate change applies from the next page; so do pause and
cancel. A wait longer than :data:`SNOOZE_AFTER` seconds on the real clock gives the worker slot
back (the job snoozes) instead of sleeping in it.

A page that raises fails the attempt, and the job retries by its policy (``max_attempts``,
``retry``); after a page succeeds on a retry the run moves to a fresh job, so each page gets the
full budget. When a page exhausts it the run stops as ``failed`` with its cursor kept, and
``backfills resume`` continues from there.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import logging
import textwrap
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import psycopg
from psycopg.types.json import Jsonb

from forklift import _enqueue as _enq
from forklift._context import JobContext
from forklift._db import connect
from forklift._errors import ConfigError, ForkliftError
from forklift._host import Host
from forklift._names import check_name
from forklift._retry import Backoff, Fail, Snooze
from forklift._scrub import error_entry
from forklift._sqltext import render
from forklift._steps import Query, Steps, drive, drive_async

__all__ = ["MAX_RATE", "RUNNER_KIND", "Backfill", "BackfillError", "BackfillHost",
           "BackfillNotFound", "BackfillNotLive", "Clock", "FrozenClock", "InvalidRate",
           "SystemClock", "check_rate", "declare", "definition_steps", "runner_row",
           "sync_definitions", "sync_definitions_now"]

log = logging.getLogger("forklift.backfill")

RUNNER_KIND = "forklift.backfill"
RUNNER_QUEUE = "backfills"
#: On the real clock, a wait longer than this snoozes the job rather than holding a slot.
SNOOZE_AFTER = 5.0
#: While waiting for a token, the run row is re-read this often (pause, cancel, rate).
POLL_EVERY = 1.0
#: An attempt gives its slot back (snoozes until its next page is due) after this many seconds
#: of its clock, so a draining worker is not held for a whole backfill and runs spread over the
#: workers.
SLICE = 5.0
#: How much pace history a run keeps, in seconds.
PACE_KEEP = 300
PACE_WINDOW = 30.0
MAX_RATE = 10_000.0

LIVE_RUN_STATES = ("running", "paused", "failed")


class BackfillError(ForkliftError):
    code = "backfill_error"


class BackfillNotFound(BackfillError):
    code = "backfill_not_found"


class BackfillNotLive(BackfillError):
    """The action needs a live run (running, paused or failed) and there is none in that state."""

    code = "backfill_not_live"


class InvalidRate(BackfillError):
    code = "invalid_rate"


def check_rate(rate: float) -> float:
    value = float(rate)
    if not 0 < value <= MAX_RATE or value != value:
        raise InvalidRate(
            f"rate must be pages per second, above 0 and at most {MAX_RATE:g}, not {rate!r}",
            rate=rate,
        )
    return value


# -- clocks and the token bucket ----------------------------------------------------------------
class Clock(Protocol):
    #: True when waiting moves the clock rather than time passing (tests): never snooze on it.
    virtual: bool

    def now(self) -> float:
        """Monotonic seconds."""
        ...

    def sleep(self, seconds: float, cancelled: threading.Event) -> None:
        """Wait ``seconds`` or until ``cancelled`` is set."""
        ...


class SystemClock:
    virtual = False

    def now(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float, cancelled: threading.Event) -> None:
        cancelled.wait(seconds)


class FrozenClock:
    """A clock that moves only when told to; a wait on it advances it at once.

    Tests read ``waits`` (every wait asked for) and ``now()`` instead of spending real time.
    """

    virtual = True

    def __init__(self, start: float = 1000.0) -> None:
        self._now = start
        self._lock = threading.Lock()
        self.waits: list[float] = []

    def now(self) -> float:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._now += seconds

    def sleep(self, seconds: float, cancelled: threading.Event) -> None:
        with self._lock:
            self.waits.append(seconds)
            self._now += seconds


class TokenBucket:
    """``rate`` tokens per second, holding at most ``burst``; a page costs one token."""

    def __init__(self, rate: float, clock: Clock, burst: float = 1.0) -> None:
        self.rate = rate
        self.burst = burst
        self.clock = clock
        self.tokens = burst
        self.stamp = clock.now()

    def _refill(self) -> None:
        now = self.clock.now()
        self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now

    def set_rate(self, rate: float) -> None:
        if rate != self.rate:
            self._refill()  # tokens earned so far were earned at the old rate
            self.rate = rate

    def wait_time(self) -> float:
        """Seconds until a token is available (0 when one is)."""
        self._refill()
        return 0.0 if self.tokens >= 1.0 else (1.0 - self.tokens) / self.rate

    def take(self) -> None:
        self._refill()
        self.tokens -= 1.0


# -- pace -------------------------------------------------------------------------------------------
def pace_add(pace: list[list[float]], at: float, pages: int, items: int) -> list[list[float]]:
    """Add a page to per-second samples ``[[second, pages, items], ...]``, dropping old ones."""
    second = float(int(at))
    kept = [p for p in pace if len(p) == 3 and p[0] > second - PACE_KEEP]
    if kept and kept[-1][0] == second:
        kept[-1] = [second, kept[-1][1] + pages, kept[-1][2] + items]
    else:
        kept.append([second, float(pages), float(items)])
    return kept


def pace_rates(
    pace: Sequence[Sequence[float]], now: float, since: float, window: float = PACE_WINDOW
) -> tuple[float, float]:
    """(items/s, pages/s) over the last ``window`` seconds (or since ``since`` if later)."""
    span = min(window, max(1.0, now - since))
    recent = [p for p in pace if p[0] > now - span - 1]
    return sum(p[2] for p in recent) / span, sum(p[1] for p in recent) / span


def pace_series(
    pace: Sequence[Sequence[float]], now: float, buckets: int = 30, width: float = 2.0
) -> list[float]:
    """Items/s in ``buckets`` buckets of ``width`` seconds, oldest first (for a sparkline)."""
    series = [0.0] * buckets
    start = now - buckets * width
    for second, _pages, items in pace:
        index = int((second - start) // width)
        if 0 <= index < buckets:
            series[index] += items / width
    return series


# -- declarations -----------------------------------------------------------------------------------
class BackfillHost(Host, Protocol):
    """What backfills need from an app: where the database is, its backfills, and a way to
    declare the internal kind that carries a run."""

    @property
    def dsn(self) -> str: ...

    @property
    def backfills(self) -> dict[str, Backfill]: ...

    @property
    def job(self) -> Callable[..., Callable[[Callable[..., Any]], object]]: ...


Reader = Callable[..., tuple[Sequence[Any], Any]]
Processor = Callable[[list[Any], psycopg.Connection[Any]], Any]


def _takes(fn: Callable[..., Any], n: int) -> bool:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= n or any(p.kind == p.VAR_POSITIONAL for p in params)


def code_hash(*parts: Any) -> str:
    """A short hash of the source of the given functions or classes (compiled code if no source)."""
    digest = hashlib.sha256()
    for part in parts:
        if part is None:
            continue
        target = part.__func__ if hasattr(part, "__func__") else part
        try:
            text = textwrap.dedent(inspect.getsource(target)).encode()
        except (OSError, TypeError):
            code = getattr(target, "__code__", None)
            text = code.co_code if code is not None else repr(target).encode()
        digest.update(text)
    return digest.hexdigest()[:16]


@dataclass
class Backfill:
    """A declared backfill: how to read pages, how to process them, how fast."""

    name: str
    read: Reader
    process: Processor
    total: Callable[..., int | None] | None
    page_size: int
    rate: float
    max_attempts: int
    retry: Backoff
    clock: Clock
    code_hash: str
    app: BackfillHost = field(repr=False)

    def runner_row(self, run_id: int) -> _enq.Row:
        return runner_row(run_id, self.name, RUNNER_QUEUE, self.max_attempts,
                          json.dumps(self.retry.to_json()))


def runner_row(run_id: int, name: str, queue: str, max_attempts: int, retry: str | None) -> _enq.Row:
    """The job that carries a run (built from a definition row, so no app is needed)."""
    return _enq.Row(
        queue=queue, kind=RUNNER_KIND, args=json.dumps({"run": run_id}), priority=0,
        max_attempts=max_attempts, at=None, delay=0.0, unique_key=None, tags=[],
        meta=json.dumps({"backfill": name, "run": run_id}), retry=retry,
    )


def declare(
    app: BackfillHost,
    name: str,
    target: Any,
    *,
    read: Reader | None,
    total: Callable[..., int | None] | None,
    page_size: int,
    rate: float,
    max_attempts: int,
    retry: Backoff | None,
    clock: Clock | None,
) -> Backfill:
    """Register a backfill (``app.backfill``): ``target`` is the process function, or a class
    (instantiated without arguments) or object with ``read`` and ``process`` (and optionally
    ``total``) methods."""
    check_name(name, "backfill", field="name")
    if name in app.backfills:
        raise ConfigError(f"backfill {name!r} is already declared")
    if page_size < 1:
        raise ConfigError(f"page_size must be at least 1, not {page_size}")
    if max_attempts < 1:
        raise ConfigError(f"max_attempts must be at least 1, not {max_attempts}")
    try:
        check_rate(rate)
    except InvalidRate as exc:
        raise ConfigError(exc.message) from None
    obj = target() if inspect.isclass(target) else target
    hashed: tuple[Any, ...]
    if callable(obj) and not hasattr(obj, "process"):
        if read is None:
            raise ConfigError(f"backfill {name!r}: give read= with a process function")
        process, hashed = obj, (read, obj, total)
    else:
        read = read or getattr(obj, "read", None)
        process = getattr(obj, "process", None)
        total = total or getattr(obj, "total", None)
        if read is None or process is None:
            raise ConfigError(f"backfill {name!r} needs read(cursor, limit) and process(items, conn)")
        hashed = (target, read, process, total) if inspect.isclass(target) else (read, process, total)
    for fn in (read, process, total):
        if fn is not None and inspect.iscoroutinefunction(fn):
            raise ConfigError(
                f"backfill {name!r}: read, process and total are plain functions (they run in"
                " a worker thread, inside the page's transaction)"
            )
    _ensure_runner(app)
    definition = Backfill(
        name=name, read=read, process=process, total=total, page_size=page_size,
        rate=float(rate), max_attempts=max_attempts,
        retry=retry or Backoff(kind="exponential", base=1.0, max=60.0),
        clock=clock or SystemClock(), code_hash=code_hash(*hashed), app=app,
    )
    app.backfills[name] = definition
    return definition


@dataclass
class RunRef:
    run: int


def _ensure_runner(app: BackfillHost) -> None:
    if RUNNER_KIND in app.kinds:
        return

    def run_backfill(ctx: JobContext, ref: RunRef) -> dict[str, Any]:
        return _Runner(app, ctx, ref.run).run()

    app.job(
        name=RUNNER_KIND, queue=RUNNER_QUEUE, max_attempts=5, failure_codes=["unknown_backfill"]
    )(run_backfill)


SYNC_SQL = """
INSERT INTO {s}.backfills AS t (name, code_hash, page_size, rate, queue, kind, max_attempts, retry)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s::jsonb)
ON CONFLICT (name) DO UPDATE SET
    code_hash = excluded.code_hash, page_size = excluded.page_size, rate = excluded.rate,
    queue = excluded.queue, kind = excluded.kind, max_attempts = excluded.max_attempts,
    retry = excluded.retry, updated_at = now()
WHERE (t.code_hash, t.page_size, t.rate, t.queue, t.kind, t.max_attempts, t.retry)
    IS DISTINCT FROM (excluded.code_hash, excluded.page_size, excluded.rate, excluded.queue,
                      excluded.kind, excluded.max_attempts, excluded.retry)
"""


def _sync_params(b: Backfill) -> tuple[Any, ...]:
    return (b.name, b.code_hash, b.page_size, b.rate, RUNNER_QUEUE, RUNNER_KIND, b.max_attempts,
            json.dumps(b.retry.to_json()))


def definition_steps(backfills: Iterable[Backfill], schema: str) -> Steps[None]:
    """Record backfill definitions (the leader, and ``--app`` on the CLI)."""
    for b in backfills:
        yield Query(render(SYNC_SQL, schema), _sync_params(b))


async def sync_definitions(
    conn: psycopg.AsyncConnection[Any], app: BackfillHost, schema: str
) -> None:
    await drive_async(conn, definition_steps(app.backfills.values(), schema))


def sync_definitions_now(
    conn: psycopg.Connection[Any], app: BackfillHost, schema: str, only: str | None = None
) -> None:
    chosen = [b for b in app.backfills.values() if only is None or b.name == only]
    drive(conn, definition_steps(chosen, schema))


# -- the runner -------------------------------------------------------------------------------------
STATUS_SQL = "SELECT name, state, rate, job_id, total FROM {s}.backfill_runs WHERE id = %s"
PAGE_START_SQL = """
SELECT state, job_id, cursor, pages_done, pace, extract(epoch FROM now())::float8
FROM {s}.backfill_runs WHERE id = %s
"""
# Fenced on the job that owns the run and the page count it read: a runner that lost its job,
# or raced another runner, commits nothing (its page's writes roll back with it). A pause that
# arrived mid-page lets that page land; a cancel does not.
CHECKPOINT_SQL = """
UPDATE {s}.backfill_runs SET
    cursor = CASE WHEN %(done)s THEN cursor ELSE %(cursor)s END,
    pages_done = pages_done + 1,
    items_done = items_done + %(items)s,
    pace = %(pace)s,
    state = CASE WHEN %(done)s THEN 'completed' ELSE state END,
    finished_at = CASE WHEN %(done)s THEN now() ELSE finished_at END,
    updated_at = now()
WHERE id = %(id)s AND job_id = %(job)s AND pages_done = %(pages)s
  AND state IN ('running', 'paused')
RETURNING state, rate, pages_done, items_done
"""
FAILURE_SQL = """
UPDATE {s}.backfill_runs SET
    last_error = %s, error_count = error_count + 1, updated_at = now(),
    state = CASE WHEN %s THEN 'failed' ELSE state END
WHERE id = %s AND job_id = %s AND state = 'running'
"""
TOTAL_SQL = "UPDATE {s}.backfill_runs SET total = %s WHERE id = %s AND total IS NULL"
HAND_OVER_SQL = """
UPDATE {s}.backfill_runs SET job_id = %s, updated_at = now()
WHERE id = %s AND job_id = %s AND state = 'running' RETURNING id
"""


class _Interrupted(Exception):
    """The attempt was asked to stop; the worker decides the outcome from the reason."""


class _Superseded(Exception):
    """The checkpoint's fence refused this page: roll it back."""


@dataclass
class _Status:
    name: str
    state: str
    rate: float
    job_id: int | None
    total: int | None


class _Runner:
    def __init__(self, app: BackfillHost, ctx: JobContext, run_id: int) -> None:
        self.app, self.ctx, self.run_id = app, ctx, run_id
        self.schema = app.schema

    def run(self) -> dict[str, Any]:
        with connect(self.app.dsn, "backfill", self.ctx.worker_id) as conn:
            self.conn = conn
            status = self._status()
            if status is None:
                return {"stopped": "missing"}
            if not self._mine(status):
                return {"stopped": status.state}
            definition = self.app.backfills.get(status.name)
            if definition is None:
                self._record(None, f"this worker's app declares no backfill {status.name!r}", True)
                raise Fail("unknown_backfill", f"no backfill named {status.name!r} is declared")
            self.b = definition
            if status.total is None and definition.total is not None:
                self._estimate(definition)
            return self._loop(TokenBucket(status.rate, definition.clock))

    def _mine(self, status: _Status) -> bool:
        return status.state == "running" and status.job_id == self.ctx.job_id

    def _status(self) -> _Status | None:
        row = self.conn.execute(render(STATUS_SQL, self.schema), (self.run_id,)).fetchone()
        return _Status(*row) if row else None

    def _estimate(self, b: Backfill) -> None:
        assert b.total is not None
        try:
            value = b.total(self.conn) if _takes(b.total, 1) else b.total()
            if value is not None:
                self.conn.execute(render(TOTAL_SQL, self.schema), (int(value), self.run_id))
        except Exception as exc:  # an estimate is a nicety; the run goes on without it
            log.warning("backfill %s: total estimate failed (%s)", b.name, type(exc).__name__)

    def _loop(self, bucket: TokenBucket) -> dict[str, Any]:
        began = self.b.clock.now()
        while True:
            stopped = self._await_token(bucket)
            if stopped is not None:
                return stopped
            try:
                state, rate, pages, items = self._page()
            except _Superseded:
                status = self._status()
                if status is None or not self._mine(status):
                    return {"stopped": status.state if status else "missing"}
                continue
            if state != "running":
                return {"stopped" if state != "completed" else "completed": state,
                        "pages": pages, "items": items}
            bucket.set_rate(rate)
            if self.ctx.attempt > 1:
                handed = self._hand_over()
                if handed is not None:
                    return {"handed_over": handed, "pages": pages, "items": items}
            if self.b.clock.now() - began >= SLICE:
                # Back when the next page is due: the new attempt's bucket starts full, so it
                # must not start early. A virtual clock spends the wait here, where it can.
                due = bucket.wait_time()
                if self.b.clock.virtual:
                    self.b.clock.sleep(due, self.ctx.cancelled)
                    due = 0.0
                raise Snooze(due)

    def _await_token(self, bucket: TokenBucket) -> dict[str, Any] | None:
        clock = self.b.clock
        polled = clock.now()
        while True:
            if self.ctx.is_cancelled():
                raise _Interrupted(self.ctx.cancel_reason or "cancelled")
            wait = bucket.wait_time()
            if wait <= 0:
                bucket.take()
                return None
            if not clock.virtual and wait > SNOOZE_AFTER:
                raise Snooze(wait)
            clock.sleep(min(wait, POLL_EVERY), self.ctx.cancelled)
            if clock.now() - polled >= POLL_EVERY:
                polled = clock.now()
                status = self._status()
                if status is None or not self._mine(status):
                    return {"stopped": status.state if status else "missing"}
                bucket.set_rate(status.rate)

    def _page(self) -> tuple[str, float, int, int]:
        b, conn = self.b, self.conn
        try:
            with conn.transaction():
                got = conn.execute(render(PAGE_START_SQL, self.schema), (self.run_id,)).fetchone()
                if got is None:
                    raise _Superseded()
                state, job_id, cursor, pages_done, pace, db_now = got
                if state != "running" or job_id != self.ctx.job_id:
                    raise _Superseded()
                if _takes(b.read, 3):
                    items, next_cursor = b.read(cursor, b.page_size, conn)
                else:
                    items, next_cursor = b.read(cursor, b.page_size)
                batch = list(items)
                if batch:
                    b.process(batch, conn)
                row = conn.execute(render(CHECKPOINT_SQL, self.schema), {
                    "done": next_cursor is None,
                    "cursor": Jsonb(next_cursor),
                    "items": len(batch),
                    "pace": Jsonb(pace_add(list(pace or []), db_now, 1, len(batch))),
                    "id": self.run_id,
                    "job": self.ctx.job_id,
                    "pages": pages_done,
                }).fetchone()
                if row is None:
                    raise _Superseded()
                return str(row[0]), float(row[1]), int(row[2]), int(row[3])
        except (_Superseded, _Interrupted):
            raise
        except Exception as exc:
            final = isinstance(exc, Fail) or self.ctx.attempt >= self.ctx.max_attempts
            self._record(exc, None, final)
            raise

    def _record(self, exc: BaseException | None, message: str | None, final: bool) -> None:
        entry = error_entry(exc, code="error", attempt=self.ctx.attempt,
                            worker_id=self.ctx.worker_id, message=message)
        try:
            self.conn.execute(
                render(FAILURE_SQL, self.schema),
                (Jsonb(entry), final, self.run_id, self.ctx.job_id),
            )
        except psycopg.Error as db_exc:
            log.warning("backfill run %s: could not record its error (%s)", self.run_id, db_exc)

    def _hand_over(self) -> int | None:
        """Move the run to a fresh job, so the next page gets the whole retry budget."""
        try:
            with self.conn.transaction():
                job = _enq.insert_one(self.conn, self.schema, self.b.runner_row(self.run_id),
                                      "return_existing")
                moved = self.conn.execute(
                    render(HAND_OVER_SQL, self.schema), (job.id, self.run_id, self.ctx.job_id)
                ).fetchone()
                if moved is None:
                    raise _Superseded()
                return job.id
        except _Superseded:
            return None
