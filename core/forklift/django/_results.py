"""A forklift job read back as Django's ``TaskResult``."""

from __future__ import annotations

import linecache
import re
from typing import Any

from forklift._jobs.job import Job
from forklift.django._compat import Task, TaskError, TaskResult, TaskResultStatus
from forklift.django._kinds import FAILURE_CODES, RUNNER_FILE

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
_CLASS_PATH = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)+")


class TaskFailed(Exception):
    """Stands for a failure forklift recorded without an exception of the task's."""


def _task_frames(frames: list[Any]) -> list[dict[str, Any]]:
    """The frames from the task's function inward: the worker's and the runner's are cut, so
    the traceback starts where Django's own backends start it, at the task."""
    kept = [f for f in frames if isinstance(f, dict)]
    for i in range(len(kept) - 1, -1, -1):
        if str(kept[i].get("file", "")).replace("\\", "/").endswith(RUNNER_FILE):
            return kept[i + 1:]
    return kept


def _format(head: str, message: str | None, frames: list[dict[str, Any]]) -> str:
    """What ``traceback.format_exception`` writes, from the frames forklift stored: source lines
    are read here (linecache), where the task's code is deployed as on the worker."""
    lines: list[str] = []
    if frames:
        lines.append("Traceback (most recent call last):\n")
        for frame in frames:
            file, line = str(frame.get("file")), frame.get("line")
            lines.append(f'  File "{file}", line {line}, in {frame.get("func")}\n')
            source = linecache.getline(file, line).strip() if isinstance(line, int) else ""
            if source:
                lines.append(f"    {source}\n")
    lines.append(f"{head}: {message}\n" if message else f"{head}\n")
    return "".join(lines)


def to_error(entry: dict[str, Any]) -> TaskError:
    """One entry of forklift's error history as Django's ``TaskError``."""
    kind, code, message = entry.get("type"), entry.get("code"), entry.get("message")
    frames = _task_frames(entry.get("traceback") or [])
    if code in FAILURE_CODES and isinstance(message, str):
        # The runner's own refusals carry the class of the error they stand for.
        path, _, text = message.partition(": ")
        if _CLASS_PATH.fullmatch(path):
            head = path.removeprefix("builtins.")
            return TaskError(exception_class_path=path, traceback=_format(head, text, []))
    if isinstance(kind, str):
        path = kind if "." in kind else f"builtins.{kind}"
        return TaskError(exception_class_path=path, traceback=_format(kind, message, frames))
    text = f"{code}: {message}" if message else str(code)
    return TaskError(exception_class_path=FAILURE_CLASS,
                     traceback=_format(FAILURE_CLASS, text, frames))


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
        errors=[to_error(e) for e in errors],
        worker_ids=workers,
    )
    if status == TaskResultStatus.SUCCESSFUL:
        object.__setattr__(result, "_return_value", job.result)
    return result
