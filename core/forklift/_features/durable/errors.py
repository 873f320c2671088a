"""The refusals of durable workflows: each a ForkliftError with a stable ``code``."""

from __future__ import annotations

from forklift._base.errors import EnqueueRefused, ForkliftError


class UnknownDependency(EnqueueRefused):
    """``after=`` named a job that does not exist (dependencies must exist at enqueue)."""

    code = "unknown_dependency"


class MessageNotFound(ForkliftError):
    code = "message_not_found"


class HandlerRefusal(ForkliftError):
    """Raised inside a handler by forklift's own durable API for a mistake that would repeat on
    every attempt: the attempt fails for good (dead) with this code."""

    code = "handler_refusal"


_REFUSALS: dict[str, type[HandlerRefusal]] = {}


def refused(exc: ForkliftError) -> HandlerRefusal:
    """``exc`` (an argument refused inside a handler: not JSON, over the cap...) as a refusal
    that fails the attempt for good, keeping its code and message."""
    cls = _REFUSALS.get(exc.code)
    if cls is None:
        cls = _REFUSALS[exc.code] = type(type(exc).__name__, (HandlerRefusal,), {"code": exc.code})
    return cls(exc.message, **exc.detail)


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


class WaitTimedOut(HandlerRefusal):
    """``ctx.wait_for_event(..., on_timeout="raise")`` reached its deadline without an event."""

    code = "wait_timeout"


class Park(BaseException):
    """Raised by ``ctx.sleep`` and ``ctx.wait_for_event`` once the job is parked in the database
    (its slot and lease given back in the same statement): the attempt is over and nothing more
    may be written for it. A BaseException, so a handler's ``except Exception`` lets it pass."""

    def __init__(self, job_id: int, until: object) -> None:
        super().__init__(f"job {job_id} parked until {until}")
        self.job_id = job_id
        self.until = until
