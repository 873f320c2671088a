"""Batches: many targets of one kind run as one unit, on ordinary job rows and the same worker.

A batch is a row in ``batches`` plus one job per target carrying ``batch_id`` and its
``batch_index`` (also in the job's meta, for the handler: ``ctx.meta["batch_index"]``). There
is no batch runner: targets are claimed, retried, rescued and settled like any job, and the
trigger in migration 0003 does the batch's bookkeeping in the transaction that settles each
target (counters, TTL, releasing the next serial or max_parallel targets, the terminal state and
the callbacks, exactly once). This module only submits.

Submit, in order:

1. **Validate** every target against the kind's payload type (a bad target refuses the whole
   batch; nothing is stored).
2. **Idempotency.** The key is the caller's, or SHA-256 of caller, kind and the canonical JSON
   of the validated targets (sorted keys, no whitespace). Under a transaction lock on
   (caller, key), a batch with that caller and key whose TTL has not lapsed is returned as it
   is, with ``reused=True``, whatever its state: no caps are checked, nothing is stored.
3. **Caps**, under a schema-wide transaction lock so concurrent submits count each other:
   targets per batch (``too_many_targets``), live batches of this caller (``caller_busy``),
   live batches in total (``busy``). "Live" means state ``running``.
4. **Store** the batch row and its targets (one COPY) in one transaction. Serial batches
   release target 0 and hold the rest; parallel batches with ``max_parallel`` release that many.

With ``conn=`` all of it runs inside the caller's transaction: the batch exists exactly when
that transaction commits, and the locks are held until then, so keep it short.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields
from datetime import datetime, timedelta
from typing import Any, Literal, Protocol

import psycopg
from typing_extensions import TypedDict  # pydantic needs it on Python < 3.12

from forklift._errors import (
    BatchKeyConflict,
    Busy,
    CallerBusy,
    EnqueueRefused,
    InvalidOption,
    TooManyTargets,
)
from forklift._host import Host, kind_of
from forklift._job import HELD_AT
from forklift._names import check_name
from forklift._payload import to_json_text
from forklift._sqltext import render
from forklift._steps import Copy, Query, Steps

__all__ = ["BATCH_STATES", "HELD_AT", "TERMINAL_BATCH_STATES", "Batch", "BatchHost",
           "BatchLimits", "BatchSummary", "Callback", "get_steps", "prepare", "prune_expired",
           "submit_steps"]

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


class BatchHost(Host, Protocol):
    """What a batch submit needs from an app."""

    @property
    def batch_limits(self) -> BatchLimits: ...


@dataclass(frozen=True)
class Callback:
    """A job to enqueue when a batch settles.

    Its payload is ``args`` when given (validated at submit), else the batch summary (a
    :class:`BatchSummary`; the kind's payload type must accept it). Either way the summary is in
    the callback job's ``ctx.meta["batch"]``.
    """

    kind: Any  # a kind name or a JobKind
    args: Any = None
    queue: str | None = None
    priority: int | None = None


class BatchSummary(TypedDict):
    """What a callback receives: the batch as it settled."""

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


# -- SQL ----------------------------------------------------------------------------------------
LOCK_SQL = "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))"
FIND_SQL = (
    "SELECT " + BATCH_COLUMNS + " FROM {s}.batches"
    " WHERE caller = %s AND key = %s AND expires_at > now() ORDER BY id DESC LIMIT 1"
)
LIVE_SQL = (
    "SELECT count(*) FILTER (WHERE caller = %s), count(*) FROM {s}.batches WHERE state = 'running'"
)
INSERT_SQL = (
    "INSERT INTO {s}.batches (caller, key, kind, mode, max_parallel, total, in_flight, ttl,"
    " expires_at, on_complete, on_success, meta)"
    " VALUES (%s, %s, %s, %s, %s, %s, %s, make_interval(secs => %s),"
    " now() + make_interval(secs => %s), %s::jsonb, %s::jsonb, %s::jsonb)"
    " RETURNING " + BATCH_COLUMNS
)
COPY_SQL = (
    "COPY {s}.jobs (queue, kind, args, state, priority, max_attempts, run_at, meta, retry,"
    " batch_id, batch_index) FROM STDIN"
)
GET_SQL = "SELECT " + BATCH_COLUMNS + " FROM {s}.batches WHERE id = %s"
# Finished batches past their TTL; their targets are then ordinary finished jobs for retention.
PRUNE_SQL = """
DELETE FROM {s}.batches WHERE id IN (
    SELECT id FROM {s}.batches WHERE state <> 'running' AND expires_at < now()
    ORDER BY id LIMIT %s FOR UPDATE SKIP LOCKED)
"""


# -- preparing a submit (no database) ----------------------------------------------------------
@dataclass(frozen=True)
class _Target:
    queue: str
    args: str
    priority: int
    max_attempts: int
    retry: str | None


@dataclass(frozen=True)
class _Plan:
    schema: str
    kind: str
    caller: str
    key: str
    mode: Mode
    max_parallel: int | None
    targets: list[_Target]
    meta: str
    on_complete: str | None
    on_success: str | None
    limits: BatchLimits

    @property
    def window(self) -> int:
        """How many targets may be released and unsettled at once."""
        if self.mode == "serial":
            return 1
        return self.max_parallel or len(self.targets)


def _callback_spec(app: BatchHost, cb: Any, what: str) -> str | None:
    if cb is None:
        return None
    spec = cb if isinstance(cb, Callback) else Callback(cb)
    kind = kind_of(app, spec.kind)
    # Without args the summary is the payload: a kind that could never take it is refused now.
    payload = dict(_SAMPLE_SUMMARY) if spec.args is None else spec.args
    try:
        row = kind.row(payload, queue=spec.queue, priority=spec.priority)
    except EnqueueRefused as exc:
        hint = "" if spec.args is not None else (
            " (its payload is the batch summary; give Callback(kind, args=...) otherwise)"
        )
        raise InvalidOption(f"{what}: {exc.message}{hint}", field=what) from None
    body: dict[str, Any] = {
        "kind": kind.name,
        "queue": row.queue,
        "priority": row.priority,
        "max_attempts": row.max_attempts,
    }
    if spec.args is not None:
        body["args"] = json.loads(row.args)
    return json.dumps(body, separators=(",", ":"))


def derive_key(caller: str, kind: str, canonical_targets: str) -> str:
    """The default idempotency key: SHA-256 of caller, kind and the targets' canonical JSON."""
    material = "\x00".join((caller, kind, canonical_targets))
    return hashlib.sha256(material.encode("utf-8")).hexdigest()


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no whitespace: equal data gives equal text."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def prepare(
    app: BatchHost,
    kind: Any,
    targets: Iterable[Any],
    *,
    caller: str,
    mode: str,
    max_parallel: int | None,
    key: str | None,
    on_complete: Any,
    on_success: Any,
    meta: dict[str, Any] | None,
) -> _Plan:
    """Validate everything a submit needs; raises an EnqueueRefused subclass, stores nothing."""
    k = kind_of(app, kind)
    caller = check_name(caller, "caller")
    if mode not in ("serial", "parallel"):
        raise InvalidOption(f"mode must be 'serial' or 'parallel', not {mode!r}", field="mode")
    if max_parallel is not None:
        if isinstance(max_parallel, bool) or not isinstance(max_parallel, int) or max_parallel < 1:
            raise InvalidOption("max_parallel must be a positive integer", field="max_parallel")
        if mode == "serial" and max_parallel != 1:
            raise InvalidOption("a serial batch runs one target at a time", field="max_parallel")
    if key is not None:
        key = check_name(key, "batch_key", field="key")
    if isinstance(targets, (str, bytes, dict)):
        raise InvalidOption("targets must be a list of payloads", field="targets")
    items = list(targets)
    if not items:
        raise InvalidOption("a batch needs at least one target", field="targets")
    rows = []
    for i, target in enumerate(items):
        try:
            rows.append(k.row(target))
        except EnqueueRefused as exc:
            raise type(exc)(f"target {i}: {exc.message}", **{**exc.detail, "target": i}) from None
    if key is None:
        parsed = [json.loads(r.args) for r in rows]
        key = derive_key(caller, k.name, canonical_json(parsed))
    if meta is not None and not isinstance(meta, dict):
        raise InvalidOption("meta must be a dict of JSON values", field="meta")
    meta_text = to_json_text(meta or {}, what="meta", kind=k.name, limit=app.payload_limit)
    return _Plan(
        schema=app.schema,
        kind=k.name,
        caller=caller,
        key=key,
        mode=mode,  # type: ignore[arg-type]  # checked above
        max_parallel=max_parallel,
        targets=[_Target(r.queue, r.args, r.priority, r.max_attempts, r.retry) for r in rows],
        meta=meta_text,
        on_complete=_callback_spec(app, on_complete, "on_complete"),
        on_success=_callback_spec(app, on_success, "on_success"),
        limits=app.batch_limits,
    )


# -- running a submit: steps for the sync and async drivers (forklift._steps) ------------------
def submit_steps(plan: _Plan) -> Steps[tuple[Batch, bool]]:
    """Submit a prepared batch; run with ``tx="savepoint"``: its own transaction on an
    autocommit connection, else a savepoint inside the caller's transaction (which commits or
    rolls back with it)."""
    s = plan.schema
    # Two submits of the same (caller, key) queue here; the second then finds the first's row.
    yield Query(LOCK_SQL, (f"forklift.batch:{s}:{len(plan.caller)}:{plan.caller}:{plan.key}",))
    row = yield Query(render(FIND_SQL, s), (plan.caller, plan.key), fetch="one")
    if row is not None:
        found = Batch.from_row(row, reused=True)
        if found.kind != plan.kind:
            raise BatchKeyConflict(
                f"caller {plan.caller!r} already has batch {found.id} of kind {found.kind!r}"
                f" under this key; a batch of {plan.kind!r} needs another key",
                batch_id=found.id,
            )
        return found, True

    limits = plan.limits
    if len(plan.targets) > limits.max_targets:
        raise TooManyTargets(
            f"{len(plan.targets)} targets is more than the {limits.max_targets} a batch may have",
            targets=len(plan.targets),
            limit=limits.max_targets,
        )
    # Every submit that passed the key lock counts live batches under this one lock, so two
    # submits cannot both take the last place.
    yield Query(LOCK_SQL, (f"forklift.batches:{s}",))
    counts = yield Query(render(LIVE_SQL, s), (plan.caller,), fetch="one")
    mine, live = int(counts[0]), int(counts[1])
    if mine >= limits.per_caller:
        raise CallerBusy(
            f"caller {plan.caller!r} already has {mine} live batch(es), the most it may have;"
            " wait for it to finish or cancel it",
            caller=plan.caller,
            limit=limits.per_caller,
        )
    if live >= limits.max_live:
        raise Busy(
            f"{live} batches are running, the most allowed at once; try again later",
            live=live,
            limit=limits.max_live,
        )

    window = min(plan.window, len(plan.targets))
    ttl = limits.ttl.total_seconds()
    row = yield Query(
        render(INSERT_SQL, s),
        (plan.caller, plan.key, plan.kind, plan.mode, plan.max_parallel, len(plan.targets),
         window, ttl, ttl, plan.on_complete, plan.on_success, plan.meta),
        fetch="one",
    )
    batch = Batch.from_row(row)
    now = batch.created_at
    records = [
        (
            t.queue, plan.kind, t.args,
            "available" if i < window else "scheduled",
            t.priority, t.max_attempts,
            now if i < window else HELD_AT,
            f'{{"batch_id":{batch.id},"batch_index":{i}}}',
            t.retry, batch.id, i,
        )
        for i, t in enumerate(plan.targets)
    ]
    yield Copy(render(COPY_SQL, s), records)
    return batch, False


def get_steps(schema: str, batch_id: int) -> Steps[Batch | None]:
    row = yield Query(render(GET_SQL, schema), (batch_id,), "one")
    return Batch.from_row(row) if row else None


async def prune_expired(conn: psycopg.AsyncConnection[Any], schema: str, limit: int = 1000) -> int:
    """Delete finished batches whose TTL lapsed (the leader's retention chore); bounded."""
    cur = await conn.execute(render(PRUNE_SQL, schema), (limit,))
    return cur.rowcount
