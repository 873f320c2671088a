"""Acting on jobs: requeue, cancel, delete and run now, one job or every job a filter matches.

One job: the row is locked (``FOR UPDATE``), the rule checked, the change and its audit row
committed together; a refusal raises with a stable code and is audited too.

Many jobs: :func:`bulk` selects up to ``cap`` ids with ONE query (the same query a dry run
reports on), then acts on them in bounded server-side batches, one short transaction each with
its own audit row. Each batch re-checks the filter under the row lock, so a job that changed in
between is skipped and reported, never acted on wrongly.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import psycopg
import psycopg.errors

from forklift._errors import ForkliftError, JobNotFound, NotRequeueable
from forklift._job import LIVE_STATES, LIVE_STATES_SQL, TERMINAL_STATES
from forklift._scrub import scrub
from forklift._sqltext import channel, control_channel, render
from forklift.ops import audit, history, limits
from forklift.ops.context import OpsContext
from forklift.ops.errors import InvalidFilter, NotCancellable, NotDeletable, NotRunnable
from forklift.ops.filters import JobFilter
from forklift.ops.shape import Shape

__all__ = [
    "DEFAULT_BATCH",
    "DEFAULT_CAP",
    "RUNNABLE_STATES",
    "SAMPLE",
    "SPECS",
    "ActionResult",
    "BulkReport",
    "Selection",
    "act",
    "bulk",
    "select_ids",
]


class Selection(Protocol):
    """Which jobs a bulk action selects: a :class:`JobFilter`, or another selection with the
    same four methods (``forklift.ops.dead.DeadGroupFilter``: the jobs of one dead group)."""

    def where(self, alias: str = "t") -> tuple[str, list[Any]]: ...

    def validate(self) -> Selection: ...

    def narrowed(self, allowed: tuple[str, ...], action: str) -> Selection: ...

    def to_json(self) -> dict[str, Any]: ...


DEFAULT_CAP = limits.DEFAULT_CAP
DEFAULT_BATCH = limits.DEFAULT_BATCH
SAMPLE = 20

LOCK_SQL = "SELECT state, kind, unique_key, queue FROM {s}.jobs WHERE id = %s FOR UPDATE"
HOLDER_SQL = """
SELECT id FROM {s}.jobs
WHERE kind = %s AND unique_key = %s AND id <> %s
  AND state IN """ + LIVE_STATES_SQL + """
LIMIT 1
"""
_NO_LIVE_HOLDER = """(t.unique_key IS NULL OR NOT EXISTS (
    SELECT 1 FROM {s}.jobs l WHERE l.kind = t.kind AND l.unique_key = t.unique_key
      AND l.state IN """ + LIVE_STATES_SQL + """ AND l.id <> t.id))"""

# Each statement starts from the locked, re-checked selection; {where} is the filter's fixed
# text (parameters follow the ids), {extra} an action's own guard.
_PICKED = """
WITH picked AS (
    SELECT t.id FROM {{s}}.jobs t
    WHERE t.id = ANY(%s::bigint[]) AND {where} AND {extra}
    ORDER BY t.id
    FOR UPDATE OF t
)"""

REQUEUE_SQL = _PICKED + """
UPDATE {{s}}.jobs AS t SET
    state = 'available', attempt = 0, lost = 0, run_at = now(), finished_at = NULL,
    worker_id = NULL, fence = nextval('{{s}}.fence_seq'), lease_expires_at = NULL,
    cancel_requested_at = NULL, result = NULL, partial = NULL, progress = NULL
FROM picked WHERE t.id = picked.id AND t.state IN ('completed', 'cancelled', 'dead')
RETURNING t.id, t.queue, 'requeued'
"""

# Waiting jobs end at once; a running one gets the request, and its worker is told by NOTIFY
# (and by its next heartbeat, which reads the request). The worker writes the final state:
# cancelled, or completed when the handler had already finished its work.
CANCEL_SQL = _PICKED + """, done AS (
    UPDATE {{s}}.jobs AS t SET
        state = CASE WHEN t.state = 'running' THEN 'running' ELSE 'cancelled' END,
        finished_at = CASE WHEN t.state = 'running' THEN NULL ELSE now() END,
        cancel_requested_at = coalesce(t.cancel_requested_at, now()),
        errors = CASE WHEN t.state = 'running' THEN t.errors
                 ELSE t.errors || jsonb_build_array(jsonb_build_object(
                     'code', 'cancelled', 'type', NULL, 'message', %s::text,
                     'traceback', '[]'::jsonb, 'attempt', t.attempt, 'worker', NULL,
                     'at', now())) END
    FROM picked WHERE t.id = picked.id
      AND t.state IN """ + LIVE_STATES_SQL + """
    RETURNING t.id, t.queue, t.state
)
SELECT id, queue,
       CASE WHEN state = 'running' THEN 'cancel_requested' ELSE 'cancelled' END,
       CASE WHEN state = 'running'
            THEN pg_notify(%s::text, json_build_object('op', 'cancel', 'job', id)::text) END
FROM done
"""

DELETE_SQL = _PICKED + """
DELETE FROM {{s}}.jobs AS t USING picked
WHERE t.id = picked.id AND t.state IN ('completed', 'cancelled', 'dead')
RETURNING t.id, t.queue, 'deleted'
"""

# A job waiting for its time (scheduled, or retryable after a failure) becomes claimable now:
# the attempt count and error history stay; a fresh fence, as for every action on a job.
RUN_NOW_SQL = _PICKED + """
UPDATE {{s}}.jobs AS t SET
    state = 'available', run_at = now(), fence = nextval('{{s}}.fence_seq')
FROM picked WHERE t.id = picked.id AND t.state IN ('scheduled', 'retryable')
RETURNING t.id, t.queue, 'made_available'
"""

WAKE_SQL = "SELECT pg_notify(%s, q) FROM unnest(%s::text[]) AS q"


@dataclass(frozen=True)
class ActionResult(Shape):
    """What one action did to one job."""

    action: str
    job_id: int
    #: requeued, cancelled, cancel_requested or deleted
    outcome: str
    previous_state: str
    #: The state now; None once deleted. A cancel_requested job is still running until its
    #: worker stops it.
    state: str | None


@dataclass(frozen=True)
class BulkReport(Shape):
    action: str
    dry_run: bool
    filter: dict[str, Any]
    cap: int
    #: Jobs the selection found (at most ``cap``); a dry run reports this and does nothing.
    matched: int
    #: More than ``cap`` jobs match: run again for the rest.
    more: bool
    by_state: dict[str, int]
    sample_ids: list[int]
    #: Jobs acted on, and how: e.g. {"cancelled": 40, "cancel_requested": 2}.
    done: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    #: Selected jobs that changed before their batch ran (or now collide on a unique key).
    skipped: int = 0
    skipped_ids: list[int] = field(default_factory=list)
    batches: int = 0


@dataclass(frozen=True)
class _Spec:
    name: str
    #: The states the action applies to.
    states: tuple[str, ...]
    sql: str
    #: An extra guard on each row (fixed SQL text).
    extra: str = "true"
    refuse: Callable[[psycopg.Connection[Any], OpsContext, int, tuple[Any, ...]], None] | None = None

    def apply(
        self,
        conn: psycopg.Connection[Any],
        ctx: OpsContext,
        flt: Selection,
        ids: list[int],
        reason: str | None,
        actor: str,
    ) -> list[tuple[int, str, str]]:
        where, params = flt.where()
        sql = render(self.sql.format(where=where, extra=self.extra.format(s="{s}")), ctx.schema)
        args: list[Any] = [ids, *params]
        if self.name == "cancel":
            message = f"cancelled by {actor}" + (f": {reason}" if reason else "")
            args += [scrub(message), control_channel(ctx.schema)]
        rows = conn.execute(sql, args).fetchall()
        done = [(int(r[0]), str(r[1]), str(r[2])) for r in rows]
        if self.name in ("requeue", "run_now") and done:  # they became claimable: wake workers
            queues = sorted({q for _, q, _ in done})
            conn.execute(WAKE_SQL, (channel(ctx.schema), queues))
        return done


def _refuse_requeue(
    conn: psycopg.Connection[Any], ctx: OpsContext, job_id: int, row: tuple[Any, ...]
) -> None:
    state, kind, unique_key, _ = row
    if state not in TERMINAL_STATES:
        raise NotRequeueable(
            f"job {job_id} is {state}: only completed, cancelled or dead jobs can be requeued"
            + ("; cancel it first if it must start over" if state != "running" else
               "; cancel it first, or wait for it to finish"),
            job_id=job_id,
            state=state,
        )
    if unique_key is not None:
        holder = conn.execute(render(HOLDER_SQL, ctx.schema), (kind, unique_key, job_id)).fetchone()
        if holder:
            raise NotRequeueable(
                f"job {job_id} cannot be requeued: live job {holder[0]} now holds its unique key"
                f" {unique_key!r}; wait for that job to finish or cancel it",
                job_id=job_id,
                holder=int(holder[0]),
            )


def _refuse_cancel(
    conn: psycopg.Connection[Any], ctx: OpsContext, job_id: int, row: tuple[Any, ...]
) -> None:
    if row[0] in TERMINAL_STATES:
        raise NotCancellable(
            f"job {job_id} is already {row[0]}: there is nothing to cancel", job_id=job_id,
            state=row[0],
        )


def _refuse_delete(
    conn: psycopg.Connection[Any], ctx: OpsContext, job_id: int, row: tuple[Any, ...]
) -> None:
    if row[0] not in TERMINAL_STATES:
        raise NotDeletable(
            f"job {job_id} is {row[0]}: only completed, cancelled or dead jobs can be deleted;"
            " cancel it first",
            job_id=job_id,
            state=row[0],
        )


def _refuse_run_now(
    conn: psycopg.Connection[Any], ctx: OpsContext, job_id: int, row: tuple[Any, ...]
) -> None:
    if row[0] not in RUNNABLE_STATES:
        raise NotRunnable(
            f"job {job_id} is {row[0]}: run now applies to scheduled or retryable jobs"
            + ("; requeue it to run it again" if row[0] in TERMINAL_STATES else ""),
            job_id=job_id,
            state=row[0],
        )


#: The states run now applies to: waiting for their time.
RUNNABLE_STATES: tuple[str, ...] = ("scheduled", "retryable")

SPECS: dict[str, _Spec] = {
    "requeue": _Spec("requeue", TERMINAL_STATES, REQUEUE_SQL, _NO_LIVE_HOLDER, _refuse_requeue),
    "cancel": _Spec("cancel", LIVE_STATES, CANCEL_SQL, "true", _refuse_cancel),
    "delete": _Spec("delete", TERMINAL_STATES, DELETE_SQL, "true", _refuse_delete),
    "run_now": _Spec("run_now", RUNNABLE_STATES, RUN_NOW_SQL, "true", _refuse_run_now),
}


def _spec(action: str) -> _Spec:
    try:
        return SPECS[action]
    except KeyError:
        raise InvalidFilter(
            f"unknown action {action!r}: use one of {', '.join(SPECS)}", field="action"
        ) from None


# -- one job ----------------------------------------------------------------------------------
def act(
    conn: psycopg.Connection[Any],
    ctx: OpsContext,
    action: str,
    job_id: int,
    *,
    reason: str | None = None,
) -> ActionResult:
    """Requeue, cancel, delete or run now one job, or raise the refusal (audited either way)."""
    spec = _spec(action)
    ctx.require_write(action)
    reason = audit.clean_reason(reason)
    target = {"job": job_id}
    try:
        with conn.transaction():
            history.restore(conn, ctx.schema, [job_id])  # a job in partitioned history
            row = conn.execute(render(LOCK_SQL, ctx.schema), (job_id,)).fetchone()
            if row is None:
                raise JobNotFound(
                    f"no job with id {job_id}: check the id with `forklift jobs list`",
                    job_id=job_id,
                )
            if spec.refuse is not None:
                spec.refuse(conn, ctx, job_id, row)
            flt = JobFilter(ids=(job_id,), states=spec.states)
            done = spec.apply(conn, ctx, flt, [job_id], reason, ctx.actor)
            if not done:  # the row is locked and checked: only requeue's key guard gets here
                raise NotRequeueable(
                    f"job {job_id} cannot be requeued: a live job now holds its unique key",
                    job_id=job_id,
                )
            outcome = done[0][2]
            audit.record(conn, ctx, action, target, count=1, reason=reason, outcome=outcome)
    except psycopg.errors.UniqueViolation:
        exc = NotRequeueable(
            f"job {job_id} cannot be requeued: a live job now holds its unique key",
            job_id=job_id,
        )
        audit.record_refusal(conn, ctx, action, target, exc.code, reason)
        raise exc from None
    except ForkliftError as exc:
        audit.record_refusal(conn, ctx, action, target, exc.code, reason)
        raise
    state = {"requeued": "available", "made_available": "available", "cancelled": "cancelled",
             "deleted": None}.get(
        outcome, "running"
    )
    return ActionResult(action, job_id, outcome, str(row[0]), state)


# -- many jobs --------------------------------------------------------------------------------
def select_ids(
    conn: psycopg.Connection[Any], ctx: OpsContext, spec: _Spec, flt: Selection, limit: int
) -> list[tuple[int, str]]:
    """The selection a bulk action runs on, in id order: its dry run reports exactly this.

    A requeue skips jobs whose unique key a live job holds, and of several finished jobs that
    share a key takes only the oldest (requeueing two would collide).
    """
    where, params = flt.where()
    if spec.name == "requeue":
        sql = f"""
        (SELECT t.id, t.state FROM {{s}}.jobs t
         WHERE {where} AND t.unique_key IS NULL ORDER BY t.id LIMIT %s)
        UNION ALL
        (SELECT id, state FROM (
            SELECT DISTINCT ON (t.kind, t.unique_key) t.id, t.state FROM {{s}}.jobs t
            WHERE {where} AND t.unique_key IS NOT NULL AND {_NO_LIVE_HOLDER}
            ORDER BY t.kind, t.unique_key, t.id) keyed
         ORDER BY id LIMIT %s)
        ORDER BY 1 LIMIT %s
        """
        args = [*params, limit, *params, limit, limit]
    else:
        sql = f"SELECT t.id, t.state FROM {{s}}.jobs t WHERE {where} ORDER BY t.id LIMIT %s"
        args = [*params, limit]
    rows = conn.execute(history.render_read(sql, conn, ctx.schema), args).fetchall()
    return [(int(i), str(s)) for i, s in rows]


def bulk(
    conn: psycopg.Connection[Any],
    ctx: OpsContext,
    action: str,
    flt: Selection,
    *,
    dry_run: bool = False,
    cap: int = DEFAULT_CAP,
    batch_size: int = DEFAULT_BATCH,
    reason: str | None = None,
) -> BulkReport:
    """Act on up to ``cap`` jobs matching ``flt`` (limited to the states the action applies to)."""
    spec = _spec(action)
    if not 1 <= cap <= 1_000_000:
        raise InvalidFilter("the cap is between 1 and 1,000,000 jobs per call", field="cap")
    if not 1 <= batch_size <= 10_000:
        raise InvalidFilter("the batch size is between 1 and 10,000", field="batch_size")
    flt = flt.validate().narrowed(spec.states, action)
    if not dry_run:
        ctx.require_write(action)
    reason = audit.clean_reason(reason)
    rows = select_ids(conn, ctx, spec, flt, cap + 1)
    more = len(rows) > cap
    rows = rows[:cap]
    report = BulkReport(
        action=action,
        dry_run=dry_run,
        filter=flt.to_json(),
        cap=cap,
        matched=len(rows),
        more=more,
        by_state=dict(Counter(s for _, s in rows)),
        sample_ids=[i for i, _ in rows[:SAMPLE]],
    )
    if dry_run or not rows:
        return report
    outcomes: Counter[str] = Counter()
    skipped: list[int] = []
    ids = [i for i, _ in rows]
    batches = 0
    for start in range(0, len(ids), batch_size):
        chunk = ids[start : start + batch_size]
        batches += 1
        target = {"filter": report.filter, "batch": batches, "first_id": chunk[0],
                  "last_id": chunk[-1]}
        try:
            done = _run_batch(conn, ctx, spec, flt, chunk, reason, target)
        except psycopg.errors.UniqueViolation:
            done = []
            for job_id in chunk:  # a key taken meanwhile: one at a time, skip the colliders
                with contextlib.suppress(psycopg.errors.UniqueViolation):
                    done += _run_batch(conn, ctx, spec, flt, [job_id], reason, target)
        acted = {i for i, _, _ in done}
        outcomes.update(o for _, _, o in done)
        skipped += [i for i in chunk if i not in acted]
    return replace(
        report,
        done=sum(outcomes.values()),
        outcomes=dict(outcomes),
        skipped=len(skipped),
        skipped_ids=skipped[:SAMPLE],
        batches=batches,
    )


def _run_batch(
    conn: psycopg.Connection[Any],
    ctx: OpsContext,
    spec: _Spec,
    flt: Selection,
    ids: list[int],
    reason: str | None,
    target: dict[str, Any],
) -> list[tuple[int, str, str]]:
    with conn.transaction():
        history.restore(conn, ctx.schema, ids)  # those in partitioned history
        done = spec.apply(conn, ctx, flt, ids, reason, ctx.actor)
        counts = Counter(o for _, _, o in done)
        audit.record(
            conn, ctx, f"{spec.name}_many", target, count=len(done), reason=reason,
            outcome=", ".join(f"{k}: {v}" for k, v in sorted(counts.items())) or "none matched",
        )
    return done
