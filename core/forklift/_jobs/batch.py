"""A batch as data: its limits, its callbacks, the summary a callback receives, and the row.

Submitting lives in :mod:`forklift._features.batches`; the bookkeeping in the database trigger.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, fields
from datetime import datetime, timedelta
from typing import Any, Literal

from typing_extensions import TypedDict  # pydantic needs it on Python < 3.12

from forklift._base.errors import InvalidOption

__all__ = ["BATCH_COLUMNS", "BATCH_STATES", "RATE_WINDOW", "TERMINAL_BATCH_STATES", "Batch",
           "BatchLimits", "BatchState", "BatchSummary", "Callback", "Mode"]

Mode = Literal["serial", "parallel"]
BatchState = Literal["running", "done", "failed", "partial", "cancelled"]
BATCH_STATES: tuple[BatchState, ...] = ("running", "done", "failed", "partial", "cancelled")
TERMINAL_BATCH_STATES: tuple[BatchState, ...] = ("done", "failed", "partial", "cancelled")

#: Width of the rate window's buckets (seconds); must match the trigger's.
RATE_WINDOW = 60.0


@dataclass(frozen=True)
class BatchLimits:
    """Caps on submit. ``ttl`` is how long a batch is found again by its key (and its targets
    stay readable) after its last change."""

    max_targets: int = 1000
    per_caller: int = 1
    max_live: int = 8
    ttl: timedelta = timedelta(hours=24)

    def __post_init__(self) -> None:
        for name in ("max_targets", "per_caller", "max_live"):
            if getattr(self, name) < 1:
                raise InvalidOption(f"BatchLimits.{name} must be at least 1", field=name)
        if self.ttl.total_seconds() <= 0:
            raise InvalidOption("BatchLimits.ttl must be positive", field="ttl")


@dataclass(frozen=True)
class Callback:
    """A job to enqueue when a batch settles.

    Its payload is ``args`` when given (validated at submit), else the batch summary, a dict
    shaped as :class:`BatchSummary` (a TypedDict: a callback typed with it reads
    ``summary["state"]``); the kind's payload type must accept it. Either way the summary is in
    the callback job's ``ctx.meta["batch"]``, as a dict.
    """

    kind: Any  # a kind name or a JobKind
    args: Any = None
    queue: str | None = None
    priority: int | None = None


class BatchSummary(TypedDict):
    """What a callback receives: the batch as it settled, as a dict (a TypedDict is one)."""

    batch_id: int
    state: str
    kind: str
    caller: str
    key: str
    total: int
    completed: int
    failed: int
    cancelled: int
    settlement: int  # 1 for the first settlement; more only after targets were requeued
    meta: dict[str, Any]


_SAMPLE_SUMMARY: BatchSummary = {
    "batch_id": 1, "state": "done", "kind": "k", "caller": "c", "key": "k", "total": 1,
    "completed": 1, "failed": 0, "cancelled": 0, "settlement": 1, "meta": {},
}

BATCH_COLUMNS = (
    "id, caller, key, kind, mode, max_parallel, state, total, completed, failed, cancelled,"
    " in_flight, created_at, updated_at, expires_at, finished_at, cancel_requested_at,"
    " on_complete, on_success, complete_job_id, success_job_id, settlements, meta,"
    " rate_bucket, rate_n, rate_prev, now()"
)


@dataclass(frozen=True)
class Batch:
    id: int
    caller: str
    key: str
    kind: str
    mode: Mode
    max_parallel: int | None
    state: BatchState
    total: int
    completed: int
    failed: int
    cancelled: int
    in_flight: int
    created_at: datetime
    updated_at: datetime
    expires_at: datetime
    finished_at: datetime | None
    cancel_requested_at: datetime | None
    on_complete: dict[str, Any] | None
    on_success: dict[str, Any] | None
    complete_job_id: int | None
    success_job_id: int | None
    settlements: int
    meta: dict[str, Any]
    rate_bucket: int
    rate_n: int
    rate_prev: int
    #: The database's clock when the row was read (rate and ETA are computed against it).
    observed_at: datetime
    #: True when submit returned an existing batch with the same caller and key.
    reused: bool = False

    @classmethod
    def from_row(cls, row: Sequence[Any], *, reused: bool = False) -> Batch:
        batch = cls(*row)
        return dataclasses.replace(batch, reused=True) if reused else batch

    @property
    def settled(self) -> int:
        return self.completed + self.failed + self.cancelled

    @property
    def remaining(self) -> int:
        return self.total - self.settled

    @property
    def is_terminal(self) -> bool:
        return self.state != "running"

    @property
    def rate(self) -> float | None:
        """Targets settled per second over the last minute (sliding window); for a finished
        batch, over its whole run. None before anything settled."""
        if self.is_terminal:
            span = ((self.finished_at or self.observed_at) - self.created_at).total_seconds()
            return self.settled / span if self.settled and span > 0 else None
        epoch = self.observed_at.timestamp()
        bucket = int(epoch // RATE_WINDOW)
        frac = (epoch % RATE_WINDOW) / RATE_WINDOW
        if self.rate_bucket == bucket:
            count = self.rate_n + self.rate_prev * (1.0 - frac)
        elif self.rate_bucket == bucket - 1:
            count = self.rate_n * (1.0 - frac)
        else:
            count = 0.0
        age = (self.observed_at - self.created_at).total_seconds()
        span = max(1.0, min(RATE_WINDOW, age))
        return count / span if self.settled else None

    @property
    def eta_seconds(self) -> float | None:
        """Seconds until the last target settles at the current rate; None when unknown."""
        rate = self.rate
        if self.is_terminal:
            return 0.0
        if not rate:
            return None
        return self.remaining / rate

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in fields(self):
            if f.name.startswith("rate_"):
                continue
            value = getattr(self, f.name)
            out[f.name] = value.isoformat() if isinstance(value, datetime) else value
        out["settled"] = self.settled
        out["rate"] = self.rate
        out["eta_seconds"] = self.eta_seconds
        return out
