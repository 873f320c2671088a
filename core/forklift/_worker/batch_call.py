"""One call of a batch handler in the worker: its jobs' attempts, its context and its task.

Each job of the call keeps its own attempt (a :class:`~forklift._worker.running.Running` in
the worker's slots, its lease renewed with the others); the call holds them together so a
signal aimed at the call (its timeout) reaches every job, and the call stops only when every
one of its jobs was told to stop.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

if TYPE_CHECKING:
    from forklift._app.batch_context import BatchContext
    from forklift._app.context import JobContext
    from forklift._app.kind import JobKind

__all__ = ["BatchCall"]


class Told(Protocol):
    """An attempt of the call, as far as the call looks at it: whether it was told to stop."""

    @property
    def ctx(self) -> JobContext: ...


A = TypeVar("A", bound=Told)


@dataclass
class BatchCall(Generic[A]):
    """The call, over its attempts (:class:`~forklift._worker.running.Running` in a worker)."""

    kind: JobKind[Any, Any]
    recs: list[A]
    #: The handler's context, made when the call starts (its live jobs known).
    ctx: BatchContext | None = None
    #: The task running the handler (what a stop of the whole call cancels, async handlers).
    task: asyncio.Task[Any] | None = None
    timer: asyncio.TimerHandle | None = None
    #: Whether the handler is running (an async one may then be cancelled).
    calling: bool = False
    #: The attempts handed to the handler (those told to stop before it, or whose payload did
    #: not validate, are not).
    started: list[A] = field(default_factory=list)

    def told(self) -> None:
        """A job of the call was told to stop: once all were, so is the call (its context;
        an async handler's task is cancelled too). One job alone stops nothing else."""
        live = self.started or self.recs
        reasons = [r.ctx.cancel_reason for r in live]
        if any(reason is None for reason in reasons):
            return
        if self.ctx is not None and self.ctx.cancel_reason is None:
            self.ctx._cancel(str(reasons[-1]))
            if self.kind.is_async and self.calling and self.task is not None:
                self.task.cancel()
