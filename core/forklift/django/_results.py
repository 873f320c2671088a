"""A forklift job read back as Django's ``TaskResult``."""

from __future__ import annotations

from typing import Any

from forklift._jobs.job import Job
from forklift.django._compat import Task, TaskError, TaskResult, TaskResultStatus

_STATUS = {
    "scheduled": TaskResultStatus.READY,
    "available": TaskResultStatus.READY,
    "retryable": TaskResultStatus.READY,  # Django: "ready to be executed again"
    "running": TaskResultStatus.RUNNING,
    "completed": TaskResultStatus.SUCCESSFUL,
    "dead": TaskResultStatus.FAILED,
    "cancelled": TaskResultStatus.FAILED,
}
#: The class named by a TaskError for failures no exception of the task's raised (a timeout,
#: a lease that expired with its worker, an operator's cancel): its text names forklift's code.
FAILURE_CLASS = "forklift.django.TaskFailed"


class TaskFailed(Exception):
    """Stands for a failure forklift recorded without an exception of the task's."""


def _error(entry: dict[str, Any]) -> TaskError:
    kind = entry.get("type")
    path = (kind if "." in kind else f"builtins.{kind}") if isinstance(kind, str) else FAILURE_CLASS
    lines = ["Traceback (most recent call last):"]
    for frame in entry.get("traceback") or []:
        if isinstance(frame, dict):
            lines.append(f'  File "{frame.get("file")}", line {frame.get("line")},'
                         f" in {frame.get('func')}")
    message = entry.get("message")
    head = kind if isinstance(kind, str) else "TaskFailed"
    lines.append(f"{head}: [{entry.get('code')}] {message}" if message else
                 f"{head}: [{entry.get('code')}]")
    return TaskError(exception_class_path=path, traceback="\n".join(lines))


def to_result(job: Job, task: Task[Any, Any], alias: str) -> TaskResult[Any]:
    """``job`` as Django sees it: status, times, arguments, errors, workers, return value."""
    args = job.args if isinstance(job.args, dict) else {}
    errors = [e for e in job.errors if isinstance(e, dict)]
    # One worker id per attempt (Django's attempt count is len(worker_ids)): those of the
    # failed attempts from the error history, then the current holder's.
    workers = [str(e.get("worker") or "") for e in errors if e.get("code") != "interrupted"]
    if job.state in ("running", "completed") and job.worker_id:
        workers.append(job.worker_id)
    status = _STATUS[job.state]
    result: TaskResult[Any] = TaskResult(
        task=task,
        id=str(job.id),
        status=status,
        enqueued_at=job.created_at,
        started_at=job.attempted_at,  # forklift keeps the start of the latest attempt
        finished_at=job.finished_at,
        last_attempted_at=job.attempted_at,
        args=list(args.get("args") or []),
        kwargs=dict(args.get("kwargs") or {}),
        backend=alias,
        errors=[_error(e) for e in errors],
        worker_ids=workers,
    )
    if status == TaskResultStatus.SUCCESSFUL:
        object.__setattr__(result, "_return_value", job.result)
    return result
