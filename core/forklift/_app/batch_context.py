"""What a batch handler receives besides its payloads: the call's jobs and its stop signal."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator, Sequence

from forklift._app.context import JobCancelled, JobContext

_EVENTS = threading.Lock()  # guards the lazy creation of BatchContext.cancelled


class BatchContext:
    """One call of a batch handler (``@app.batch_job``): ``jobs`` holds each job's own
    :class:`JobContext`, in the order of the payloads, for what belongs to one job (its id and
    attempt, ``progress``, ``publish``, ``log``, and its own ``cancelled``).

    ``cancelled`` is the call's signal: set once every job of the call was told to stop (the
    call's timeout, a draining worker's cutoff, each job cancelled or its lease lost). One
    job cancelled by an operator does not stop the call: that job ends ``cancelled`` when the
    call returns, whatever the handler returned for it, and the others go on.
    """

    def __init__(self, *, kind: str, queue: str, worker_id: str,
                 jobs: Sequence[JobContext]) -> None:
        self.kind = kind
        self.queue = queue
        self.worker_id = worker_id
        #: Each job's context, in the order of the payloads the handler was given.
        self.jobs: list[JobContext] = list(jobs)
        #: Why the call was told to stop (the last of its jobs' reasons), or None.
        self.cancel_reason: str | None = None
        self._cancelled: threading.Event | None = None
        self._cancelled_async: asyncio.Event | None = None

    def __len__(self) -> int:
        return len(self.jobs)

    def __iter__(self) -> Iterator[JobContext]:
        return iter(self.jobs)

    @property
    def cancelled(self) -> threading.Event:
        """Set when the whole call should stop; a threading.Event so sync handlers can wait."""
        event = self._cancelled
        if event is None:
            with _EVENTS:
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
        """Raise :class:`JobCancelled` if the call was told to stop (every job of it was)."""
        if self.cancel_reason is not None:
            raise JobCancelled(self.cancel_reason)

    async def wait_cancelled(self) -> None:
        """Await until the call is told to stop (for async handlers that select on it)."""
        if self._cancelled_async is None:
            self._cancelled_async = asyncio.Event()
            if self.cancel_reason is not None:
                self._cancelled_async.set()
        await self._cancelled_async.wait()

    def _cancel(self, reason: str) -> None:
        if self.cancel_reason is None:
            self.cancel_reason = reason
        with _EVENTS:
            event = self._cancelled
        if event is not None:
            event.set()
        if self._cancelled_async is not None:
            self._cancelled_async.set()  # the worker calls _cancel on its event loop
