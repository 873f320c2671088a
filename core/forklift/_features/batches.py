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

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

import psycopg

from forklift._base.errors import (
    BatchKeyConflict,
    Busy,
    CallerBusy,
    EnqueueRefused,
    InvalidOption,
    TooManyTargets,
)
from forklift._base.names import check_name
from forklift._db.sqltext import render
from forklift._db.steps import Copy, Query, Steps
from forklift._features.host import Host, kind_of
from forklift._jobs.batch import (
    _SAMPLE_SUMMARY,
    BATCH_COLUMNS,
    BATCH_STATES,
    RATE_WINDOW,
    TERMINAL_BATCH_STATES,
    Batch,
    BatchLimits,
    BatchState,
    BatchSummary,
    Callback,
    Mode,
)
from forklift._jobs.job import HELD_AT
from forklift._jobs.payload import to_json_text

__all__ = ["BATCH_COLUMNS", "BATCH_STATES", "HELD_AT", "RATE_WINDOW", "TERMINAL_BATCH_STATES",
           "Batch", "BatchHost", "BatchLimits", "BatchState", "BatchSummary", "Callback", "Mode",
           "get_steps", "prepare", "prune_expired", "submit_steps"]

class BatchHost(Host, Protocol):
    """What a batch submit needs from an app."""

    @property
    def batch_limits(self) -> BatchLimits: ...


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
# Traced targets (forklift.otel) carry their producer span's traceparent; untraced ones never
# send the column.
COPY_TRACED_SQL = COPY_SQL.replace("batch_index)", "batch_index, traceparent)")
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
    traceparent: str | None = None
    keys: list[str] | None = None  # a keyed kind's values (forklift._features.flow.keys)
    tenant: str | None = None  # derived from the payload by a kind that says how
    enqueued_by: str | None = None  # the actor of the submitter's acting_as scope
    payload_version: int | None = None  # a kind that declares one (forklift._jobs.payload_versions)
    weight: int | None = None  # slots the job takes, when more than one


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
    if row.keys is not None:
        # The callback is inserted by the batch's trigger, which stores no key values: its
        # kind's per-key limits and rates could not hold for it.
        raise InvalidOption(f"{what}: kind {kind.name} declares keys (concurrency= or rate=);"
                            " a batch callback cannot carry key values", field=what)
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
        targets=[_Target(r.queue, r.args, r.priority, r.max_attempts, r.retry, r.traceparent,
                         r.keys, r.tenant, r.enqueued_by, r.payload_version, r.weight)
                 for r in rows],
        meta=meta_text,
        on_complete=_callback_spec(app, on_complete, "on_complete"),
        on_success=_callback_spec(app, on_success, "on_success"),
        limits=app.batch_limits,
    )


# -- running a submit: steps for the sync and async drivers (forklift._db.steps) ------------------
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
    records: list[tuple[Any, ...]] = [
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
    copy_sql = COPY_SQL
    if any(t.traceparent for t in plan.targets):
        records = [(*r, t.traceparent) for r, t in zip(records, plan.targets, strict=True)]
        copy_sql = COPY_TRACED_SQL
    if any(t.keys is not None for t in plan.targets):
        # A keyed kind's targets carry their key values, so its limits hold for them too; the
        # others never send the column.
        records = [(*r, t.keys) for r, t in zip(records, plan.targets, strict=True)]
        copy_sql = copy_sql.replace(") FROM STDIN", ", keys) FROM STDIN")
    if any(t.tenant is not None for t in plan.targets):
        # Targets of a kind that derives its tenant carry it; the others never send the column.
        records = [(*r, t.tenant) for r, t in zip(records, plan.targets, strict=True)]
        copy_sql = copy_sql.replace(") FROM STDIN", ", tenant) FROM STDIN")
    if any(t.enqueued_by is not None for t in plan.targets):
        # Submitted inside an acting_as scope: its actor, as for any enqueue there.
        records = [(*r, t.enqueued_by) for r, t in zip(records, plan.targets, strict=True)]
        copy_sql = copy_sql.replace(") FROM STDIN", ", enqueued_by) FROM STDIN")
    if any(t.payload_version is not None for t in plan.targets):
        # Targets of a kind that declares a payload version carry it (one kind: all of them).
        records = [(*r, t.payload_version) for r, t in zip(records, plan.targets, strict=True)]
        copy_sql = copy_sql.replace(") FROM STDIN", ", payload_version) FROM STDIN")
    if any(t.weight is not None for t in plan.targets):
        # Weighted targets (the insert trigger flags their queue as for any weighted job).
        records = [(*r, t.weight) for r, t in zip(records, plan.targets, strict=True)]
        copy_sql = copy_sql.replace(") FROM STDIN", ", weight) FROM STDIN")
    yield Copy(render(copy_sql, s), records)
    return batch, False


def get_steps(schema: str, batch_id: int) -> Steps[Batch | None]:
    row = yield Query(render(GET_SQL, schema), (batch_id,), "one")
    return Batch.from_row(row) if row else None


async def prune_expired(conn: psycopg.AsyncConnection[Any], schema: str, limit: int = 1000) -> int:
    """Delete finished batches whose TTL lapsed (the leader's retention chore); bounded."""
    cur = await conn.execute(render(PRUNE_SQL, schema), (limit,))
    return cur.rowcount
