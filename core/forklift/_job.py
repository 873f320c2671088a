"""The job as read back from the database."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any, Literal

State = Literal["scheduled", "available", "running", "retryable", "completed", "cancelled", "dead"]
LIVE_STATES: tuple[State, ...] = ("scheduled", "available", "running", "retryable")
TERMINAL_STATES: tuple[State, ...] = ("completed", "cancelled", "dead")
STATES: tuple[State, ...] = LIVE_STATES + TERMINAL_STATES

# Columns read into a Job, in order; SQL that returns jobs selects exactly these.
JOB_COLUMNS = (
    "id, queue, kind, args, state, priority, attempt, max_attempts, run_at, created_at,"
    " attempted_at, finished_at, worker_id, fence, lease_expires_at, cancel_requested_at,"
    " errors, result, partial, progress, unique_key, batch_id, tags, meta"
)


@dataclass(frozen=True)
class Job:
    id: int
    queue: str
    kind: str
    args: Any
    state: State
    priority: int
    attempt: int
    max_attempts: int
    run_at: datetime
    created_at: datetime
    attempted_at: datetime | None = None
    finished_at: datetime | None = None
    worker_id: str | None = None
    fence: int | None = None
    lease_expires_at: datetime | None = None
    cancel_requested_at: datetime | None = None
    errors: list[dict[str, Any]] = field(default_factory=list)
    result: Any = None
    partial: Any = None
    progress: dict[str, Any] | None = None
    unique_key: str | None = None
    batch_id: int | None = None
    tags: list[str] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    #: True when enqueue returned an existing live job holding the same unique key.
    reused: bool = False

    @classmethod
    def from_row(cls, row: tuple[Any, ...], *, reused: bool = False) -> Job:
        job = cls(*row)
        return job if not reused else dataclasses.replace(job, reused=True)

    @property
    def is_terminal(self) -> bool:
        return self.state in TERMINAL_STATES

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            out[f.name] = value.isoformat() if isinstance(value, datetime) else value
        return out
