"""Refusals of the operator API, each with a stable ``code``.

``usage_error`` marks input the caller got wrong (a malformed filter, an impossible range); the
CLI exits 2 for those and 1 for every other refusal.
"""

from __future__ import annotations

from typing import ClassVar

from forklift._base.errors import ForkliftError

__all__ = ["InvalidFilter", "NotCancellable", "NotDeletable", "NotRunnable", "QueueNotFound"]


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
