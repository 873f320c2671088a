"""What a handler receives besides its payload."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from forklift._base.errors import ConfigError
from forklift._jobs.attempt_log import DEFAULT_CAPS, LEVELS, AttemptLog

if TYPE_CHECKING:
    from forklift._features.flow.locks import Lock

T = TypeVar("T")

_EVENTS = threading.Lock()  # guards the lazy creation of JobContext.cancelled


@dataclass(frozen=True)
class Progress:
    done: float
    total: float | None = None
    note: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"done": self.done, "total": self.total, "note": self.note}


class JobCancelled(Exception):
    """Raised by :meth:`JobContext.raise_if_cancelled`: the worker told the attempt to stop.

    The worker records the attempt by ``reason`` (``cancelled``, ``timeout``, ``interrupted``,
    ``lease_lost``), as it does for a handler that returns after being told; let it propagate.
    """

    code = "cancelled"

    def __init__(self, reason: str) -> None:
        super().__init__(f"the attempt was told to stop ({reason})")
        self.reason = reason


class JobContext:
    """Facts about the running attempt, and the handler's lines back to forklift.

    ``cancelled`` is set when the job is cancelled by an operator, times out, loses its lease
    or is interrupted by a draining worker. Async handlers are also cancelled outright; a sync
    handler runs in a thread that cannot be stopped from outside, so it should call
    ``ctx.raise_if_cancelled()`` (or check ``ctx.is_cancelled()``) between units of work. Once
    told, the signal decides the attempt's outcome whatever the handler returns.
    """

    def __init__(
        self,
        *,
        job_id: int,
        kind: str,
        queue: str,
        attempt: int,
        max_attempts: int,
        fence: int,
        worker_id: str,
        meta: dict[str, Any],
        on_progress: Callable[[Progress], None] | None = None,
        on_publish: Callable[[Any], None] | None = None,
        locks: Any = None,
        notes: Any = None,
        log_caps: tuple[int, int] = DEFAULT_CAPS,
    ) -> None:
        self.job_id = job_id
        self.kind = kind
        self.queue = queue
        self.attempt = attempt
        self.max_attempts = max_attempts
        self.fence = fence
        self.worker_id = worker_id
        self.meta = meta
        #: Why ``cancelled`` was set: cancelled, timeout, lease_lost, lock_lost or interrupted.
        self.cancel_reason: str | None = None
        # Both events are made on first use: most handlers never look, and making them for
        # every job costs more than a no-op job itself.
        self._cancelled: threading.Event | None = None
        self._cancelled_async: asyncio.Event | None = None
        self._on_progress = on_progress
        self._on_publish = on_publish
        # The worker's attempts (note_progress/note_partial by fence), in place of two
        # callbacks made for every job when few jobs ever report progress.
        self._notes = notes
        self._locks = locks  # the worker's lock service (forklift._features.flow.worker_locks)
        # The attempt's log, made by the first line: a job that logs nothing carries none.
        self._log_caps = log_caps
        self._log: AttemptLog | None = None

    @property
    def cancelled(self) -> threading.Event:
        """Set when the handler should stop; a threading.Event so sync handlers can wait on it."""
        event = self._cancelled
        if event is None:
            with _EVENTS:  # a sync handler's thread may ask while the loop cancels
                event = self._cancelled
                if event is None:
                    event = threading.Event()
                    if self.cancel_reason is not None:
                        event.set()
                    self._cancelled = event
        return event

    def is_cancelled(self) -> bool:
        return self.cancel_reason is not None

    def raise_if_cancelled(self) -> None:
        """Raise :class:`JobCancelled` if the attempt was told to stop; call it between units
        of work. However the handler ends once told, the signal decides the outcome."""
        if self.cancel_reason is not None:
            raise JobCancelled(self.cancel_reason)

    async def wait_cancelled(self) -> None:
        """Await until the job is cancelled (for async handlers that select on it)."""
        if self._cancelled_async is None:
            self._cancelled_async = asyncio.Event()
            if self.cancel_reason is not None:
                self._cancelled_async.set()
        await self._cancelled_async.wait()

    def progress(self, done: float, total: float | None = None, note: str | None = None) -> None:
        """Record progress; written in batches, fenced on this attempt's lease."""
        if self._notes is not None:
            self._notes.note_progress(self.fence, Progress(done, total, note))
        elif self._on_progress is not None:
            self._on_progress(Progress(done, total, note))

    def publish(self, partial: Any) -> None:
        """Publish a partial result, readable while the job runs; replaced by the final result."""
        if self._notes is not None:
            self._notes.note_partial(self.fence, partial)
        elif self._on_publish is not None:
            self._on_publish(partial)

    def log(self, message: str, /, *, level: str = "info", **fields: Any) -> None:
        """Add a line to this attempt's log, stored with its outcome and shown by ``forklift
        jobs show`` and the console. ``fields`` are kept beside the message; both are scrubbed
        of secrets as error messages are. Past the kind's caps (``log_lines=``,
        ``log_bytes=``) lines are dropped and a last line says so."""
        if level not in LEVELS:
            raise ConfigError(f"level must be one of {', '.join(LEVELS)}, not {level!r}",
                              field="level")
        self.attempt_log().add(level, message, fields)

    def attempt_log(self) -> AttemptLog:
        """This attempt's log (made on first use)."""
        log = self._log
        if log is None:
            with _EVENTS:  # a sync handler's thread and a capturing logger may race
                log = self._log
                if log is None:
                    log = self._log = AttemptLog(*self._log_caps)
        return log

    def lock(self, key: str, *, ttl: float = 30.0, wait: float = 0.0) -> Lock:
        """A lock on ``key`` with a fencing token: ``async with ctx.lock(k) as token`` in an
        async handler, ``with`` in a sync one. See :mod:`forklift._features.flow.locks`."""
        if self._locks is None:
            raise ConfigError("ctx.lock() needs a worker: outside jobs use app.lock()")
        lock: Lock = self._locks.lock(self, key, ttl, wait)
        return lock

    # -- durable steps (forklift._features.durable.steps): nothing is loaded until a handler calls one --
    async def step(self, name: str, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        """Run ``fn(*args, **kwargs)`` once per job: a later attempt returns its stored result.

        ``fn`` may be sync or async; its result is stored on its first success."""
        from forklift._features.durable import steps
        from forklift._features.durable.runtime import attempt_steps

        return await steps.step(self, attempt_steps(self), name, fn, args, kwargs)

    def step_sync(self, name: str, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """:meth:`step` for a sync handler (``fn`` a plain function)."""
        from forklift._features.durable import steps
        from forklift._features.durable.runtime import attempt_steps

        state = attempt_steps(self)
        return steps.step_sync(self, state, name, fn, args, kwargs)  # type: ignore[no-any-return]

    async def sleep(self, name: str, duration: timedelta | float) -> None:
        """Park the job for ``duration`` (a step named ``name``): its slot and lease are given
        back at once, and it runs again after that, finished steps skipped."""
        from forklift._features.durable import waits
        from forklift._features.durable.runtime import attempt_steps

        await waits.sleep(self, attempt_steps(self), name, duration)

    def sleep_sync(self, name: str, duration: timedelta | float) -> None:
        from forklift._features.durable import waits
        from forklift._features.durable.runtime import attempt_steps

        waits.sleep_sync(self, attempt_steps(self), name, duration)

    async def wait_for_event(
        self, event: str, *, match: Any = None, timeout: timedelta | float | None = None,
        name: str | None = None, on_timeout: Literal["return", "raise"] = "return",
    ) -> Any:
        """Park until an event ``event`` whose data contains ``match`` commits after this wait
        began; returns its data, or None at ``timeout`` (``on_timeout="raise"``: WaitTimedOut)."""
        from forklift._features.durable import waits
        from forklift._features.durable.runtime import attempt_steps

        return await waits.wait_for_event(self, attempt_steps(self), event, match, timeout, name,
                                          on_timeout)

    def wait_for_event_sync(
        self, event: str, *, match: Any = None, timeout: timedelta | float | None = None,
        name: str | None = None, on_timeout: Literal["return", "raise"] = "return",
    ) -> Any:
        from forklift._features.durable import waits
        from forklift._features.durable.runtime import attempt_steps

        return waits.wait_for_event_sync(self, attempt_steps(self), event, match, timeout, name,
                                         on_timeout)

    def _cancel(self, reason: str) -> None:
        if self.cancel_reason is None:
            self.cancel_reason = reason
        with _EVENTS:
            event = self._cancelled
        if event is not None:
            event.set()
        if self._cancelled_async is not None:
            self._cancelled_async.set()  # the worker calls _cancel on its event loop
