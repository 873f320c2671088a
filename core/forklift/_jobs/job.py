"""The job as read back from the database."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from typing import Any, Final, Literal

__all__ = ["LIVE_STATES", "STATES", "TERMINAL_STATES", "Job", "State"]

State = Literal["scheduled", "available", "running", "retryable", "completed", "cancelled", "dead"]
LIVE_STATES: tuple[State, ...] = ("scheduled", "available", "running", "retryable")
TERMINAL_STATES: tuple[State, ...] = ("completed", "cancelled", "dead")
STATES: tuple[State, ...] = LIVE_STATES + TERMINAL_STATES
#: The live states as SQL, for ``state IN ...`` (the unique-key index's predicate says the same).
LIVE_STATES_SQL: Final = "(" + ", ".join(f"'{s}'" for s in LIVE_STATES) + ")"
#: run_at of a held job (a batch target waiting for its turn): never due, so never staged or
#: claimed. Migration 0003's trigger and the batch operations release targets from it.
HELD_AT: Final = datetime(9999, 1, 1, tzinfo=UTC)

# Columns read into a Job, in order; SQL that returns jobs selects exactly these.
JOB_COLUMNS = (
    "id, queue, kind, args, state, priority, attempt, max_attempts, run_at, created_at,"
    " attempted_at, finished_at, worker_id, fence, lease_expires_at, cancel_requested_at,"
    " errors, result, partial, progress, unique_key, batch_id, tags, meta, tenant, enqueued_by,"
    " expires_at, debounce_key, priority_base, payload_version, weight"
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
    #: The tenant the job belongs to (given at enqueue or derived from the payload by its kind).
    tenant: str | None = None
    #: Who enqueued it, as the enqueue said: attribution for people reading, never authority.
    enqueued_by: str | None = None
    #: The start-by deadline, if any: a job not started by then never starts; it goes dead
    #: with the error code ``expired``, its attempt unspent.
    expires_at: datetime | None = None
    #: The debounce key it was enqueued with (``Debounce``), if any.
    debounce_key: str | None = None
    #: The priority it was given, when its queue's priority aging has since raised it
    #: (``priority`` is the raised one); None while aging never changed it.
    priority_base: int | None = None
    #: The payload version its producer declared (``@app.job(version=...)``); None: a kind
    #: without versions wrote it (version 1).
    payload_version: int | None = None
    #: How many of a worker's slots (and of its queue's and keys' limits, and of a rate's
    #: tokens) the job takes (``weight=``); None: one.
    weight: int | None = None
    #: True when enqueue returned an existing live job holding the same unique key.
    reused: bool = False
    #: True when ``on_conflict="replace"`` gave that existing job the new args, priority and
    #: run_at (False when it was already running and so was left as it was).
    replaced: bool = False
    #: Set when the enqueue dropped the job because its queue was full and the kind sheds
    #: (``on_full=Shed(...)``): the rule that dropped it. Such a job was never stored (id 0).
    shed: str | None = None

    @classmethod
    def from_row(cls, row: tuple[Any, ...], *, reused: bool = False, replaced: bool = False) -> Job:
        job = cls(*row)
        if not (reused or replaced):
            return job
        return dataclasses.replace(job, reused=reused, replaced=replaced)

    @property
    def is_terminal(self) -> bool:
        return self.state in TERMINAL_STATES

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            out[f.name] = value.isoformat() if isinstance(value, datetime) else value
        return out
