"""The four job actions' rules: which states each applies to, its SQL, and why it refuses.

:mod:`forklift.ops.actions` runs them, on one job or in bulk, and re-exports what is public.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import psycopg

from forklift._base.errors import NotRequeueable
from forklift._base.scrub import scrub
from forklift._db.sqltext import channel, control_channel, render
from forklift._jobs.job import LIVE_STATES, LIVE_STATES_SQL, TERMINAL_STATES
from forklift.ops.context import OpsContext
from forklift.ops.errors import InvalidFilter, NotCancellable, NotDeletable, NotRunnable


class Selection(Protocol):
    """Which jobs a bulk action selects: a :class:`JobFilter`, or another selection with the
    same four methods (``forklift.ops.dead.DeadGroupFilter``: the jobs of one dead group)."""

    def where(self, alias: str = "t") -> tuple[str, list[Any]]: ...

    def validate(self) -> Selection: ...

    def narrowed(self, allowed: tuple[str, ...], action: str) -> Selection: ...

    def to_json(self) -> dict[str, Any]: ...


HOLDER_SQL = """
SELECT id FROM {s}.jobs
WHERE kind = %s AND unique_key = %s AND id <> %s
  AND state IN """ + LIVE_STATES_SQL + """
LIMIT 1
"""
NO_LIVE_HOLDER = """(t.unique_key IS NULL OR NOT EXISTS (
    SELECT 1 FROM {s}.jobs l WHERE l.kind = t.kind AND l.unique_key = t.unique_key
      AND l.state IN """ + LIVE_STATES_SQL + """ AND l.id <> t.id))"""

# Each statement starts from the locked, re-checked selection; {where} is the filter's fixed
# text (parameters follow the ids), {extra} an action's own guard.
PICKED = """
WITH picked AS (
    SELECT t.id FROM {{s}}.jobs t
    WHERE t.id = ANY(%s::bigint[]) AND {where} AND {extra}
    ORDER BY t.id
    FOR UPDATE OF t
)"""

# A requeued job starts afresh, without the start-by deadline it had (one that expired would
# end it again at once): an operator who wants one enqueues anew with ``expires=``.
REQUEUE_SQL = PICKED + """
UPDATE {{s}}.jobs AS t SET
    state = 'available', attempt = 0, lost = 0, run_at = now(), finished_at = NULL,
    worker_id = NULL, fence = nextval('{{s}}.fence_seq'), lease_expires_at = NULL,
    cancel_requested_at = NULL, result = NULL, partial = NULL, progress = NULL,
    expires_at = NULL
FROM picked WHERE t.id = picked.id AND t.state IN ('completed', 'cancelled', 'dead')
RETURNING t.id, t.queue, 'requeued'
"""

# Waiting jobs end at once; a running one gets the request, and its worker is told by NOTIFY
# (and by its next heartbeat, which reads the request). The worker writes the final state:
# cancelled, or completed when the handler had already finished its work.
CANCEL_SQL = PICKED + """, done AS (
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

DELETE_SQL = PICKED + """
DELETE FROM {{s}}.jobs AS t USING picked
WHERE t.id = picked.id AND t.state IN ('completed', 'cancelled', 'dead')
RETURNING t.id, t.queue, 'deleted'
"""

# A job waiting for its time (scheduled, or retryable after a failure) becomes claimable now:
# the attempt count and error history stay; a fresh fence, as for every action on a job.
RUN_NOW_SQL = PICKED + """
UPDATE {{s}}.jobs AS t SET
    state = 'available', run_at = now(), fence = nextval('{{s}}.fence_seq')
FROM picked WHERE t.id = picked.id AND t.state IN ('scheduled', 'retryable')
RETURNING t.id, t.queue, 'made_available'
"""

WAKE_SQL = "SELECT pg_notify(%s, q) FROM unnest(%s::text[]) AS q"


@dataclass(frozen=True)
class Spec:
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
    held = conn.execute(render(HELD_BY_SQL, ctx.schema), (job_id,)).fetchone()
    if held is not None:
        target, name = held
        what, how = (f"workflow {name}", f"forklift workflows resume {name}") \
            if target == "workflow" else (f"kind {name}", f"forklift kinds resume {name}")
        raise NotRunnable(
            f"job {job_id} is held by the pause of {what}: resume it first ({how})",
            job_id=job_id, state=row[0], paused=target, name=name,
        )


# The pause that holds a job (forklift.ops.holds): a kind's, or its workflow's. Run now leaves
# a held job where it is: it would start while its kind or workflow is paused.
HELD_BY_SQL = """
SELECT p.target, p.name FROM {s}.job_holds h JOIN {s}.jobs j ON j.id = h.job_id
JOIN {s}.pauses p ON (p.target = 'kind' AND p.name = j.kind)
                  OR (p.target = 'workflow' AND p.name = j.id::text)
WHERE h.job_id = %s
ORDER BY p.target LIMIT 1
"""
NOT_HELD = "NOT EXISTS (SELECT 1 FROM {s}.job_holds h WHERE h.job_id = t.id)"

#: The states run now applies to: waiting for their time.
RUNNABLE_STATES: tuple[str, ...] = ("scheduled", "retryable")

SPECS: dict[str, Spec] = {
    "requeue": Spec("requeue", TERMINAL_STATES, REQUEUE_SQL, NO_LIVE_HOLDER, _refuse_requeue),
    "cancel": Spec("cancel", LIVE_STATES, CANCEL_SQL, "true", _refuse_cancel),
    "delete": Spec("delete", TERMINAL_STATES, DELETE_SQL, "true", _refuse_delete),
    "run_now": Spec("run_now", RUNNABLE_STATES, RUN_NOW_SQL, NOT_HELD, _refuse_run_now),
}


def spec_of(action: str) -> Spec:
    try:
        return SPECS[action]
    except KeyError:
        raise InvalidFilter(
            f"unknown action {action!r}: use one of {', '.join(SPECS)}", field="action"
        ) from None
