"""The two forklift kinds that run any Django task by its module path.

A Django ``@task`` is not declared to forklift one by one: the job's payload names the task
(``myapp.tasks.send_welcome``), and the worker imports it when it runs. Sync tasks run in the
worker's thread pool (``django.task``), async ones on its event loop (``django.atask``), so each
gets what forklift gives any handler of its kind: timeouts, cancellation, leases.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any

from forklift._app.app import Forklift
from forklift._app.context import JobContext
from forklift._base.retry import Fail
from forklift.django._compat import Task, TaskContext, TaskResult, TaskResultStatus, normalize_json

SYNC_KIND = "django.task"
ASYNC_KIND = "django.atask"
KINDS = (SYNC_KIND, ASYNC_KIND)
#: Terminal failures of the runner itself (running the task again would fail the same way).
FAILURE_CODES = ("task_not_found", "result_not_json")


@dataclass
class TaskCall:
    """A Django task call as stored in the job's payload (JSON, as Django normalises it)."""

    task: str  # module path of the Task object, e.g. "shop.tasks.send_receipt"
    args: list[Any] = field(default_factory=list)
    kwargs: dict[str, Any] = field(default_factory=dict)
    backend: str = "default"  # the TASKS alias it was enqueued through


def resolve(path: str) -> Task[Any, Any]:
    """The Task object at ``path``; a terminal ``task_not_found`` failure when there is none."""
    from django.utils.module_loading import import_string

    try:
        found = import_string(path)
    except ImportError as exc:
        raise Fail("task_not_found", f"no Django task at {path!r}: {exc}") from None
    if not isinstance(found, Task):
        raise Fail("task_not_found", f"{path!r} is a {type(found).__name__}, not a Django task")
    return found


def _call_args(ctx: JobContext, call: TaskCall, task: Task[Any, Any]) -> list[Any]:
    if not task.takes_context:
        return list(call.args)
    running = TaskResult(
        task=task, id=str(ctx.job_id), status=TaskResultStatus.RUNNING, enqueued_at=None,
        started_at=None, finished_at=None, last_attempted_at=None, args=call.args,
        kwargs=call.kwargs, backend=call.backend, errors=[],
        worker_ids=[ctx.worker_id or ""] * ctx.attempt,  # len() is Django's attempt number
    )
    return [TaskContext(task_result=running), *call.args]


def _returned(value: Any) -> Any:
    try:
        return normalize_json(value)
    except (TypeError, ValueError) as exc:
        raise Fail("result_not_json", f"the task's return value is not JSON: {exc}") from None


def run_sync(ctx: JobContext, call: TaskCall) -> Any:
    from django.db import close_old_connections

    task = resolve(call.task)
    # What Django does around a request: drop connections past CONN_MAX_AGE or broken, so a
    # long-lived worker thread never runs a task on a dead one.
    close_old_connections()
    try:
        value = task.func(*_call_args(ctx, call, task), **call.kwargs)
        if inspect.isawaitable(value):  # declared sync, returned a coroutine: run it here
            from asgiref.sync import async_to_sync

            async def wait() -> Any:
                return await value

            value = async_to_sync(wait)()
    finally:
        close_old_connections()
    return _returned(value)


async def run_async(ctx: JobContext, call: TaskCall) -> Any:
    task = resolve(call.task)
    value = task.func(*_call_args(ctx, call, task), **call.kwargs)
    if inspect.isawaitable(value):
        value = await value
    return _returned(value)


def declare(app: Forklift, queue: str) -> None:
    """Declare the runner kinds on ``app`` (once; a second backend on one app shares them)."""
    if SYNC_KIND not in app.kinds:
        app.job(name=SYNC_KIND, queue=queue, failure_codes=FAILURE_CODES)(run_sync)
    if ASYNC_KIND not in app.kinds:
        app.job(name=ASYNC_KIND, queue=queue, failure_codes=FAILURE_CODES)(run_async)
