"""Worker pruning: rows of workers whose heartbeat stopped long ago."""

from __future__ import annotations

from typing import Any

import psycopg

from forklift._sqltext import render
from forklift._worker.maintenance.chore import Chore

PRUNE_WORKERS_SQL = (
    "DELETE FROM {s}.workers WHERE heartbeat_at < now() - make_interval(secs => %s) RETURNING id"
)


async def prune_workers(conn: psycopg.AsyncConnection[Any], schema: str, stale_after: float) -> int:
    cur = await conn.execute(render(PRUNE_WORKERS_SQL, schema), (stale_after,))
    return len(await cur.fetchall())


class WorkerPruner(Chore):
    name = "prune-workers"

    def every(self) -> float:
        return 60.0

    async def once(self) -> None:
        w = self.w
        await self.db.run(lambda c: prune_workers(c, w.schema, max(60.0, 3 * w.lease)))
