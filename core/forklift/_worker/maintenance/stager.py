"""The stager: due scheduled and retryable jobs become available, a batch per statement.

The same statement ends the sleeps, and the timed-out waits, of the parked jobs it moves (see
:mod:`forklift._features.durable.waits`): the resumed attempt reads its steps (a batch per worker, as
every attempt that uses steps does) and finds its sleep over, so waking a thousand parked jobs
writes nothing per job. It joins only the parked steps' index, so staging a job that never
slept costs what it did. A step row an event's publisher is taking (its commit is waking that
wait) is skipped, not waited for: the publisher locks steps before jobs and the stager jobs
before steps, so waiting either way could deadlock; the event wins and the job runs with it.

Workers are woken only where one left an idle mark (``wake_queue``, ``functions/
workflows_v2.sql``), the rule of plain enqueues: no NOTIFY, and its commit lock, while every
worker is busy.

A job a pause holds (``job_holds``: forklift.ops.holds) is left where it is, whatever its time:
one that was running when its workflow or kind was paused may have failed its attempt or
parked meanwhile, and the resume puts it back.
"""

from __future__ import annotations

from typing import Any

import psycopg

from forklift._db.sqltext import render
from forklift._worker.maintenance.chore import Chore

STAGE_SQL = """
WITH due AS (
    SELECT id FROM {s}.jobs
    WHERE state IN ('scheduled', 'retryable') AND run_at <= now()
      AND NOT EXISTS (SELECT FROM {s}.job_holds h WHERE h.job_id = jobs.id)
    ORDER BY run_at LIMIT %s
    FOR UPDATE SKIP LOCKED
), moved AS (
    UPDATE {s}.jobs AS t SET state = 'available' FROM due
    WHERE t.id = due.id AND t.state IN ('scheduled', 'retryable')
    RETURNING t.id, t.queue
), over AS (
    SELECT x.job_id, x.name FROM {s}.job_steps x JOIN moved ON x.job_id = moved.id
    WHERE x.state IN ('sleeping', 'waiting') AND x.wake_at <= now()
    FOR UPDATE OF x SKIP LOCKED
), ended AS (
    UPDATE {s}.job_steps AS x SET state = 'completed', finished_at = now()
    FROM over WHERE x.job_id = over.job_id AND x.name = over.name
    RETURNING 1
), counted AS (
    SELECT queue, count(*) AS n FROM moved GROUP BY queue
)
SELECT queue, n, {s}.wake_queue(queue) FROM counted
"""


async def stage(conn: psycopg.AsyncConnection[Any], schema: str, limit: int = 5000) -> int:
    """Jobs made available (their parked steps ended with them): one statement."""
    cur = await conn.execute(render(STAGE_SQL, schema), (limit,))
    return sum(int(r[1]) for r in await cur.fetchall())


class Stager(Chore):
    name = "stage"

    async def once(self) -> None:
        self.state.stats.staged += await self.db.run(lambda c: stage(c, self.config.schema))
