"""Batch calls: how the started jobs of a batch kind are gathered into calls of its handler.

A job of a batch kind (``@app.batch_job``) starts like any other: it takes one of the
worker's slots, its lease is renewed by the heartbeat, and its start is told to the
lifecycle. Instead of a handler call of its own it joins the kind's gathering call, which
starts when it holds ``max`` jobs, else right after the claim that started them (the jobs one
claim hands to free slots are started together) or, with ``wait``, that many seconds after
its first job. So a call takes at most the jobs the worker has slots for: a worker of
``concurrency`` N runs at most N jobs of batch kinds at once, in however many calls.

A kind without ``max`` never reaches this module: the worker makes it on the first job of a
batch kind.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from forklift._jobs.lifecycle import job_fields
from forklift._worker.batch_call import BatchCall
from forklift._worker.batch_execute import run_call

if TYPE_CHECKING:
    from forklift._worker.running import Running
    from forklift._worker.settle import Outcome
    from forklift._worker.state import WorkerState

log = logging.getLogger("forklift.worker")

__all__ = ["BatchCalls"]


class Ends(Protocol):
    """The attempts service, as a call's jobs end and its timeout interrupts them."""

    runners: set[asyncio.Task[None]]

    def end(self, rec: Running, outcome: Outcome | None) -> None: ...
    def interrupt(self, rec: Running, reason: str) -> None: ...


@dataclass
class _Gathering:
    recs: list[Running]
    timer: asyncio.Handle


class BatchCalls:
    """Gathers started jobs of batch kinds into calls, and runs each call in a task."""

    def __init__(self, state: WorkerState, attempts: Ends, result_limit: int) -> None:
        self.state = state
        self.attempts = attempts
        self.result_limit = result_limit
        self._gathering: dict[str, _Gathering] = {}
        #: Calls made (for the worker's stats and tests).
        self.calls = 0

    def add(self, rec: Running) -> None:
        """A started job of a batch kind joins its kind's gathering call."""
        kind = rec.kind
        assert kind is not None and kind.batch_max is not None
        loop = self.state.loop
        assert loop is not None
        group = self._gathering.get(kind.name)
        if group is None:
            timer: asyncio.Handle = (loop.call_later(kind.batch_wait, self.launch, kind.name)
                                     if kind.batch_wait > 0
                                     else loop.call_soon(self.launch, kind.name))
            group = self._gathering[kind.name] = _Gathering([], timer)
        group.recs.append(rec)
        if len(group.recs) >= kind.batch_max:
            self.launch(kind.name)

    def launch(self, name: str) -> None:
        """Start the kind's gathering call now (full, or its wait is over)."""
        group = self._gathering.pop(name, None)
        if group is None:
            return
        group.timer.cancel()
        kind = group.recs[0].kind
        assert kind is not None and self.state.loop is not None
        call: BatchCall[Running] = BatchCall(kind, group.recs)
        for rec in group.recs:
            rec.call = call
        if kind.timeout:
            call.timer = self.state.loop.call_later(kind.timeout, self._time_out, call)
        self.calls += 1
        task = self.state.loop.create_task(self._run(call), name="forklift-batch-call")
        call.task = task
        self.attempts.runners.add(task)  # cancelled with the runners at teardown
        task.add_done_callback(self.attempts.runners.discard)

    def _time_out(self, call: BatchCall[Running]) -> None:
        for rec in call.recs:
            self.attempts.interrupt(rec, "timeout")

    async def _run(self, call: BatchCall[Running]) -> None:
        try:
            ends = await run_call(call, self.state.executor, self.result_limit, self.state.id)
        except asyncio.CancelledError:
            # The worker is being torn down: nothing may be written (the leases run out).
            self._close(call)
            for rec in call.recs:
                self.attempts.end(rec, None)
            raise
        except Exception as exc:
            log.error("internal error running a batch call of %s", call.kind.name,
                      exc_info=exc, extra=job_fields(call.recs[0].job))
            ends = [(rec, None) for rec in call.recs]
        self._close(call)
        for rec, outcome in ends:
            self.attempts.end(rec, outcome)

    @staticmethod
    def _close(call: BatchCall[Running]) -> None:
        if call.timer is not None:
            call.timer.cancel()
            call.timer = None

    def __repr__(self) -> str:
        return f"<BatchCalls gathering={sorted(self._gathering)} calls={self.calls}>"


