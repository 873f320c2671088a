"""Priority aging of a queue, as an operator sets it (``forklift queues aging``).

With aging on, every ``every`` a job has been available (since its ``run_at``: enqueued, due, or
back from a retry) raises its priority one step, its number one lower, never past ``top`` (the
highest priority aging lifts a job to; a job already at or above it is never touched). The
elected leader does it (forklift._worker.maintenance.ager), so a low-priority job reaches the
top in ``(priority - top) * every`` at most and then goes before every newer job of its
priority: a steady stream of high-priority work no longer starves it. The first time aging
changes a job it keeps the priority it was given in ``priority_base`` (``jobs show`` shows
both). A queue without aging costs nothing: the leader never reads its jobs.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import psycopg

from forklift._db.sqltext import render
from forklift.ops import audit
from forklift.ops._parse import duration
from forklift.ops.context import OpsContext
from forklift.ops.errors import InvalidFilter
from forklift.ops.queues import QueueInfo, _act, _check_name, _require_known

__all__ = ["MAX_EVERY", "MIN_EVERY", "set_aging"]

#: Bounds of an aging interval: shorter would rewrite a waiting job's row at every leader pass,
#: longer would never age anything in practice.
MIN_EVERY = 1.0
MAX_EVERY = 30 * 86_400.0
#: Priorities are smallints.
PRIORITY_RANGE = (-32768, 32767)

AGING_SQL = """
INSERT INTO {s}.queues AS q (name, priority_aging, aging_top) VALUES (%(q)s, %(every)s, %(top)s)
ON CONFLICT (name) DO UPDATE SET priority_aging = excluded.priority_aging,
    aging_top = excluded.aging_top, updated_at = now()
"""


def set_aging(conn: psycopg.Connection[Any], ctx: OpsContext, queue: str,
              every: str | float | timedelta | None, *, top: int = 0,
              reason: str | None = None, create: bool = False) -> QueueInfo:
    """Age the queue's waiting jobs one priority step every ``every`` (``30s``, ``5m``, seconds
    or a timedelta), never past ``top``; None turns aging off. Audited (``queue_aging``)."""
    seconds = None if every is None else duration(every, "every").total_seconds()
    if seconds is not None and not MIN_EVERY <= seconds <= MAX_EVERY:
        raise InvalidFilter(
            f"every = {seconds:g}s is out of range: priority aging takes {MIN_EVERY:g}s to"
            f" {MAX_EVERY / 86_400:g}d (off: none)", field="every")
    if isinstance(top, bool) or not isinstance(top, int) or not (
            PRIORITY_RANGE[0] <= top <= PRIORITY_RANGE[1]):
        raise InvalidFilter(f"top = {top!r} is not a priority ({PRIORITY_RANGE[0]} to"
                            f" {PRIORITY_RANGE[1]})", field="top")
    queue, reason = _check_name(queue), audit.clean_reason(reason)

    def body(c: psycopg.Connection[Any]) -> None:
        _require_known(c, ctx, queue, create)
        c.execute(render(AGING_SQL, ctx.schema), {"q": queue, "every": seconds, "top": top})

    target: dict[str, Any] = {"queue": queue, "every_seconds": seconds, "top": top}
    return _act(conn, ctx, "queue_aging", target, reason, body)
