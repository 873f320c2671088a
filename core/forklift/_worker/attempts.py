"""The life of an attempt inside the worker: start, stop signals, lost leases, the outcome.

Attempts are keyed by fence, not job id: a job can be claimed again (after a rescue) while an
abandoned thread of its earlier attempt still runs here.

Lifecycle points
    :class:`Hooks` holds callables run when an attempt starts (its handler is about to run) and
    when it settles (its outcome is queued for the completer). Tracing, metrics and user hooks
    attach there; with no hook registered the cost is one truthiness test per point.
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from forklift._app.app import JobKind
from forklift._app.context import JobContext, Progress
from forklift._worker import claim as claims
from forklift._worker import settle
from forklift._worker.execute import progress_json, run_attempt, stopped
from forklift._worker.runner import BURST, InContext
from forklift.logs import job_fields

if TYPE_CHECKING:
    from forklift._worker.worker import Worker

log = logging.getLogger("forklift.worker")


@dataclass
class Running:
    job: claims.Claimed
    kind: JobKind[Any, Any] | None
    ctx: JobContext
    lease_deadline: float  # monotonic time the lease runs out unless renewed
    began: float  # monotonic time the attempt started
    #: A buffered job's start, not yet recorded (the heartbeater's record_starts).
    unrecorded: bool
    #: The runner running the handler, while it runs (what an interrupt cancels).
    task: asyncio.Task[None] | None = None
    timer: asyncio.TimerHandle | None = None
    progress: str | None = None
    partial: str | None = None
    dirty: bool = False
    finished: bool = False
    lost: bool = False  # the lease is gone: nothing more may be written for this attempt
    released: bool = False  # the drain wrote its outcome; whatever the thread returns is moot
    #: The context the attempt's task runs in (a start hook may set one, e.g. a trace span).
    context: contextvars.Context | None = None


@dataclass
class Hooks:
    """Callables at an attempt's lifecycle points (none by default, and then free)."""

    on_start: list[Callable[[Running], None]] = field(default_factory=list)
    on_settle: list[Callable[[Running, settle.Outcome], None]] = field(default_factory=list)
    #: jobs taken by one claim; (outcomes written, refused by the fence) per settle statement
    on_claim: list[Callable[[int], None]] = field(default_factory=list)
    on_flush: list[Callable[[int, int], None]] = field(default_factory=list)


class Attempts:
    """Runs claimed jobs in the worker's slots and turns their ends into outcomes."""

    def __init__(self, worker: Worker) -> None:
        self.w = worker
        self.hooks = Hooks()
        self.running: dict[int, Running] = {}
        # Started attempts waiting for a runner (forklift._worker.runner), the runners, those
        # parked for want of work, and how many runners will look at the queue unprompted.
        self._ready: collections.deque[Running] = collections.deque()
        self.runners: set[asyncio.Task[None]] = set()
        self._parked: list[asyncio.Future[None]] = []
        self._looking = 0
        # Attempts run back to back this turn of the event loop, by all runners together: each
        # runner counting its own let ten of them run 640 instant jobs in one turn, while
        # outcome writes, claims and heartbeats waited (forklift._worker.runner).
        self._burst = 0

    def _new_turn(self) -> None:
        self._burst = 0

    def start(self, job: claims.Claimed, lease_deadline: float) -> None:
        w = self.w
        assert w._loop is not None
        w.stats.claimed += 1
        kind = w.app.kinds.get(job.kind)
        ctx = JobContext(
            job_id=job.id, kind=job.kind, queue=job.queue, attempt=job.attempt,
            max_attempts=job.max_attempts, fence=job.fence, worker_id=w.id, meta=job.meta,
            locks=w.locks, notes=self,
        )
        rec = Running(job, kind, ctx, lease_deadline, time.monotonic(), not job.started)
        self.running[job.fence] = rec
        w._held[job.fence] = job.id
        w._idle.clear()
        if self.hooks.on_start:
            for hook in self.hooks.on_start:
                hook(rec)
        if kind is not None and kind.timeout:
            rec.timer = w._loop.call_later(kind.timeout, self.interrupt, rec, "timeout")
        self._ready.append(rec)
        if len(self._ready) > self._looking:
            # No runner will look at the queue before this attempt's turn: wake or make one.
            self._looking += 1
            if self._parked:
                self._parked.pop().set_result(None)
            else:
                task = w._loop.create_task(self._runner(), name="forklift-runner")
                self.runners.add(task)
                task.add_done_callback(self.runners.discard)

    async def _runner(self) -> None:
        """Run started attempts one after another (forklift._worker.runner); retire after one
        that suspended. Counted in ``_looking`` whenever it is not inside an attempt or parked."""
        ready = self._ready
        task = asyncio.current_task()
        assert task is not None
        loop = task.get_loop()
        while True:
            if not ready:
                parked = loop.create_future()
                self._parked.append(parked)
                self._looking -= 1
                await parked  # start() counted us looking again
                continue
            if self._burst >= BURST:
                await asyncio.sleep(0)  # behind the turn's end (_new_turn), scheduled first
                continue
            self._burst += 1
            if self._burst == BURST:
                loop.call_soon(self._new_turn)
            self._looking -= 1
            if await self._run(ready.popleft(), task):
                return

    async def _run(self, rec: Running, task: asyncio.Task[None]) -> bool:
        """One attempt in this runner; True when the runner must retire (the handler
        suspended, so something may hold on to this task as the attempt's)."""
        w = self.w
        if rec.ctx.cancel_reason is not None:
            # Told to stop before its turn came (a cancel, a lost lease, the drain cutoff).
            self._looking += 1
            self._end(rec, None if w._closing else stopped(rec.job, rec.ctx, rec.kind))
            return False
        attempt = InContext(run_attempt(rec.job, rec.kind, rec.ctx, w._executor,
                                        w.app.payload_limit),
                            rec.context or contextvars.copy_context())
        rec.task = task
        outcome: settle.Outcome | None = None
        try:
            outcome = await attempt
        except asyncio.CancelledError:
            # The worker is being torn down, or something cancelled the attempt's task without
            # telling its context: nothing may be written (the lease runs out, it is rescued).
            rec.task = None
            self._end(rec, None)
            if w._closing:
                raise
            return True
        except Exception as exc:
            log.error("internal error running job %s", rec.job.id, exc_info=exc,
                      extra=job_fields(rec.job))
        rec.task = None
        retire = attempt.suspended or task.cancelling() > 0
        if not retire:
            self._looking += 1  # before the bookkeeping, which may start the next attempts
        self._end(rec, outcome)
        return retire

    def _end(self, rec: Running, outcome: settle.Outcome | None) -> None:
        """:meth:`_finished`, and a runner that outlives whatever goes wrong in it (a hook)."""
        try:
            self._finished(rec, outcome)
        except Exception:
            log.exception("internal error finishing job %s", rec.job.id,
                          extra=job_fields(rec.job))

    def interrupt(self, rec: Running, reason: str) -> None:
        """Tell a handler to stop: its context first, then (async handlers) the task."""
        if rec.finished or rec.ctx.cancel_reason is not None:
            return
        rec.ctx._cancel(reason)
        if rec.kind is not None and rec.kind.is_async and rec.task is not None:
            rec.task.cancel()

    def cancel_job(self, job_id: int) -> None:
        for rec in list(self.running.values()):
            if rec.job.id == job_id:
                self.interrupt(rec, "cancelled")

    def lose(self, rec: Running, why: str) -> None:
        """The lease of a running attempt is gone: stop it, stop renewing, write nothing."""
        if rec.lost or rec.finished:
            return
        rec.lost = True
        self.w._held.pop(rec.job.fence, None)
        self.w.stats.lease_lost += 1
        log.warning(
            "job %s (fence %s): lease lost, %s; cancelling its handler, nothing will be written",
            rec.job.id, rec.job.fence, why, extra=job_fields(rec.job),
        )
        self.interrupt(rec, "lease_lost")  # a no-op when it was already told to stop

    def record(self, rec: Running, outcome: settle.Outcome) -> None:
        """Queue an attempt's outcome for the completer."""
        outcome.job = rec.job
        if self.hooks.on_settle:
            for hook in self.hooks.on_settle:
                hook(rec, outcome)
        self.w.completer.add(outcome)

    def _finished(self, rec: Running, outcome: settle.Outcome | None) -> None:
        """Bookkeeping when an attempt ends, however it ends (``outcome`` None: nothing to
        write)."""
        w = self.w
        rec.finished = True
        if rec.timer is not None:
            rec.timer.cancel()
        if self.running.get(rec.job.fence) is rec:
            del self.running[rec.job.fence]
        w._done += 1
        w.producer.fill()
        w.producer.nudge()
        if not self.running:
            w._idle.set()
        if rec.released:
            return
        if rec.lost or outcome is None:
            w._held.pop(rec.job.fence, None)
            return
        if rec.dirty:
            outcome.progress = rec.progress
            if outcome.next != "completed" and outcome.partial is None:
                outcome.partial = rec.partial
        if outcome.next == "completed":
            w.stats.completed += 1
        else:
            w.stats.failed += 1
        self.record(rec, outcome)

    # -- progress -----------------------------------------------------------------------------
    def note_progress(self, fence: int, p: Progress) -> None:
        text = progress_json(p.to_json())
        self._call_in_loop(self._set_interim, fence, text, None)

    def note_partial(self, fence: int, value: Any) -> None:
        text = progress_json(value)
        self._call_in_loop(self._set_interim, fence, None, text)

    def _call_in_loop(self, fn: Callable[..., None], *args: Any) -> None:
        loop = self.w._loop
        assert loop is not None
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            fn(*args)
        else:
            loop.call_soon_threadsafe(fn, *args)

    def _set_interim(self, fence: int, progress: str | None, partial: str | None) -> None:
        rec = self.running.get(fence)
        if rec is None or rec.lost:
            return
        if progress is not None:
            rec.progress = progress
        if partial is not None:
            rec.partial = partial
        rec.dirty = True
