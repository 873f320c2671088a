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
import textwrap
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import psycopg

from forklift import _enqueue as _enq
from forklift._context import JobContext
from forklift._errors import ConfigError, ForkliftError
from forklift._host import Host
from forklift._names import check_name
from forklift._retry import Backoff
from forklift._sqltext import render
from forklift._steps import Query, Steps, drive, drive_async

__all__ = ["MAX_RATE", "RUNNER_KIND", "Backfill", "BackfillError", "BackfillHost",
           "BackfillNotFound", "BackfillNotLive", "Clock", "FrozenClock", "InvalidRate",
           "SystemClock", "check_rate", "declare", "definition_steps", "runner_row",
           "sync_definitions", "sync_definitions_now"]

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


def takes(fn: Callable[..., Any], n: int) -> bool:
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
        from forklift._backfill_run import Runner

        return Runner(app, ctx, ref.run).run()

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
