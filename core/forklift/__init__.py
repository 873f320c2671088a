"""forklift: durable background jobs for Python on PostgreSQL.

Declare kinds on a :class:`Forklift` app, enqueue them, and run them with a :class:`Worker`
(or ``forklift worker --app module:app``).

Importing ``forklift`` loads nothing else: each name below is imported on first use (PEP 562),
so an application that only enqueues never loads the worker, and one that only imports the
package pays for neither pydantic nor psycopg. The public API is ``__all__``, the operator
API ``forklift.ops``, and the embedded server ``forklift.embedded``; modules whose names
start with an underscore are internal.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from forklift._base.version import VERSION as __version__

if TYPE_CHECKING:
    from forklift._app.app import Forklift as Forklift
    from forklift._app.batch_context import BatchContext as BatchContext
    from forklift._app.context import JobCancelled as JobCancelled
    from forklift._app.context import JobContext as JobContext
    from forklift._app.context import Progress as Progress
    from forklift._app.kind import JobKind as JobKind
    from forklift._base.backpressure import Enqueued as Enqueued
    from forklift._base.backpressure import Shed as Shed
    from forklift._base.backpressure import Wait as Wait
    from forklift._base.debounce import Debounce as Debounce
    from forklift._base.errors import BatchKeyConflict as BatchKeyConflict
    from forklift._base.errors import BatchNotFound as BatchNotFound
    from forklift._base.errors import BatchRefused as BatchRefused
    from forklift._base.errors import Busy as Busy
    from forklift._base.errors import CallerBusy as CallerBusy
    from forklift._base.errors import ConfigError as ConfigError
    from forklift._base.errors import DatabaseUnavailable as DatabaseUnavailable
    from forklift._base.errors import EnqueueOutcomeUnknown as EnqueueOutcomeUnknown
    from forklift._base.errors import EnqueueRefused as EnqueueRefused
    from forklift._base.errors import ForkliftError as ForkliftError
    from forklift._base.errors import InvalidKey as InvalidKey
    from forklift._base.errors import InvalidName as InvalidName
    from forklift._base.errors import InvalidOption as InvalidOption
    from forklift._base.errors import InvalidPayload as InvalidPayload
    from forklift._base.errors import JobNotFound as JobNotFound
    from forklift._base.errors import KindAlreadyDeclared as KindAlreadyDeclared
    from forklift._base.errors import LockLost as LockLost
    from forklift._base.errors import LockNotAcquired as LockNotAcquired
    from forklift._base.errors import NotJSON as NotJSON
    from forklift._base.errors import NotRequeueable as NotRequeueable
    from forklift._base.errors import NulCharacter as NulCharacter
    from forklift._base.errors import PayloadTooLarge as PayloadTooLarge
    from forklift._base.errors import QueueFull as QueueFull
    from forklift._base.errors import ReadOnly as ReadOnly
    from forklift._base.errors import SchemaOutdated as SchemaOutdated
    from forklift._base.errors import TenantMismatch as TenantMismatch
    from forklift._base.errors import TenantRequired as TenantRequired
    from forklift._base.errors import TooManyTargets as TooManyTargets
    from forklift._base.errors import UniqueConflict as UniqueConflict
    from forklift._base.errors import UnknownKind as UnknownKind
    from forklift._base.retry import Backoff as Backoff
    from forklift._base.retry import Fail as Fail
    from forklift._base.retry import Retry as Retry
    from forklift._base.retry import Snooze as Snooze
    from forklift._db.migrate import migrate as migrate
    from forklift._features.consumers.consumer import Consumer as Consumer
    from forklift._features.consumers.source import Page as Page
    from forklift._features.consumers.source import Source as Source
    from forklift._features.consumers.table import TableSource as TableSource
    from forklift._features.flow.keys import Key as Key
    from forklift._features.flow.keys import Rate as Rate
    from forklift._jobs.batch import Batch as Batch
    from forklift._jobs.batch import BatchLimits as BatchLimits
    from forklift._jobs.batch import BatchSummary as BatchSummary
    from forklift._jobs.batch import Callback as Callback
    from forklift._jobs.job import LIVE_STATES as LIVE_STATES
    from forklift._jobs.job import STATES as STATES
    from forklift._jobs.job import TERMINAL_STATES as TERMINAL_STATES
    from forklift._jobs.job import Job as Job
    from forklift._jobs.job import State as State
    from forklift._worker import Worker as Worker
    from forklift._worker import run_worker as run_worker

_ERRORS = (
    "BatchKeyConflict", "BatchNotFound", "BatchRefused", "Busy", "CallerBusy", "ConfigError",
    "DatabaseUnavailable", "EnqueueRefused", "ForkliftError", "InvalidName", "InvalidOption",
    "InvalidPayload", "JobNotFound", "KindAlreadyDeclared", "NotJSON", "NotRequeueable",
    "NulCharacter", "PayloadTooLarge", "ReadOnly", "SchemaOutdated", "TooManyTargets",
    "UniqueConflict", "UnknownKind", "InvalidKey", "LockLost", "LockNotAcquired",
    "EnqueueOutcomeUnknown", "TenantMismatch", "TenantRequired", "QueueFull",
)
#: Where each public name lives (its module is imported when the name is first used).
_WHERE: dict[str, str] = {
    "Forklift": "_app.app",
    "JobKind": "_app.kind",
    "Batch": "_jobs.batch", "BatchLimits": "_jobs.batch", "BatchSummary": "_jobs.batch",
    "Callback": "_jobs.batch", "Debounce": "_base.debounce", "BatchContext": "_app.batch_context",
    "Enqueued": "_base.backpressure", "Shed": "_base.backpressure", "Wait": "_base.backpressure",
    "JobCancelled": "_app.context", "JobContext": "_app.context", "Progress": "_app.context",
    **dict.fromkeys(_ERRORS, "_base.errors"),
    "LIVE_STATES": "_jobs.job", "STATES": "_jobs.job", "TERMINAL_STATES": "_jobs.job", "Job": "_jobs.job",
    "State": "_jobs.job",
    "migrate": "_db.migrate",
    "Key": "_features.flow.keys", "Rate": "_features.flow.keys",
    "Consumer": "_features.consumers.consumer", "Page": "_features.consumers.source",
    "Source": "_features.consumers.source", "TableSource": "_features.consumers.table",
    "Backoff": "_base.retry", "Fail": "_base.retry", "Retry": "_base.retry", "Snooze": "_base.retry",
    "Worker": "_worker", "run_worker": "_worker",
}

__all__ = [
    "LIVE_STATES",
    "STATES",
    "TERMINAL_STATES",
    "Backoff",
    "Batch",
    "BatchContext",
    "BatchKeyConflict",
    "BatchLimits",
    "BatchNotFound",
    "BatchRefused",
    "BatchSummary",
    "Busy",
    "Callback",
    "CallerBusy",
    "ConfigError",
    "Consumer",
    "DatabaseUnavailable",
    "Debounce",
    "EnqueueOutcomeUnknown",
    "EnqueueRefused",
    "Enqueued",
    "Fail",
    "Forklift",
    "ForkliftError",
    "InvalidKey",
    "InvalidName",
    "InvalidOption",
    "InvalidPayload",
    "Job",
    "JobCancelled",
    "JobContext",
    "JobKind",
    "JobNotFound",
    "Key",
    "KindAlreadyDeclared",
    "LockLost",
    "LockNotAcquired",
    "NotJSON",
    "NotRequeueable",
    "NulCharacter",
    "Page",
    "PayloadTooLarge",
    "Progress",
    "QueueFull",
    "Rate",
    "ReadOnly",
    "Retry",
    "SchemaOutdated",
    "Shed",
    "Snooze",
    "Source",
    "State",
    "TableSource",
    "TenantMismatch",
    "TenantRequired",
    "TooManyTargets",
    "UniqueConflict",
    "UnknownKind",
    "Wait",
    "Worker",
    "__version__",
    "migrate",
    "run_worker",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'forklift' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"forklift.{module}"), name)
    globals()[name] = value  # the next lookup is an ordinary attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_WHERE})
