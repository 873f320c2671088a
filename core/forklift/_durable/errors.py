"""The refusals of durable workflows: each a ForkliftError with a stable ``code``."""

from __future__ import annotations

from forklift._errors import EnqueueRefused, ForkliftError


class UnknownDependency(EnqueueRefused):
    """``after=`` named a job that does not exist (dependencies must exist at enqueue)."""

    code = "unknown_dependency"


class MessageNotFound(ForkliftError):
    code = "message_not_found"
