"""Batches for operators: list, show (progress, per-target status, rate, ETA), cancel, retry the
failed targets.

Cancel: the batch is marked first (its row lock orders this against every target settling),
then its waiting targets (held, available, retrying) end ``cancelled`` at once. A target already
running is left to finish and its result is stored; a running target that fails is not retried.
When the last in-flight target settles the batch ends ``cancelled`` and its ``on_complete``
callback is enqueued. Cancelling an unknown or finished batch returns False and changes nothing.

Retry-failed: the batch's dead targets go back to waiting (attempts reset, error history kept)
and are released in index order through the same window as before (one at a time for a serial
batch). A finished batch reopens (state ``running``), and when it settles again its callbacks
are enqueued again for that new settlement (``summary.settlement`` counts them). A cancelled
batch is not retried: submit a new one.

Both actions write their audit row in the same transaction. Lock order: a settle or a single
requeue holds its job row and then takes the batch row; cancel takes the batch row first but
then touches only waiting targets, which no settle holds; retry-failed locks its dead targets
before the batch row. So none of them can wait on another in a cycle.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import psycopg

from forklift._base.errors import BatchNotFound, ForkliftError, NotRequeueable
from forklift._base.scrub import scrub
from forklift._db.sqltext import render
from forklift._features.batches import BATCH_COLUMNS, BATCH_STATES, HELD_AT, Batch
from forklift._jobs.job import STATES
from forklift.ops import audit, history
from forklift.ops.context import OpsContext
from forklift.ops.errors import InvalidFilter
from forklift.ops.filters import check_text
from forklift.ops.shape import Shape

__all__ = [
    "MAX_PAGE",
    "TARGET_STATES",
    "BatchDetail",
    "TargetStatus",
    "cancel",
    "count_live",
    "get_batch",
    "list_batches",
    "retry_failed",
    "show",
    "targets",
]

#: Job states a target filter accepts, plus ``waiting`` (held until its turn).
TARGET_STATES: tuple[str, ...] = ("waiting", *STATES)
MAX_PAGE = 1000

LIST_SQL = (
    "SELECT " + BATCH_COLUMNS + " FROM {s}.batches"
    " WHERE (%(state)s::text IS NULL OR state = %(state)s)"
    "   AND (%(caller)s::text IS NULL OR caller = %(caller)s)"
    "   AND (%(before)s::bigint IS NULL OR id < %(before)s)"
    " ORDER BY id DESC LIMIT %(limit)s"
)
GET_SQL = "SELECT " + BATCH_COLUMNS + " FROM {s}.batches WHERE id = %s"
LIVE_SQL = "SELECT count(*) FROM {s}.batches WHERE state = 'running'"

_HELD = "(t.state = 'scheduled' AND t.run_at = %(held)s)"
TARGETS_SQL = (
    "SELECT t.batch_index, t.id, CASE WHEN " + _HELD + " THEN 'waiting' ELSE t.state END,"
    " t.attempt, t.max_attempts, t.result, t.errors -> -1, t.progress, t.worker_id,"
    " t.attempted_at, t.finished_at"
    " FROM {s}.jobs t"
    " WHERE t.batch_id = %(id)s AND t.batch_index > %(after)s"
    "   AND (%(states)s::text[] IS NULL"
    "        OR (CASE WHEN " + _HELD + " THEN 'waiting' ELSE t.state END) = ANY(%(states)s))"
    " ORDER BY t.batch_index LIMIT %(limit)s"
)

MARK_CANCEL_SQL = (
    "UPDATE {s}.batches SET cancel_requested_at = coalesce(cancel_requested_at, now()),"
    " updated_at = now() WHERE id = %s AND state = 'running' RETURNING in_flight"
)
# Whole-batch moves run with the row trigger off (forklift.batch_bulk, this transaction only)
# and account for every target in one batch_apply call: see migration 0003.
BULK_SQL = "SELECT set_config('forklift.batch_bulk', %s, true)"
APPLY_SQL = "SELECT {s}.batch_apply(%s, 0, %s, %s, %s)"
# Waiting targets end now; released ones (available, retrying) leave the window.
CANCEL_TARGETS_SQL = """
WITH picked AS (
    SELECT id, (state = 'scheduled' AND run_at = %(held)s) AS held FROM {s}.jobs
    WHERE batch_id = %(id)s AND state IN ('scheduled', 'available', 'retryable')
    ORDER BY id
    FOR UPDATE
), moved AS (
    UPDATE {s}.jobs AS t SET
        state = 'cancelled', finished_at = now(),
        cancel_requested_at = coalesce(t.cancel_requested_at, now()),
        errors = t.errors || jsonb_build_array(jsonb_build_object(
            'code', 'cancelled', 'type', NULL, 'message', %(message)s::text,
            'traceback', '[]'::jsonb, 'attempt', t.attempt, 'worker', NULL, 'at', now()))
    FROM picked WHERE t.id = picked.id
    RETURNING picked.held
)
SELECT count(*), count(*) FILTER (WHERE NOT held) FROM moved
"""
LOCK_SQL = "SELECT state, cancel_requested_at FROM {s}.batches WHERE id = %s FOR UPDATE"
# Retry takes its targets' row locks before the batch's, the order a settle or a single requeue
# takes them in (job, then its batch), so they cannot deadlock with it.
LOCK_DEAD_SQL = (
    "SELECT id FROM {s}.jobs WHERE batch_id = %s AND state = 'dead' ORDER BY id FOR UPDATE"
)
# Dead targets wait again (held); batch_apply then releases them through the batch's window,
# lowest index first.
REQUEUE_FAILED_SQL = """
UPDATE {s}.jobs AS t SET
    state = 'scheduled', run_at = %s, attempt = 0, lost = 0, finished_at = NULL, worker_id = NULL,
    fence = nextval('{s}.fence_seq'), lease_expires_at = NULL, cancel_requested_at = NULL,
    result = NULL, partial = NULL, progress = NULL
WHERE t.id = ANY(%s::bigint[]) AND t.state = 'dead'
"""


@dataclass(frozen=True)
class TargetStatus(Shape):
    index: int
    job_id: int
    #: The job's state, or ``waiting`` for a target held until its turn.
    state: str
    attempt: int
    max_attempts: int
    result: Any
    #: The last error entry (code, type, message, traceback summary), if any attempt failed.
    error: dict[str, Any] | None
    progress: dict[str, Any] | None
    worker_id: str | None
    attempted_at: datetime | None
    finished_at: datetime | None


@dataclass(frozen=True)
class BatchDetail(Shape):
    batch: Batch
    #: Settled targets as a fraction of all (0..1).
    progress: float
    #: Targets settled per second: a one-minute sliding window while running, the whole run's
    #: average once finished; None before the first target settles.
    rate: float | None
    #: Seconds until the last target settles at that rate (0 when finished, None if unknown).
    eta_seconds: float | None
    targets: list[TargetStatus] = field(default_factory=list)
    #: More targets follow: pass ``after_index`` = the last index shown.
    more_targets: bool = False


def _batch_or_none(conn: psycopg.Connection[Any], ctx: OpsContext, batch_id: int) -> Batch | None:
    row = conn.execute(render(GET_SQL, ctx.schema), (batch_id,)).fetchone()
    return Batch.from_row(row) if row else None


def get_batch(conn: psycopg.Connection[Any], ctx: OpsContext, batch_id: int) -> Batch:
    batch = _batch_or_none(conn, ctx, batch_id)
    if batch is None:
        raise BatchNotFound(
            f"no batch with id {batch_id} (it may have expired): check `forklift batches list`",
            batch_id=batch_id,
        )
    return batch


def list_batches(
    conn: psycopg.Connection[Any],
    ctx: OpsContext,
    *,
    state: str | None = None,
    caller: str | None = None,
    limit: int = 50,
    before_id: int | None = None,
) -> list[Batch]:
    """Newest first; page with ``before_id`` = the last id you saw."""
    if state is not None and state not in BATCH_STATES:
        raise InvalidFilter(
            f"unknown batch state {state!r}: use one of {', '.join(BATCH_STATES)}", field="state"
        )
    params = {
        "state": state,
        "caller": check_text(caller, "caller") if caller else None,
        "before": before_id,
        "limit": max(1, min(int(limit), MAX_PAGE)),
    }
    rows = conn.execute(render(LIST_SQL, ctx.schema), params).fetchall()
    return [Batch.from_row(r) for r in rows]


def count_live(conn: psycopg.Connection[Any], ctx: OpsContext) -> int:
    row = conn.execute(render(LIVE_SQL, ctx.schema)).fetchone()
    return int(row[0]) if row else 0


def targets(
    conn: psycopg.Connection[Any],
    ctx: OpsContext,
    batch_id: int,
    *,
    states: list[str] | None = None,
    after_index: int = -1,
    limit: int = 100,
) -> list[TargetStatus]:
    """Targets in index order, optionally only some states (``waiting`` = held)."""
    bad = [s for s in states or () if s not in TARGET_STATES]
    if bad:
        raise InvalidFilter(
            f"unknown target state {bad[0]!r}: use one of {', '.join(TARGET_STATES)}",
            field="state",
        )
    params = {
        "id": batch_id,
        "after": after_index,
        "states": list(states) if states else None,
        "held": HELD_AT,
        "limit": max(1, min(int(limit), MAX_PAGE)),
    }
    rows = conn.execute(history.render_read(TARGETS_SQL, conn, ctx.schema), params).fetchall()
    return [TargetStatus(*r) for r in rows]


def show(
    conn: psycopg.Connection[Any],
    ctx: OpsContext,
    batch_id: int,
    *,
    states: list[str] | None = None,
    after_index: int = -1,
    limit: int = 100,
) -> BatchDetail:
    """A batch's progress, rate and ETA, and a page of its targets with result or error."""
    batch = get_batch(conn, ctx, batch_id)
    page = targets(conn, ctx, batch_id, states=states, after_index=after_index, limit=limit + 1)
    return BatchDetail(
        batch=batch,
        progress=batch.settled / batch.total,
        rate=batch.rate,
        eta_seconds=batch.eta_seconds,
        targets=page[:limit],
        more_targets=len(page) > limit,
    )


def cancel(
    conn: psycopg.Connection[Any], ctx: OpsContext, batch_id: int, *, reason: str | None = None
) -> bool:
    """Cancel a running batch; False (and nothing changed) if it is unknown or finished."""
    ctx.require_write("cancel batch")
    reason = audit.clean_reason(reason)
    message = scrub(f"batch {batch_id} cancelled by {ctx.actor}" + (f": {reason}" if reason else ""))
    target = {"batch": batch_id}
    with conn.transaction():
        row = conn.execute(render(MARK_CANCEL_SQL, ctx.schema), (batch_id,)).fetchone()
        if row is None:
            known = _batch_or_none(conn, ctx, batch_id)
            outcome = "noop: unknown batch" if known is None else f"noop: already {known.state}"
            audit.record(conn, ctx, "cancel batch", target, reason=reason, outcome=outcome)
            return False
        conn.execute(BULK_SQL, ("on",))
        moved = conn.execute(
            render(CANCEL_TARGETS_SQL, ctx.schema),
            {"id": batch_id, "held": HELD_AT, "message": message},
        ).fetchone()
        conn.execute(BULK_SQL, ("off",))
        cancelled, released = (int(moved[0]), int(moved[1])) if moved else (0, 0)
        if cancelled:
            conn.execute(render(APPLY_SQL, ctx.schema), (batch_id, 0, cancelled, -released))
        audit.record(
            conn, ctx, "cancel batch", target, count=cancelled, reason=reason,
            outcome=audit.OUTCOME_DONE,
        )
    return True


def retry_failed(
    conn: psycopg.Connection[Any], ctx: OpsContext, batch_id: int, *, reason: str | None = None
) -> int:
    """Requeue the batch's dead targets; returns how many. Refused for a cancelled batch."""
    ctx.require_write("retry batch")
    reason = audit.clean_reason(reason)
    target = {"batch": batch_id}
    try:
        with conn.transaction():
            dead = [r[0] for r in conn.execute(render(LOCK_DEAD_SQL, ctx.schema), (batch_id,))]
            row = conn.execute(render(LOCK_SQL, ctx.schema), (batch_id,)).fetchone()
            if row is None:
                raise BatchNotFound(f"no batch with id {batch_id}", batch_id=batch_id)
            if row[0] == "cancelled" or row[1] is not None:
                raise NotRequeueable(
                    f"batch {batch_id} was cancelled: its targets are not retried; submit a new"
                    " batch (or requeue single targets with `forklift jobs retry`)",
                    batch_id=batch_id,
                )
            conn.execute(BULK_SQL, ("on",))
            count = conn.execute(
                render(REQUEUE_FAILED_SQL, ctx.schema), (HELD_AT, dead)
            ).rowcount
            conn.execute(BULK_SQL, ("off",))
            if count:
                conn.execute(render(APPLY_SQL, ctx.schema), (batch_id, -count, 0, 0))
            audit.record(
                conn, ctx, "retry batch", target, count=count, reason=reason,
                outcome=audit.OUTCOME_DONE if count else "noop: no failed targets",
            )
    except ForkliftError as exc:
        audit.record_refusal(conn, ctx, "retry batch", target, exc.code, reason)
        raise
    return count
