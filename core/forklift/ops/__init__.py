"""The operator API: what the CLI, the console and scripts call. No SQL lives outside core.

:class:`Operator` holds every call in typed feature clients (``op.jobs``, ``op.queues``,
``op.dead``, ``op.stats`` ...: see its docstring); the modules hold the functions, each taking a
connection and an :class:`OpsContext` (schema, actor, read-only):

- ``stats``: per-queue counts, pickup lag, pause, limits, rates, run times; workers; totals
- ``jobs``: list (filters, sort, keyset cursor, capped count) and show (with a timeline)
- ``explain``: why a job or a queue is not moving, in plain words
- ``actions``: requeue, cancel, delete: one job, or in bulk on a filter with dry run and cap
- ``queues``: list, pause (optionally expiring), resume, concurrency limit
- ``workers``, ``audit``, ``prune``

For tools built on it (the CLI, the console, your scripts), public helpers in their own modules:

- ``connect``: where the database is (``--dsn`` > FORKLIFT_DSN > DATABASE_URL > embedded) and
  a purpose-named connection to it
- ``apps``: load an app from ``module:attr``; record its schedules and backfills
- ``migrations``: the schema's version, what is pending, applying it
- ``display``: identifiers shown unambiguously, shell words quoted exactly, free text cleaned
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from forklift.ops.actions import ActionResult, BulkReport
    from forklift.ops.audit import AuditEntry
    from forklift.ops.consumers import ConsumerBusy, ConsumerInfo, ConsumerNotFound
    from forklift.ops.context import OpsContext
    from forklift.ops.errors import (
        InvalidFilter,
        NotAWorkflow,
        NotCancellable,
        NotDeletable,
        NotPausable,
        NotReplayable,
        NotRunnable,
        PauseBlocked,
        QueueNotFound,
        UnknownStep,
    )
    from forklift.ops.explain import Explanation, Reason
    from forklift.ops.filters import JobFilter, Sort
    from forklift.ops.holds import PauseInfo, PauseResult
    from forklift.ops.job_logs import JobLog
    from forklift.ops.jobs import JobDetail, JobPage, JobSummary
    from forklift.ops.operator import Operator
    from forklift.ops.prune import PruneReport
    from forklift.ops.queues import QueueInfo
    from forklift.ops.replay import ReplayResult
    from forklift.ops.stats import QueueStats, Stats
    from forklift.ops.workers import WorkerInfo

# Each name loads its module on first use: ``from forklift.ops import Operator`` in a script,
# or ``forklift stats --json``, pays only for what it touches.
_HOME: dict[str, str] = {
    "ActionResult": "forklift.ops.actions",
    "BulkReport": "forklift.ops.actions",
    "AuditEntry": "forklift.ops.audit",
    "OpsContext": "forklift.ops.context",
    "ConsumerBusy": "forklift.ops.consumers",
    "ConsumerInfo": "forklift.ops.consumers",
    "ConsumerNotFound": "forklift.ops.consumers",
    "InvalidFilter": "forklift.ops.errors",
    "NotCancellable": "forklift.ops.errors",
    "NotDeletable": "forklift.ops.errors",
    "NotRunnable": "forklift.ops.errors",
    "QueueNotFound": "forklift.ops.errors",
    "NotAWorkflow": "forklift.ops.errors",
    "NotReplayable": "forklift.ops.errors",
    "NotPausable": "forklift.ops.errors",
    "PauseBlocked": "forklift.ops.errors",
    "PauseInfo": "forklift.ops.holds",
    "PauseResult": "forklift.ops.holds",
    "UnknownStep": "forklift.ops.errors",
    "ReplayResult": "forklift.ops.replay",
    "Explanation": "forklift.ops.explain",
    "Reason": "forklift.ops.explain",
    "JobFilter": "forklift.ops.filters",
    "Sort": "forklift.ops.filters",
    "JobDetail": "forklift.ops.jobs",
    "JobLog": "forklift.ops.job_logs",
    "JobPage": "forklift.ops.jobs",
    "JobSummary": "forklift.ops.jobs",
    "Operator": "forklift.ops.operator",
    "PruneReport": "forklift.ops.prune",
    "QueueInfo": "forklift.ops.queues",
    "QueueStats": "forklift.ops.stats",
    "Stats": "forklift.ops.stats",
    "WorkerInfo": "forklift.ops.workers",
}


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'forklift.ops' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


__all__ = [
    "ActionResult",
    "AuditEntry",
    "BulkReport",
    "ConsumerBusy",
    "ConsumerInfo",
    "ConsumerNotFound",
    "Explanation",
    "InvalidFilter",
    "JobDetail",
    "JobFilter",
    "JobLog",
    "JobPage",
    "JobSummary",
    "NotAWorkflow",
    "NotCancellable",
    "NotDeletable",
    "NotPausable",
    "NotReplayable",
    "NotRunnable",
    "Operator",
    "OpsContext",
    "PauseBlocked",
    "PauseInfo",
    "PauseResult",
    "PruneReport",
    "QueueInfo",
    "QueueNotFound",
    "QueueStats",
    "Reason",
    "ReplayResult",
    "Sort",
    "Stats",
    "UnknownStep",
    "WorkerInfo",
]
