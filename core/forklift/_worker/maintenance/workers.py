"""Worker rows: a worker whose heartbeat stopped is marked exited (killed); rows of exited
workers are kept for :data:`HISTORY` seconds, then deleted."""

from __future__ import annotations

from typing import Any

import psycopg

from forklift._db.sqltext import render
from forklift._worker.maintenance.chore import Chore

#: How long the row of an exited worker stays listed (``forklift workers list``).
HISTORY = 86400.0

MARK_KILLED_SQL = """
UPDATE {s}.workers SET state = 'exited', exited_at = heartbeat_at, exit_reason = 'killed',
                       in_use = 0
WHERE state <> 'exited' AND heartbeat_at < now() - make_interval(secs => %s)
"""
PRUNE_WORKERS_SQL = """
DELETE FROM {s}.workers
WHERE state = 'exited' AND exited_at < now() - make_interval(secs => %s)
RETURNING id
"""


async def prune_workers(conn: psycopg.AsyncConnection[Any], schema: str, stale_after: float,
                        history: float = HISTORY) -> int:
    """Mark workers silent for ``stale_after`` seconds killed; delete history past its window."""
    await conn.execute(render(MARK_KILLED_SQL, schema), (stale_after,))
    cur = await conn.execute(render(PRUNE_WORKERS_SQL, schema), (history,))
    return len(await cur.fetchall())


class WorkerPruner(Chore):
    name = "prune-workers"

    def every(self) -> float:
        return 60.0

    async def once(self) -> None:
        await self.db.run(lambda c: prune_workers(c, self.config.schema, max(60.0, 3 * self.config.lease)))
