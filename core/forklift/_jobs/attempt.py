"""What a feature needs of a running attempt, as a protocol.

Durable steps, waits and backfill runs are handed the handler's context; they read the facts
of the attempt (which job, which try, the fence its writes are checked against, the worker it
runs on) and whether it was told to stop. They are written against :class:`Attempt`, not
against :class:`forklift.JobContext`, which satisfies it structurally: the context lives above
the features and calls into them, so they must not import it back.
"""

from __future__ import annotations

import threading
from typing import Protocol

__all__ = ["Attempt"]


class Attempt(Protocol):
    """A running attempt of a job, as far as a feature needs one."""

    @property
    def job_id(self) -> int: ...

    @property
    def attempt(self) -> int:
        """1 on the first try."""
        ...

    @property
    def max_attempts(self) -> int: ...

    @property
    def fence(self) -> int:
        """The lease's fence: a write checked against it lands only while the attempt owns
        the job."""
        ...

    @property
    def worker_id(self) -> str: ...

    @property
    def cancel_reason(self) -> str | None:
        """Why the attempt was told to stop (cancelled, timeout, lease_lost...), or None."""
        ...

    @property
    def cancelled(self) -> threading.Event:
        """Set when the attempt is told to stop; a sync loop may wait on it."""
        ...

    def is_cancelled(self) -> bool: ...
