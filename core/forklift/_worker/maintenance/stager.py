"""The stager: due scheduled and retryable jobs become available."""

from __future__ import annotations

from typing import Any

import psycopg

from forklift._sqltext import render
from forklift._worker.maintenance.chore import Chore

# One NOTIFY per queue that gained work.
STAGE_SQL = """
WITH due AS (
    SELECT id FROM {s}.jobs
    WHERE state IN ('scheduled', 'retryable') AND run_at <= now()
    ORDER BY run_at LIMIT %s
    FOR UPDATE SKIP LOCKED
), moved AS (
    UPDATE {s}.jobs AS t SET state = 'available' FROM due
    WHERE t.id = due.id AND t.state IN ('scheduled', 'retryable')
    RETURNING t.queue
), counted AS (
    SELECT queue, count(*) AS n FROM moved GROUP BY queue
)
SELECT queue, n, pg_notify({channel}, queue) FROM counted
"""


async def stage(conn: psycopg.AsyncConnection[Any], schema: str, limit: int = 5000) -> int:
    cur = await conn.execute(render(STAGE_SQL, schema), (limit,))
    return sum(int(r[1]) for r in await cur.fetchall())


class Stager(Chore):
    name = "stage"

    async def once(self) -> None:
        self.w.stats.staged += await self.db.run(lambda c: stage(c, self.w.schema))
