"""The handlers of a backend's kinds: import the task the job names, call it, report it.

A task's return value is normalised as Django normalises it; one that is not JSON, or a module
path that no longer imports, fails the job at once (running it again would fail the same way),
recorded as the error Django's own backends record (``TypeError``/``ValueError``,
``ImportError``).
"""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

from forklift._app.app import Forklift
from forklift._app.context import JobContext
from forklift._base.retry import Fail
from forklift.django._attempt import Attempt
from forklift.django._compat import BaseTaskBackend, Task, TaskContext, normalize_json
from forklift.django._kinds import FAILURE_CODES, TaskCall, kinds_of


def _path(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def resolve(path: str) -> Task[Any, Any]:
    """The Task object at ``path``; a terminal ``task_not_found`` failure when there is none."""
    from django.utils.module_loading import import_string

    try:
        found = import_string(path)
    except ImportError as exc:
        raise Fail("task_not_found", f"{_path(type(exc))}: no Django task at {path!r}: {exc}"
                   ) from exc
    if not isinstance(found, Task):
        raise Fail("task_not_found", f"builtins.ValueError: Expected {path!r} to point to a Task"
                   f" instance, not a {type(found).__name__}.")
    return found


def _returned(value: Any) -> Any:
    try:
        return normalize_json(value)
    except (TypeError, ValueError) as exc:
        raise Fail("result_not_json", f"{_path(type(exc))}: {exc}") from exc


def _call_args(attempt: Attempt, call: TaskCall, task: Task[Any, Any]) -> list[Any]:
    if not task.takes_context:
        return list(call.args)
    return [TaskContext(task_result=attempt.result), *call.args]


def run_sync(backend: BaseTaskBackend, ctx: JobContext, call: TaskCall) -> Any:
    from django.db import close_old_connections

    task = resolve(call.task)
    # What Django does around a request: drop connections past CONN_MAX_AGE or broken, so a
    # long-lived worker thread never runs a task on a dead one.
    close_old_connections()
    try:
        attempt = Attempt.start(ctx, backend, task)
        try:
            value = task.func(*_call_args(attempt, call, task), **call.kwargs)
            if inspect.isawaitable(value):  # declared sync, returned a coroutine: run it here
                from asgiref.sync import async_to_sync

                async def wait() -> Any:
                    return await value

                value = async_to_sync(wait)()
            returned = _returned(value)
        except BaseException as exc:
            attempt.failed(exc)
            raise
        attempt.succeeded(returned)
        return returned
    finally:
        close_old_connections()


async def run_async(backend: BaseTaskBackend, ctx: JobContext, call: TaskCall) -> Any:
    from asgiref.sync import sync_to_async

    task = resolve(call.task)
    # Reading the job and Django's signal receivers are sync (the ORM): off the event loop.
    attempt = await sync_to_async(Attempt.start)(ctx, backend, task)
    try:
        value = task.func(*_call_args(attempt, call, task), **call.kwargs)
        if inspect.isawaitable(value):
            value = await value
        returned = _returned(value)
    except asyncio.CancelledError:
        raise  # the worker's signal (timeout, cancel, drain) decides what this attempt was
    except BaseException as exc:
        await sync_to_async(attempt.failed)(exc)
        raise
    await sync_to_async(attempt.succeeded)(returned)
    return returned


def declare(app: Forklift, backend: BaseTaskBackend, queue: str) -> None:
    """Declare ``backend``'s kinds on ``app``, their handlers bound to it (once: a backend made
    again on the same app keeps the first one's).

    The handlers hold their backend rather than asking Django's ``task_backends``: that is
    context-local, and the worker runs each attempt in a fresh copy of its context, where it
    would make a new backend (and a new forklift app with its own pool) every time.
    """
    kinds = kinds_of(backend.alias)

    def run_task(ctx: JobContext, call: TaskCall) -> Any:
        return run_sync(backend, ctx, call)

    async def run_atask(ctx: JobContext, call: TaskCall) -> Any:
        return await run_async(backend, ctx, call)

    if kinds.sync not in app.kinds:
        app.job(name=kinds.sync, queue=queue, failure_codes=FAILURE_CODES)(run_task)
    if kinds.async_ not in app.kinds:
        app.job(name=kinds.async_, queue=queue, failure_codes=FAILURE_CODES)(run_atask)
