"""Hooks: ``app.on("enqueue" | "start" | "settle" | "dead", fn)``, sync or async callables.

A hook is called with one :class:`HookEvent`. Hooks run off the job's path: the worker (or the
enqueuing caller) only appends the event to a bounded in-memory queue and goes on, so a hook can
never fail a job or hold it up. One thread per app runs the queue, each hook call bounded by
``timeout`` seconds (default 5): a sync hook runs in a small thread pool and an async one on the
thread's event loop, and one that runs over its bound is left behind and counted. A hook that
raises is logged (logger ``forklift.hooks``) and counted. When the queue is full (``maxsize``,
default 10,000 events: hooks slower than the jobs), new events are dropped and counted; the
counts are in ``app.hooks.stats`` (and in the Prometheus metrics).

When each fires:

- ``enqueue``: after a job is inserted (for ``conn=`` enqueues, before the caller commits: a
  rollback still fired it). ``event.job`` is the returned :class:`~forklift.Job`; a bulk
  enqueue (``enqueue_many``) fires one event a job with ``job`` and ``state`` None.
- ``start``: a worker is about to run an attempt's handler.
- ``settle``: the worker has the attempt's outcome (``event.state``: completed, retryable,
  scheduled, dead, cancelled; ``event.code``; ``event.error``, the scrubbed error entry), just
  before writing it. A write the fence refuses (the lease was lost) still fired it.
- ``dead``: as ``settle``, for an outcome that makes the job dead.

An attempt whose lease expired (its worker died or froze) has its outcome written by the
leader's rescue: the leader fires ``settle`` for it (``event.code`` ``lease_expired``, or
``worker_lost``) and ``dead`` when it made the job dead; ``event.worker_id`` is the leader's
and ``event.fence`` is None.

With no hook registered for a point, it costs one truthiness test.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import logging
import queue
import threading
import time
import weakref
from collections.abc import Awaitable, Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from forklift._base.errors import ConfigError
from forklift._jobs import lifecycle

if TYPE_CHECKING:
    from forklift._jobs.insert import Row
    from forklift._jobs.job import Job

Event = Literal["enqueue", "start", "settle", "dead"]
EVENTS: tuple[Event, ...] = ("enqueue", "start", "settle", "dead")
Hook = Callable[["HookEvent"], Any]

log = logging.getLogger("forklift.hooks")


@dataclass(frozen=True)
class HookEvent:
    event: Event
    job_id: int
    kind: str
    queue: str
    attempt: int = 0
    fence: int | None = None
    worker_id: str | None = None
    state: str | None = None
    code: str | None = None
    error: dict[str, Any] | None = None
    job: Job | None = None  # enqueue only
    at: float = field(default_factory=time.time)


@dataclass
class HookStats:
    calls: int = 0
    failures: int = 0  # raised
    timeouts: int = 0  # ran past the bound
    dropped: int = 0  # the queue was full


class Hooks:
    """The hooks of one app and the thread that runs them."""

    def __init__(self, *, timeout: float = 5.0, maxsize: int = 10_000) -> None:
        self.timeout = timeout
        self.by_event: dict[str, list[Hook]] = {e: [] for e in EVENTS}
        self.stats = HookStats()
        self._queue: queue.Queue[tuple[Hook, HookEvent] | None] = queue.Queue(maxsize)
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._pending = 0

    def add(self, event: str, fn: Hook) -> None:
        if event not in self.by_event:
            raise ConfigError(f"hook event must be one of {', '.join(EVENTS)}, not {event!r}")
        if not callable(fn):
            raise ConfigError(f"a hook must be callable, not {type(fn).__name__}")
        self.by_event[event].append(fn)

    def emit(self, event: HookEvent) -> None:
        """Queue ``event`` for every hook of its kind; never blocks, never raises."""
        for fn in self.by_event[event.event]:
            with self._lock:
                self._pending += 1
            try:
                self._queue.put_nowait((fn, event))
            except queue.Full:
                with self._idle:
                    self._pending -= 1
                    self._idle.notify_all()
                self.stats.dropped += 1
                continue
            if self._thread is None:
                self._start()

    def wait_idle(self, timeout: float = 10.0) -> bool:
        """Wait until every queued hook call has ended (tests, and a worker stopping)."""
        deadline = time.monotonic() + timeout
        with self._idle:
            while self._pending:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._idle.wait(left)
        return True

    # -- the runner thread ----------------------------------------------------------------------
    def _start(self) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="forklift-hooks",
                                                daemon=True)
                self._thread.start()

    def _run(self) -> None:
        pool = ThreadPoolExecutor(2, thread_name_prefix="forklift-hook")
        loop = asyncio.new_event_loop()
        try:
            while True:
                item = self._queue.get()
                if item is None:
                    return
                loop.run_until_complete(self._call(pool, *item))
                with self._idle:
                    self._pending -= 1
                    self._idle.notify_all()
        finally:
            loop.close()
            pool.shutdown(wait=False)

    async def _call(self, pool: ThreadPoolExecutor, fn: Hook, event: HookEvent) -> None:
        self.stats.calls += 1
        try:
            if inspect.iscoroutinefunction(fn):
                await asyncio.wait_for(fn(event), self.timeout)
            else:
                loop = asyncio.get_running_loop()
                done = await asyncio.wait_for(loop.run_in_executor(pool, fn, event), self.timeout)
                if inspect.isawaitable(done):
                    await asyncio.wait_for(_awaited(done), self.timeout)
        except TimeoutError:
            self.stats.timeouts += 1
            log.warning("%s hook %s for job %s ran past %.1fs; left behind", event.event,
                        _name(fn), event.job_id, self.timeout,
                        extra={"job_id": event.job_id, "kind": event.kind})
        except Exception:
            self.stats.failures += 1
            log.exception("%s hook %s for job %s raised", event.event, _name(fn), event.job_id,
                          extra={"job_id": event.job_id, "kind": event.kind})


async def _awaited(value: Awaitable[Any]) -> Any:
    return await value


def _name(fn: Hook) -> str:
    return str(getattr(fn, "__qualname__", None) or repr(fn))


#: The hooks of each app (any object an app's hooks are keyed by: a ``Forklift``).
_REGISTRIES: weakref.WeakKeyDictionary[object, Hooks] = weakref.WeakKeyDictionary()


def of(app: object) -> Hooks | None:
    """The app's hooks, or None when it has none (the cheap test every lifecycle point makes)."""
    return _REGISTRIES.get(app)


def register(app: object, event: str, fn: Hook) -> Hook:
    """``app.on(event, fn)``: add a hook; returns ``fn`` (so it works as a decorator's end)."""
    hooks = _REGISTRIES.get(app)
    if hooks is None:
        hooks = _REGISTRIES.setdefault(app, Hooks())
    hooks.add(event, fn)
    return fn


def configure(app: object, *, timeout: float | None = None, maxsize: int | None = None) -> Hooks:
    """Set the bound of each hook call (seconds) and the queue's size, before hooks run."""
    hooks = _REGISTRIES.get(app)
    if hooks is None:
        hooks = _REGISTRIES.setdefault(app, Hooks())
    if timeout is not None:
        if timeout <= 0:
            raise ConfigError(f"a hook timeout must be positive, not {timeout!r}")
        hooks.timeout = timeout
    if maxsize is not None:
        if maxsize < 1:
            raise ConfigError(f"a hook queue must hold at least one event, not {maxsize!r}")
        hooks._queue = queue.Queue(maxsize)
    return hooks


def emit_enqueued(app: object, job: Job) -> None:
    hooks = _REGISTRIES.get(app)
    if hooks is not None and hooks.by_event["enqueue"]:
        hooks.emit(HookEvent("enqueue", job.id, job.kind, job.queue, attempt=job.attempt,
                             state=job.state, job=job))


def emit_enqueued_rows(app: object, rows: Sequence[Row], ids: Sequence[int]) -> None:
    """A bulk enqueue stored ``rows`` as ``ids``: one event each (no ``job``, no ``state``:
    the bulk insert returns ids only)."""
    hooks = _REGISTRIES.get(app)
    if hooks is not None and hooks.by_event["enqueue"]:
        for row, job_id in zip(rows, ids, strict=True):
            hooks.emit(HookEvent("enqueue", job_id, row.kind, row.queue))


# -- the worker's side ----------------------------------------------------------------------------
def attach(life: lifecycle.Lifecycle) -> None:
    """Register the lifecycle points the app's hooks need (none: nothing per attempt)."""
    app, wid = life.worker.app, life.worker.id
    # Looked up at each rescue, as hooks may be added while the worker runs; rescues are rare.
    life.on_rescued.append(lambda rescued: emit_rescued(app, wid, rescued))
    # The leader's sweep of jobs past their start-by deadline: ``settle`` and ``dead`` events.
    life.on_expired.append(lambda ended: emit_rescued(app, wid, ended))
    hooks = _REGISTRIES.get(app)
    if hooks is None:
        return
    if hooks.by_event["start"]:
        def started(rec: lifecycle.Attempt) -> None:
            j = rec.job
            hooks.emit(HookEvent("start", j.id, j.kind, j.queue, j.attempt, j.fence, wid))

        life.on_start.append(started)
    if hooks.by_event["settle"] or hooks.by_event["dead"]:
        def settled(rec: lifecycle.Attempt, outcome: lifecycle.Settled) -> None:
            j = rec.job
            event = HookEvent("settle", j.id, j.kind, j.queue, j.attempt, j.fence, wid,
                              state=outcome.next, code=outcome.code, error=outcome.error)
            if hooks.by_event["settle"]:
                hooks.emit(event)
            if outcome.next == "dead" and hooks.by_event["dead"]:
                hooks.emit(HookEvent("dead", j.id, j.kind, j.queue, j.attempt, j.fence, wid,
                                     state="dead", code=outcome.code, error=outcome.error))

        life.on_settle.append(settled)


def emit_rescued(app: object, worker_id: str, rescued: Iterable[lifecycle.Rescued]) -> None:
    """The leader ended these jobs (its rescue: their lease expired; its sweep: their start-by
    deadline passed): ``settle`` and, for the jobs it made dead (``worker_lost``, their last
    attempt, ``expired``), ``dead``."""
    hooks = _REGISTRIES.get(app)
    if hooks is None:
        return
    for r in rescued:
        code = r.error.get("code")
        event = HookEvent("settle", r.id, r.kind, r.queue, r.attempt, None, worker_id,
                          state=r.state, code=code, error=r.error)
        if hooks.by_event["settle"]:
            hooks.emit(event)
        if r.state == "dead" and hooks.by_event["dead"]:
            hooks.emit(dataclasses.replace(event, event="dead"))


lifecycle.observe(attach)
