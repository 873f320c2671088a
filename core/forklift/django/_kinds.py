"""The forklift kinds that run any Django task by its module path, one pair per backend.

A Django ``@task`` is not declared to forklift one by one: the job's payload names the task
(``myapp.tasks.send_welcome``), and the worker imports it when it runs. Sync tasks run in the
worker's thread pool (``django.task``), async ones on its event loop (``django.atask``), so each
gets what forklift gives any handler of its kind: timeouts, cancellation, leases.

Each ``TASKS`` backend has kinds of its own (``default`` the bare names, any other alias
``django.task@alias``): a worker claims only the kinds its app declares, so two backends on one
database never run each other's tasks, whatever queues they share.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

SYNC_KIND = "django.task"
ASYNC_KIND = "django.atask"
DEFAULT_ALIAS = "default"
#: Terminal failures of the runner itself (running the task again would fail the same way).
#: Their message is ``"<class path>: <text>"``, the error Django's own backends would record.
FAILURE_CODES = ("task_not_found", "result_not_json")
#: The module that calls a task's function (its frames are cut from a task's traceback).
RUNNER_FILE = "forklift/django/_runner.py"


@dataclass(frozen=True)
class Kinds:
    """The sync and the async kind of one backend."""

    sync: str
    async_: str

    def __contains__(self, kind: object) -> bool:
        return kind in (self.sync, self.async_)


def kinds_of(alias: str) -> Kinds:
    """The kinds of ``TASKS[alias]``."""
    if alias == DEFAULT_ALIAS:
        return Kinds(SYNC_KIND, ASYNC_KIND)
    return Kinds(f"{SYNC_KIND}@{alias}", f"{ASYNC_KIND}@{alias}")


@dataclass
class TaskCall:
    """A Django task call as stored in the job's payload (JSON, as Django normalises it)."""

    task: str  # module path of the Task object, e.g. "shop.tasks.send_receipt"
    args: list[Any] = field(default_factory=list)
    kwargs: dict[str, Any] = field(default_factory=dict)
    backend: str = DEFAULT_ALIAS  # the TASKS alias it was enqueued through
