"""An attempt in one of the worker's slots: its job, handler context, lease and what is left
to write for it. Shared by the services that start, renew, interrupt and settle attempts."""

from __future__ import annotations

import asyncio
import contextvars
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from forklift._jobs.claimed import Claimed

if TYPE_CHECKING:
    from forklift._app.context import JobContext
    from forklift._app.kind import JobKind
    from forklift._worker.batch_call import BatchCall

__all__ = ["Running"]


@dataclass
class Running:
    job: Claimed
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
    #: Claimed past its start-by deadline: its handler never starts (it ends ``expired``).
    expired: bool = False
    #: The context the attempt's task runs in (a start hook may set one, e.g. a trace span).
    context: contextvars.Context | None = None
    #: The batch handler's call the job runs in (a batch kind's), once the call started.
    call: BatchCall[Any] | None = None
    #: The worker's slots it takes: its weight, at most all of them.
    slots: int = 1
