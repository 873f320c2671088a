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
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any

import psycopg
import psycopg.errors

from forklift._base.errors import ForkliftError, InvalidOption, JobNotFound, NotRequeueable
from forklift._db.sqltext import render
from forklift.ops import audit, history, limits
from forklift.ops._action_specs import (
    NO_LIVE_HOLDER,
    RUNNABLE_STATES,
    SPECS,
    Selection,
    Spec,
    spec_of,
)
from forklift.ops.context import OpsContext
from forklift.ops.errors import InvalidFilter
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

DEFAULT_CAP = limits.DEFAULT_CAP
DEFAULT_BATCH = limits.DEFAULT_BATCH
SAMPLE = 20

LOCK_SQL = "SELECT state, kind, unique_key, queue FROM {s}.jobs WHERE id = %s FOR UPDATE"
# A requeue with a new start-by deadline (the requeue itself clears the old one), in its
# transaction: the job is never claimable without it.
NEW_DEADLINE_SQL = ("UPDATE {s}.jobs SET expires_at = now() + make_interval(secs => %s)"
                    " WHERE id = %s")


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


# -- one job ----------------------------------------------------------------------------------
def act(
    conn: psycopg.Connection[Any],
    ctx: OpsContext,
    action: str,
    job_id: int,
    *,
    reason: str | None = None,
    expires: timedelta | None = None,
) -> ActionResult:
    """Requeue, cancel, delete or run now one job, or raise the refusal (audited either way).

    ``expires`` (requeue only): the requeued job's new start-by deadline, that long from now; a
    requeue without one leaves the job without a deadline.
    """
    spec = spec_of(action)
    ctx.require_write(action)
    reason = audit.clean_reason(reason)
    target: dict[str, Any] = {"job": job_id}
    if expires is not None:
        if action != "requeue":
            raise InvalidOption(f"expires= applies to a requeue, not to {action}",
                                field="expires")
        if not isinstance(expires, timedelta) or expires <= timedelta(0):
            raise InvalidOption(f"expires must be a positive timedelta (how long from now the"
                                f" requeued job may still start), not {expires!r}",
                                field="expires")
        target["expires_in"] = expires.total_seconds()
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
            if expires is not None:
                conn.execute(render(NEW_DEADLINE_SQL, ctx.schema),
                             (expires.total_seconds(), job_id))
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
    conn: psycopg.Connection[Any], ctx: OpsContext, spec: Spec, flt: Selection, limit: int
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
            WHERE {where} AND t.unique_key IS NOT NULL AND {NO_LIVE_HOLDER}
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
    spec = spec_of(action)
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
    spec: Spec,
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
