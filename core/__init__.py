"""forklift: durable background jobs for Python on PostgreSQL.

Declare kinds on a :class:`Forklift` app, enqueue them, and run them with a :class:`Worker`
(or ``forklift worker --app module:app``).
"""

from forklift.app import Forklift, JobKind
from forklift.batches import Batch, BatchLimits, BatchSummary, Callback
from forklift.context import JobContext, Progress
from forklift.errors import (
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
from forklift.job import LIVE_STATES, STATES, TERMINAL_STATES, Job, State
from forklift.migrate import migrate
from forklift.retry import Backoff, Fail, Retry, Snooze
from forklift.worker import Worker, run_worker

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
