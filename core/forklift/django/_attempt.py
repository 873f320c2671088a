"""One attempt of a Django task on the worker, as Django's signals report it.

``task_started`` is sent when an attempt starts, ``task_finished`` when an attempt that returns
or raises leaves the task in its final state (SUCCESSFUL, or FAILED when no attempt is left or
the failure is terminal). An attempt that will run again sends no ``task_finished``, nor does
one the worker told to stop (timeout, cancel, drain): there the worker decides the outcome.
Both carry the ``TaskResult`` as it stands, with the attempt's own error already in
``errors``. Receivers run on the worker, and one that raises is logged, never taken for a
failure of the task. A job whose task no longer imports sends neither: there is no task."""

from __future__ import annotations

import dataclasses
import logging
from traceback import format_exception
from typing import Any

from forklift._app.context import JobContext
from forklift._base.retry import Fail
from forklift._base.scrub import scrub
from forklift.django._compat import (
    BaseTaskBackend,
    Task,
    TaskError,
    TaskResult,
    TaskResultStatus,
    task_finished,
    task_started,
)
from forklift.django._results import to_result

log = logging.getLogger("forklift.django")


def _send(signal: Any, sender: type, result: TaskResult[Any]) -> None:
    for receiver, answer in signal.send_robust(sender, task_result=result):
        if isinstance(answer, BaseException):
            log.error("a receiver of Django's %s failed for task %s: %r",
                      "task_started" if signal is task_started else "task_finished",
                      result.id, receiver, exc_info=answer)


def _task_error(exc: BaseException) -> TaskError:
    """The error as Django's own backends record it (the runner's frames cut, text scrubbed)."""
    if isinstance(exc, Fail) and exc.__cause__ is not None:
        exc = exc.__cause__  # the runner's refusal stands for this error
    cls, tb = type(exc), exc.__traceback__
    text = "".join(format_exception(cls, exc, tb.tb_next if tb is not None else None))
    return TaskError(exception_class_path=f"{cls.__module__}.{cls.__qualname__}",
                     traceback=scrub(text, limit=64_000))


@dataclasses.dataclass
class Attempt:
    """The running attempt's ``TaskResult`` and where its signals come from."""

    ctx: JobContext
    backend: BaseTaskBackend
    result: TaskResult[Any]

    @classmethod
    def start(cls, ctx: JobContext, backend: BaseTaskBackend, task: Task[Any, Any]) -> Attempt:
        """Read the job as Django sees it now (RUNNING) and send ``task_started``."""
        job = backend.app.get_job(ctx.job_id)
        if job is None:  # pragma: no cover - the worker holds the job's lease
            raise Fail("task_not_found", f"builtins.LookupError: job {ctx.job_id} is gone")
        attempt = cls(ctx, backend, to_result(job, task, backend.alias))
        _send(task_started, type(backend), attempt.result)
        return attempt

    def succeeded(self, value: Any) -> None:
        self._finish(TaskResultStatus.SUCCESSFUL, [], value)

    def failed(self, exc: BaseException) -> None:
        if self.ctx.is_cancelled():  # told to stop: the worker's signal decides the outcome
            return
        if isinstance(exc, Fail) or self.ctx.attempt >= self.ctx.max_attempts:
            self._finish(TaskResultStatus.FAILED, [_task_error(exc)], None)

    def _finish(self, status: Any, errors: list[TaskError], value: Any) -> None:
        from django.utils import timezone

        finished = dataclasses.replace(self.result, status=status, finished_at=timezone.now(),
                                       errors=[*self.result.errors, *errors])
        if status == TaskResultStatus.SUCCESSFUL:
            object.__setattr__(finished, "_return_value", value)
        _send(task_finished, type(self.backend), finished)
