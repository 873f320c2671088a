"""The ceiling watch: the leader measures each queue with a ceiling and marks it full or not.

A queue's ceiling (``forklift queues ceiling``) caps its depth (available jobs) and/or the wait
of its oldest available job. Every :data:`MEASURE_EVERY` the leader reads the queues that have
one (one small statement), then measures each with a bounded read of the claim index: the depth
counts at most the ceiling + 1 entries (``LIMIT``), never the whole backlog; the oldest wait is
a loose index scan, one descent per (kind, priority) of the queue. It stores the figures and
which ceiling the queue is past (``full_by``) on the queue's row, and NOTIFYs apps
(forklift._jobs.fullness) when that changed, in the same statement. A queue without a ceiling
is never read, and no enqueue counts anything.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import psycopg

from forklift._db.sqltext import render
from forklift._jobs.fullness import full_channel
from forklift._worker.maintenance.chore import Chore

if TYPE_CHECKING:

    pass

log = logging.getLogger("forklift.worker")

#: Seconds between two measurements of a ceilinged queue (at most: the leader interval if
#: shorter).
MEASURE_EVERY = 1.0
#: Most (kind, priority) groups the oldest-wait read visits in one queue.
MAX_GROUPS = 1000

CEILINGED_SQL = """
SELECT name, ceiling_depth, ceiling_age, full_by FROM {s}.queues
WHERE ceiling_depth IS NOT NULL OR ceiling_age IS NOT NULL OR full_by IS NOT NULL
ORDER BY name
"""
DEPTH_SQL = """
SELECT count(*)::int FROM (
    SELECT 1 FROM {s}.jobs WHERE state = 'available' AND queue = %(q)s LIMIT %(cap)s) d
"""
OLDEST_SQL = """
WITH RECURSIVE g AS (
    (SELECT kind, priority, run_at FROM {s}.jobs WHERE state = 'available' AND queue = %(q)s
     ORDER BY queue, kind, priority, run_at, id LIMIT 1)
    UNION ALL
    SELECT n.kind, n.priority, n.run_at FROM g CROSS JOIN LATERAL (
        SELECT kind, priority, run_at FROM {s}.jobs
        WHERE state = 'available' AND queue = %(q)s AND (kind, priority) > (g.kind, g.priority)
        ORDER BY queue, kind, priority, run_at, id LIMIT 1) n
)
SELECT greatest(0, extract(epoch FROM now() - min(run_at)))::float8
FROM (SELECT run_at FROM g LIMIT %(groups)s) f
"""
STORE_SQL = """
WITH u AS (
    UPDATE {s}.queues SET measured_depth = %(depth)s, measured_age = %(age)s,
        measured_at = now(), full_by = %(by)s
    WHERE name = %(q)s RETURNING measured_at
)
SELECT pg_notify(%(channel)s, json_build_object('q', %(q)s::text, 'by', %(by)s::text,
    'figure', %(figure)s::float8, 'limit', %(limit)s::float8,
    't', extract(epoch FROM u.measured_at)::float8)::text)
FROM u WHERE %(changed)s
"""


@dataclass(frozen=True)
class Measure:
    """One ceilinged queue, as measured."""

    queue: str
    depth: int | None
    age: float | None
    #: Which ceiling it is past (``depth`` first), or None.
    by: str | None
    figure: float | None
    limit: float | None


def judge(queue: str, ceiling_depth: int | None, ceiling_age: float | None,
          depth: int | None, age: float | None) -> Measure:
    """Full at the ceiling: a depth ceiling of N leaves room for N jobs waiting."""
    if ceiling_depth is not None and depth is not None and depth >= ceiling_depth:
        return Measure(queue, depth, age, "depth", float(depth), float(ceiling_depth))
    if ceiling_age is not None and age is not None and age >= ceiling_age:
        return Measure(queue, depth, age, "age", age, ceiling_age)
    return Measure(queue, depth, age, None, None, None)


async def measure(conn: psycopg.AsyncConnection[Any], schema: str, queue: str,
                  ceiling_depth: int | None, ceiling_age: float | None) -> Measure:
    """The queue's depth (capped at the ceiling + 1) and oldest wait, each only if ceilinged."""
    depth = age = None
    if ceiling_depth is not None:
        cur = await conn.execute(render(DEPTH_SQL, schema), {"q": queue, "cap": ceiling_depth + 1})
        row = await cur.fetchone()
        depth = int(row[0]) if row else 0
    if ceiling_age is not None:
        cur = await conn.execute(render(OLDEST_SQL, schema), {"q": queue, "groups": MAX_GROUPS})
        row = await cur.fetchone()
        age = None if row is None or row[0] is None else float(row[0])
    return judge(queue, ceiling_depth, ceiling_age, depth, age)


async def store(conn: psycopg.AsyncConnection[Any], schema: str, m: Measure, *,
                changed: bool) -> None:
    """Store the figures and the verdict; NOTIFY apps if the verdict changed."""
    await conn.execute(render(STORE_SQL, schema), {
        "q": m.queue, "depth": m.depth, "age": m.age, "by": m.by, "figure": m.figure,
        "limit": m.limit, "channel": full_channel(schema), "changed": changed})


async def ceilinged(conn: psycopg.AsyncConnection[Any], schema: str
                    ) -> list[tuple[str, int | None, float | None, str | None]]:
    cur = await conn.execute(render(CEILINGED_SQL, schema))
    return [(str(n), d, a, b) for n, d, a, b in await cur.fetchall()]


class CeilingWatch(Chore):
    name = "ceilings"

    def every(self) -> float:
        return min(MEASURE_EVERY, self.config.leader_interval)

    async def once(self) -> None:
        schema = self.config.schema
        for queue, c_depth, c_age, was in await self.db.run(lambda c: ceilinged(c, schema)):
            if c_depth is None and c_age is None:
                m = judge(queue, None, None, None, None)  # ceiling lifted: room again
            else:
                m = await self.db.run(functools.partial(
                    measure, schema=schema, queue=queue, ceiling_depth=c_depth,
                    ceiling_age=c_age))
            changed = m.by != was
            await self.db.run(functools.partial(store, schema=schema, m=m, changed=changed))
            if changed:
                log.info("queue %s: %s", queue, "room again" if m.by is None else
                         f"full ({m.by} {m.figure:g} at its ceiling of {m.limit:g})")
