"""Replaying a finished workflow from a named step, as a fork into a new job.

A workflow is a job that recorded steps (``ctx.step``, ``ctx.sleep``, ``ctx.wait_for_event``:
``job_steps``). Replay creates a new job of the same kind, queue, arguments, priority, attempt
budget, tags and keys, and copies into it the completed steps recorded *before* the named one,
so its handler gets their stored results without running their code; the named step and every
later one are not copied, so they run again. The original is left exactly as it was: its steps,
result and error history stay the evidence of what happened, and the new job's ``meta.replay``
names it. A fork rather than a requeue in place because a requeue would have to delete the
later steps' records (the only account of what they returned) and would make the job's
history say two different things; a fork costs one row and the copied step rows.

Steps are ordered by when they were recorded (``started_at``: a step rerun after a failure
carries its last run's time), so "before" means what the handler reached first.

Refused, nothing created, the refusal audited: an unknown job (``job_not_found``), a job that
is not finished as completed or dead (``not_replayable``), a job that recorded no step
(``not_a_workflow``), a step name the job never recorded (``unknown_step``, listing the names
it has).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import psycopg

from forklift._base.errors import ForkliftError, JobNotFound
from forklift._db.sqltext import render
from forklift.ops import audit, history
from forklift.ops.context import OpsContext
from forklift.ops.errors import NotAWorkflow, NotReplayable, UnknownStep
from forklift.ops.shape import Shape

__all__ = ["REPLAYABLE_STATES", "ReplayResult", "replay"]

#: The states a workflow may be replayed from.
REPLAYABLE_STATES = ("completed", "dead")

SOURCE_SQL = "SELECT state, kind, queue FROM {s}.jobs WHERE id = %s"
STEPS_SQL = """
SELECT name, state FROM {s}.job_steps WHERE job_id = %s
ORDER BY started_at, coalesce(finished_at, 'infinity'::timestamptz), name
"""
# The fork: what the job was asked to do, not what became of it. Its unique key and batch are
# left behind (the original may still hold the key; the batch has settled), and so is a
# start-by deadline (the original's has passed, or will have). Its args keep their payload
# version, and its weight the slots it takes.
FORK_SQL = """
INSERT INTO {s}.jobs (queue, kind, args, priority, max_attempts, tags, meta, retry, keys,
                      tenant, enqueued_by, payload_version, weight)
SELECT queue, kind, args, coalesce(priority_base, priority), max_attempts, tags,
       meta || jsonb_build_object('replay', %s::jsonb), retry, keys, tenant, %s,
       payload_version, weight
FROM {source} AS src WHERE id = %s
RETURNING id, state
"""
COPY_SQL = """
INSERT INTO {s}.job_steps (job_id, name, state, result, error, fence, attempt, started_at,
                           finished_at, wake_at, event, match, snapshot, event_id)
SELECT %s, name, state, result, error, fence, attempt, started_at, finished_at, wake_at,
       event, match, snapshot, event_id
FROM {s}.job_steps WHERE job_id = %s AND name = ANY(%s::text[]) AND state = 'completed'
"""


@dataclass(frozen=True)
class ReplayResult(Shape):
    """A replay: the original job, the new one, and which recorded steps each part covers."""

    job_id: int
    from_step: str
    #: The new job (a dry run's is rolled back with everything else).
    new_job_id: int
    new_state: str
    #: Steps whose stored results the new job reuses, in the order they were recorded.
    kept: list[str]
    #: Recorded steps that run again: the named one and every later one.
    rerun: list[str]


def plan(names: list[tuple[str, str]], from_step: str) -> tuple[list[str], list[str]]:
    """(kept, rerun): completed steps before ``from_step``, and ``from_step`` onwards."""
    order = [n for n, _ in names]
    at = order.index(from_step)
    kept = [n for n, state in names[:at] if state == "completed"]
    return kept, order[at:]


def replay(conn: psycopg.Connection[Any], ctx: OpsContext, job_id: int, *, from_step: str,
           reason: str | None = None) -> ReplayResult:
    """Fork job ``job_id`` into a new job that reuses the steps before ``from_step`` and runs
    that step and the rest again (see the module); audited, refusals too."""
    ctx.require_write("workflows replay")
    reason = audit.clean_reason(reason)
    target: dict[str, Any] = {"job": job_id, "from_step": from_step}
    try:
        with conn.transaction():
            row = conn.execute(history.render_read(SOURCE_SQL, conn, ctx.schema),
                               (job_id,)).fetchone()
            if row is None:
                raise JobNotFound(f"no job with id {job_id}: check the id with `forklift jobs"
                                  " list`", job_id=job_id)
            state, kind, _queue = row
            if state not in REPLAYABLE_STATES:
                raise NotReplayable(
                    f"job {job_id} is {state}: only a completed or dead workflow can be"
                    " replayed" + (" (wait for it to finish, or cancel it)"
                                   if state != "cancelled" else ""),
                    job_id=job_id, state=state)
            names = [(n, s) for n, s in
                     conn.execute(render(STEPS_SQL, ctx.schema), (job_id,)).fetchall()]
            if not names:
                raise NotAWorkflow(
                    f"job {job_id} ({kind}) recorded no steps: replay reruns a workflow from"
                    " one of its steps; requeue a plain job instead (forklift jobs retry)",
                    job_id=job_id, kind=kind)
            if from_step not in {n for n, _ in names}:
                raise UnknownStep(
                    f"job {job_id} recorded no step {from_step!r}; its steps:"
                    f" {', '.join(repr(n) for n, _ in names)}",
                    job_id=job_id, step=from_step, steps=[n for n, _ in names])
            kept, rerun = plan(names, from_step)
            origin = json.dumps({"of": job_id, "from_step": from_step})
            fork = FORK_SQL.replace(
                "{source}", history.source(ctx.schema, history.partitioned(conn, ctx.schema)))
            new_id, new_state = conn.execute(render(fork, ctx.schema),
                                             (origin, ctx.actor, job_id)).fetchone() or (0, "")
            if kept:
                conn.execute(render(COPY_SQL, ctx.schema), (new_id, job_id, kept))
            audit.record(conn, ctx, "workflows.replay",
                         {**target, "new_job": new_id, "kept": kept, "rerun": rerun},
                         count=1, reason=reason, outcome="replayed")
    except ForkliftError as exc:
        audit.record_refusal(conn, ctx, "workflows.replay", target, exc.code, reason)
        raise
    return ReplayResult(job_id, from_step, new_id, new_state, kept, rerun)
