"""The refusals of durable workflows: each a ForkliftError with a stable ``code``."""

from __future__ import annotations

from forklift._errors import EnqueueRefused, ForkliftError


class UnknownDependency(EnqueueRefused):
    """``after=`` named a job that does not exist (dependencies must exist at enqueue)."""

    code = "unknown_dependency"


class MessageNotFound(ForkliftError):
    code = "message_not_found"


class HandlerRefusal(ForkliftError):
    """Raised inside a handler by forklift's own durable API for a mistake that would repeat on
    every attempt: the attempt fails for good (dead) with this code."""

    code = "handler_refusal"


class InvalidStepName(HandlerRefusal):
    code = "invalid_step_name"


class DuplicateStep(HandlerRefusal):
    """Two steps (or sleeps, or waits) of one run share a name."""

    code = "duplicate_step"


class InvalidStepResult(HandlerRefusal):
    """A step's result does not validate or serialise: the step fails, nothing is stored."""

    code = "invalid_result"


class StepLeaseLost(ForkliftError):
    """A step's write was refused by the fence: the attempt lost its lease."""

    code = "lease_lost"
