"""forklift: durable background jobs for Python on PostgreSQL.

Declare kinds on a :class:`Forklift` app, enqueue them, and run them with a :class:`Worker`
(or ``forklift worker --app module:app``).
"""

from forklift._app import Forklift, JobKind
from forklift._batches import Batch, BatchLimits, BatchSummary, Callback
from forklift._context import JobContext, Progress
from forklift._errors import (
    BatchKeyConflict,
    BatchNotFound,
    BatchRefused,
    Busy,
    CallerBusy,
    ConfigError,
    DatabaseUnavailable,
    EnqueueRefused,
    ForkliftError,
    InvalidOption,
    InvalidPayload,
    JobNotFound,
    KindAlreadyDeclared,
    NotJSON,
    NotRequeueable,
    NulCharacter,
    PayloadTooLarge,
    ReadOnly,
    SchemaOutdated,
    TooManyTargets,
    UniqueConflict,
    UnknownKind,
)
from forklift._job import LIVE_STATES, STATES, TERMINAL_STATES, Job, State
from forklift._migrate import migrate
from forklift._retry import Backoff, Fail, Retry, Snooze
from forklift._worker import Worker, run_worker

__version__ = "0.1.0"

__all__ = [
    "LIVE_STATES",
    "STATES",
    "TERMINAL_STATES",
    "Backoff",
    "Batch",
    "BatchKeyConflict",
    "BatchLimits",
    "BatchNotFound",
    "BatchRefused",
    "BatchSummary",
    "Busy",
    "Callback",
    "CallerBusy",
    "ConfigError",
    "DatabaseUnavailable",
    "EnqueueRefused",
    "Fail",
    "Forklift",
    "ForkliftError",
    "InvalidOption",
    "InvalidPayload",
    "Job",
    "JobContext",
    "JobKind",
    "JobNotFound",
    "KindAlreadyDeclared",
    "NotJSON",
    "NotRequeueable",
    "NulCharacter",
    "PayloadTooLarge",
    "Progress",
    "ReadOnly",
    "Retry",
    "SchemaOutdated",
    "Snooze",
    "State",
    "TooManyTargets",
    "UniqueConflict",
    "UnknownKind",
    "Worker",
    "__version__",
    "migrate",
    "run_worker",
]
