"""Refusals of the operator API, each with a stable ``code``.

``usage_error`` marks input the caller got wrong (a malformed filter, an impossible range); the
CLI exits 2 for those and 1 for every other refusal.
"""

from __future__ import annotations

from typing import ClassVar

from forklift._base.errors import ForkliftError

__all__ = ["InvalidFilter", "NotAWorkflow", "NotCancellable", "NotDeletable", "NotPausable",
           "NotReplayable", "NotRunnable", "PauseBlocked", "QueueNotFound", "UnknownStep"]


class InvalidFilter(ForkliftError):
    """A filter, sort key, cursor, duration or range that cannot be used; nothing was done."""

    code = "invalid_filter"
    usage_error: ClassVar[bool] = True


class QueueNotFound(ForkliftError):
    code = "queue_not_found"


class NotCancellable(ForkliftError):
    code = "not_cancellable"


class NotDeletable(ForkliftError):
    code = "not_deletable"


class NotRunnable(ForkliftError):
    """Run now applies to a job waiting for its time: scheduled or retryable."""

    code = "not_runnable"


class NotReplayable(ForkliftError):
    """The job is live or cancelled: only a completed or dead workflow is replayed."""

    code = "not_replayable"


class NotAWorkflow(ForkliftError):
    """The job recorded no step, so there is nothing to replay from."""

    code = "not_a_workflow"


class UnknownStep(ForkliftError):
    """The job never recorded a step of that name; ``steps`` lists the ones it did."""

    code = "unknown_step"


class NotPausable(ForkliftError):
    """The workflow's job has finished: there is nothing left to pause."""

    code = "not_pausable"


class PauseBlocked(ForkliftError):
    """A transaction that inserted jobs stayed open past the pause's lock wait: a kind's pause
    waits for every open insert to end (so none slips past it), and enqueues wait behind the
    pause meanwhile, so the wait is short and the pause refused rather than stretched."""

    code = "pause_blocked"

