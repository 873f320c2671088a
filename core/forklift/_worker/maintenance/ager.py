"""The ager: in queues with priority aging, a waiting job's priority rises with its wait.

A queue's ``priority_aging`` (seconds, ``forklift queues aging``) raises an available job's
priority one step (its number one lower) for every interval it has been available (since its
``run_at``), never past the queue's ``aging_top``: the job's priority is
``max(top, base - floor(wait / every))``, where ``base`` is the priority it was given (kept in
``priority_base`` the first time aging changes it). Once at its queue's top it goes before every
newer job there (claim order is priority, then run_at), so a steady stream of high-priority
jobs cannot starve it.

One read of the queues that have aging per pass, then one bounded statement per such queue, at
most every half interval: its candidates come from the claim index (the queue, the waiting
jobs above the top, waiting at least one interval), are locked with ``SKIP LOCKED`` so a claim
is never waited on (a job being claimed is about to run anyway), and at most :data:`AGE_BATCH`
are raised a statement (the rest at the next pass). The claim itself is unchanged: it reads the
stored priority, so a queue without aging, and every job in it, pays nothing.
"""

from __future__ import annotations

import functools
import logging
import time
from typing import TYPE_CHECKING, Any

import psycopg

from forklift._base.words import plural
from forklift._db.sqltext import render
from forklift._worker.maintenance.chore import Chore

if TYPE_CHECKING:
    import asyncio

    from forklift._jobs.lifecycle import Lifecycle
    from forklift._worker.config import WorkerConfig
    from forklift._worker.state import WorkerState

log = logging.getLogger("forklift.worker")

#: Most jobs one statement raises (per queue and pass).
AGE_BATCH = 1000

AGING_QUEUES_SQL = """
SELECT name, priority_aging, aging_top FROM {s}.queues
WHERE priority_aging IS NOT NULL ORDER BY name
"""

# The target priority of a waiting job: one step per whole interval waited, from the priority it
# was given, never past the top. Only jobs below their target are touched, so a pass that finds
# nothing new writes nothing, and aging never lowers a priority (a retry's new run_at restarts
# the wait; the job keeps what it reached).
_TARGET = ("greatest(%(top)s::int, coalesce({t}priority_base, {t}priority)"
           " - floor(extract(epoch FROM now() - {t}run_at) / %(every)s::float8))")
AGE_SQL = """
WITH due AS (
    SELECT id FROM {s}.jobs
    WHERE state = 'available' AND queue = %(q)s AND priority > %(top)s::int
      AND run_at <= now() - make_interval(secs => %(every)s::float8)
      AND priority > """ + _TARGET.format(t="") + """
    LIMIT %(batch)s
    FOR UPDATE SKIP LOCKED
)
UPDATE {s}.jobs AS t SET
    priority_base = coalesce(t.priority_base, t.priority),
    priority = (""" + _TARGET.format(t="t.") + """)::smallint
FROM due
WHERE t.id = due.id AND t.state = 'available'
RETURNING t.id
"""


async def age(conn: psycopg.AsyncConnection[Any], schema: str, queue: str, every: float,
              top: int, *, batch: int = AGE_BATCH) -> int:
    """Raise the waiting jobs of ``queue`` due a step (at most ``batch``); how many."""
    cur = await conn.execute(render(AGE_SQL, schema),
                             {"q": queue, "every": every, "top": top, "batch": batch})
    return len(await cur.fetchall())


async def aging_queues(conn: psycopg.AsyncConnection[Any], schema: str
                       ) -> list[tuple[str, float, int]]:
    """The queues with priority aging: (name, interval in seconds, top)."""
    cur = await conn.execute(render(AGING_QUEUES_SQL, schema))
    return [(str(n), float(e), int(t)) for n, e, t in await cur.fetchall()]


class Ager(Chore):
    name = "age"

    def __init__(self, config: WorkerConfig, state: WorkerState, *, leading: asyncio.Event,
                 lifecycle: Lifecycle) -> None:
        super().__init__(config, state, leading=leading)
        self.lifecycle = lifecycle  # observers of aged jobs (metrics)
        #: queue -> monotonic time of its last statement (a queue ages at most every half
        #: interval: a job takes its step at most that late)
        self.last: dict[str, float] = {}

    async def once(self) -> None:
        schema = self.config.schema
        queues = await self.db.run(lambda c: aging_queues(c, schema))
        now = time.monotonic()
        aging = {name for name, _, _ in queues}
        self.last = {q: at for q, at in self.last.items() if q in aging}
        for queue, every, top in queues:
            if now - self.last.get(queue, -every) < every / 2:
                continue
            self.last[queue] = now
            n = await self.db.run(functools.partial(age, schema=schema, queue=queue,
                                                    every=every, top=top))
            if not n:
                continue
            self.state.stats.aged += n
            log.info("queue %s: priority aging raised %s", queue, plural(n, "waiting job"))
            if self.lifecycle.on_aged:
                self.lifecycle.aged(queue, n)
