"""The life of an attempt inside the worker: start, stop signals, lost leases, the outcome.

Attempts are keyed by fence, not job id: a job can be claimed again (after a rescue) while an
abandoned thread of its earlier attempt still runs here.

Lifecycle points
    An attempt's start (its handler is about to run), its outcome (queued for the completer)
    and a lost lease are told to the worker's :class:`~forklift._jobs.lifecycle.Lifecycle`,
    where tracing, metrics, logs and user hooks observe them; with nothing registered the cost
    is one truthiness test per point.
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from forklift._app.context import JobContext, Progress
from forklift._jobs.attempt_log import DEFAULT_CAPS
from forklift._jobs.lifecycle import Lifecycle, job_fields
from forklift._worker import claim as claims
from forklift._worker import settle
from forklift._worker.execute import expired, progress_json, run_attempt, stopped, with_log
from forklift._worker.runner import BURST, InContext
from forklift._worker.running import Running

if TYPE_CHECKING:
    from forklift._app.app import Forklift
    from forklift._worker.batch_calls import BatchCalls
    from forklift._worker.config import WorkerConfig
    from forklift._worker.state import WorkerState

log = logging.getLogger("forklift.worker")


class Slots(Protocol):
    """The producer, as attempts ending free its slots."""

    def fill(self) -> None: ...
    def nudge(self) -> None: ...


class Outcomes(Protocol):
    """The completer, as attempts hand it their outcomes."""

    def add(self, outcome: settle.Outcome) -> None: ...
    def add_log(self, job_id: int, attempt: int, lines: str) -> None: ...


class Attempts:
    """Runs claimed jobs in the worker's slots and turns their ends into outcomes."""

    def __init__(self, config: WorkerConfig, state: WorkerState, *, app: Forklift,
                 lifecycle: Lifecycle) -> None:
        self.config = config
        self.state = state
        self.app = app
        self.lifecycle = lifecycle
        #: The producer, the completer and the lock service (:meth:`connect`).
        self.producer: Slots | None = None
        self.completer: Outcomes | None = None
        self.locks: Any = None
        self.running = state.running
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
        #: Batch kinds' calls (forklift._worker.batch_calls), made on the first job of one.
        self.batch_calls: BatchCalls | None = None

    def connect(self, *, producer: Slots, completer: Outcomes, locks: Any) -> None:
        """The services attempts call, which call attempts in turn (built after them)."""
        self.producer, self.completer, self.locks = producer, completer, locks

    @property
    def hooks(self) -> Lifecycle:
        """The lifecycle attempts report to (its lists: ``on_start``, ``on_settle``...)."""
        return self.lifecycle

    def _new_turn(self) -> None:
        self._burst = 0

    def start(self, job: claims.Claimed, lease_deadline: float) -> None:
        assert self.state.loop is not None
        self.state.stats.claimed += 1
        kind = self.app.kinds.get(job.kind)
        ctx = JobContext(
            job_id=job.id, kind=job.kind, queue=job.queue, attempt=job.attempt,
            max_attempts=job.max_attempts, fence=job.fence, worker_id=self.state.id, meta=job.meta,
            locks=self.locks, notes=self,
            log_caps=DEFAULT_CAPS if kind is None else kind.log_caps,
        )
        rec = Running(job, kind, ctx, lease_deadline, time.monotonic(), not job.started)
        if job.weight is not None:
            rec.slots = min(job.weight, self.config.concurrency)
        self.running[job.fence] = rec
        self.state.busy += rec.slots
        self.state.held[job.fence] = job.id
        self.state.idle.clear()
        if job.expires is not None and job.expired:
            # Past its start-by deadline: the handler never starts, and neither does the
            # attempt for the observers (its outcome, dead with ``expired``, they do see).
            rec.expired = True
        elif self.lifecycle.on_start:
            self.lifecycle.started(rec)
        if kind is not None and kind.batch_max is not None and not rec.expired:
            self._batch_calls().add(rec)  # a call's timeout is the call's
            return
        if kind is not None and kind.timeout and not rec.expired:
            rec.timer = self.state.loop.call_later(kind.timeout, self.interrupt, rec, "timeout")
        self._ready.append(rec)
        if len(self._ready) > self._looking:
            # No runner will look at the queue before this attempt's turn: wake or make one.
            self._looking += 1
            if self._parked:
                self._parked.pop().set_result(None)
            else:
                task = self.state.loop.create_task(self._runner(), name="forklift-runner")
                self.runners.add(task)
                task.add_done_callback(self.runners.discard)

    def _batch_calls(self) -> BatchCalls:
        """The gatherer of batch kinds' calls, made for the first job of one."""
        calls = self.batch_calls
        if calls is None:
            from forklift._worker.batch_calls import BatchCalls

            calls = self.batch_calls = BatchCalls(self.state, self, self.app.payload_limit)
        return calls

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
        if rec.ctx.cancel_reason is not None:
            # Told to stop before its turn came (a cancel, a lost lease, the drain cutoff).
            self._looking += 1
            self._end(rec, None if self.state.closing else stopped(rec.job, rec.ctx, rec.kind))
            return False
        if rec.expired:
            self._looking += 1
            self.state.stats.expired += 1
            self._end(rec, expired(rec.job, rec.ctx))
            return False
        attempt = InContext(run_attempt(rec.job, rec.kind, rec.ctx, self.state.executor,
                                        self.app.payload_limit),
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
            if self.state.closing:
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

    def end(self, rec: Running, outcome: settle.Outcome | None) -> None:
        """An attempt run outside the runners (a batch call's) ended: :meth:`_end`."""
        self._end(rec, outcome)

    def interrupt(self, rec: Running, reason: str) -> None:
        """Tell a handler to stop: its context first, then (async handlers) the task."""
        if rec.finished or rec.ctx.cancel_reason is not None:
            return
        rec.ctx._cancel(reason)
        if rec.call is not None:
            rec.call.told()  # the call stops once every job of it was told
        elif rec.kind is not None and rec.kind.is_async and rec.task is not None:
            rec.task.cancel()

    def interrupt_fence(self, fence: int, reason: str) -> bool:
        """Tell the attempt under ``fence`` to stop; False when none runs here."""
        rec = self.running.get(fence)
        if rec is None:
            return False
        self.interrupt(rec, reason)
        return True

    def cancel_job(self, job_id: int) -> None:
        for rec in list(self.running.values()):
            if rec.job.id == job_id:
                self.interrupt(rec, "cancelled")

    def lose(self, rec: Running, why: str) -> None:
        """The lease of a running attempt is gone: stop it, stop renewing, write nothing."""
        if rec.lost or rec.finished:
            return
        rec.lost = True
        self.state.held.pop(rec.job.fence, None)
        self.state.stats.lease_lost += 1
        log.warning(
            "job %s (fence %s): lease lost, %s; cancelling its handler, nothing will be written",
            rec.job.id, rec.job.fence, why, extra=job_fields(rec.job),
        )
        self.interrupt(rec, "lease_lost")  # a no-op when it was already told to stop
        if self.lifecycle.on_lease_lost:
            self.lifecycle.lease_lost(rec)

    def record(self, rec: Running, outcome: settle.Outcome) -> None:
        """Queue an attempt's outcome for the completer."""
        outcome.job = rec.job
        if self.lifecycle.on_settle:
            self.lifecycle.settled(rec, outcome)
        assert self.completer is not None
        self.completer.add(outcome)

    def _finished(self, rec: Running, outcome: settle.Outcome | None) -> None:
        """Bookkeeping when an attempt ends, however it ends (``outcome`` None: nothing to
        write)."""
        rec.finished = True
        if rec.timer is not None:
            rec.timer.cancel()
        if self.running.get(rec.job.fence) is rec:
            del self.running[rec.job.fence]
            self.state.busy -= rec.slots
        self.state.done += 1
        assert self.producer is not None
        self.producer.fill()
        self.producer.nudge()
        if not self.running:
            self.state.idle.set()
        if rec.released:
            return
        if rec.lost or outcome is None:
            self.state.held.pop(rec.job.fence, None)
            if rec.ctx._log is not None and (lines := rec.ctx._log.stored()) is not None:
                # No outcome carries it (the lease was lost, or the handler parked the job):
                # the log is written on its own.
                assert self.completer is not None
                self.completer.add_log(rec.job.id, rec.job.attempt, lines)
            return
        if rec.ctx._log is not None:  # the handler logged (forklift._jobs.attempt_log)
            with_log(outcome, rec.ctx, rec.job)
        if rec.dirty:
            outcome.progress = rec.progress
            if outcome.next != "completed" and outcome.partial is None:
                outcome.partial = rec.partial
        if outcome.next == "completed":
            self.state.stats.completed += 1
        else:
            self.state.stats.failed += 1
        self.record(rec, outcome)

    # -- progress -----------------------------------------------------------------------------
    def note_progress(self, fence: int, p: Progress) -> None:
        text = progress_json(p.to_json())
        self._call_in_loop(self._set_interim, fence, text, None)

    def note_partial(self, fence: int, value: Any) -> None:
        text = progress_json(value)
        self._call_in_loop(self._set_interim, fence, None, text)

    def _call_in_loop(self, fn: Callable[..., None], *args: Any) -> None:
        loop = self.state.loop
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
