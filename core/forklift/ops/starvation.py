"""How long the oldest waiting job of each queue and priority has waited: starvation, seen.

A steady stream of high-priority jobs can keep a low-priority one waiting for ever (unless the
queue ages priorities, forklift.ops.aging). :func:`oldest_waits` reads, per queue and priority,
the oldest available job's wait (since its ``run_at``: enqueued, due, or back from a retry);
``forklift health`` alerts past its ``starvation_seconds`` threshold, the console's Overview
shows that alert, and the metrics gauge ``forklift_queue_oldest_wait_seconds`` exports it.

The read never scans the backlog: a loose index scan of the claim index (queue, kind, priority,
run_at, id; waiting jobs only) jumps from one (queue, kind, priority) to the next, and the first
entry of each is its oldest job, so it costs one index descent per distinct (queue, kind,
priority), at most :data:`MAX_GROUPS` of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg

from forklift._db.sqltext import render
from forklift.ops.context import OpsContext
from forklift.ops.shape import Shape

__all__ = ["MAX_GROUPS", "OLDEST_SQL", "OldestWait", "oldest_waits"]

#: Most (queue, kind, priority) groups one read visits.
MAX_GROUPS = 1000

OLDEST_SQL = """
WITH RECURSIVE g AS (
    (SELECT queue, kind, priority, run_at FROM {s}.jobs WHERE state = 'available'
     ORDER BY queue, kind, priority, run_at, id LIMIT 1)
    UNION ALL
    SELECT n.queue, n.kind, n.priority, n.run_at FROM g CROSS JOIN LATERAL (
        SELECT queue, kind, priority, run_at FROM {s}.jobs
        WHERE state = 'available' AND (queue, kind, priority) > (g.queue, g.kind, g.priority)
        ORDER BY queue, kind, priority, run_at, id LIMIT 1) n
), firsts AS (
    SELECT * FROM g LIMIT %(cap)s
)
SELECT f.queue, f.priority::int,
       greatest(0, extract(epoch FROM now() - min(f.run_at)))::float8, q.priority_aging
FROM firsts f LEFT JOIN {s}.queues q ON q.name = f.queue
GROUP BY f.queue, f.priority, q.priority_aging
ORDER BY f.queue, f.priority
"""


@dataclass(frozen=True)
class OldestWait(Shape):
    """The oldest available job of one queue and priority."""

    queue: str
    priority: int
    #: Since it became available (its run_at), in seconds.
    wait_seconds: float
    #: The queue's priority aging interval (forklift queues aging), None when off.
    aging_seconds: float | None = None


def oldest_waits(conn: psycopg.Connection[Any], ctx: OpsContext) -> list[OldestWait]:
    """Per queue and priority, the oldest available job's wait, by queue then priority."""
    rows = conn.execute(render(OLDEST_SQL, ctx.schema), {"cap": MAX_GROUPS}).fetchall()
    return [OldestWait(str(q), int(p), float(w), None if a is None else float(a))
            for q, p, w, a in rows]
