"""Workflow retention: expired events, outbox messages delivered (or dead) long ago, and the
steps and dependency rows of jobs that are gone (retention, a delete, partitioned history), and
the attempt logs of jobs that are gone (kept while a job's row is in partitioned history).

Short keyset batches, like the jobs' retention, so no delete holds many locks for long. The
step and dependency tables have no foreign key to jobs, so deleting jobs costs every job
nothing more than before; their orphans are found here instead, a slice of job ids a pass.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import psycopg

from forklift._db.sqltext import render
from forklift._worker.maintenance.chore import Chore
from forklift._worker.maintenance.history import enabled as history_enabled

if TYPE_CHECKING:
    from forklift._worker.config import WorkerConfig
    from forklift._worker.state import WorkerState

#: How long delivered and dead outbox messages are kept (seconds).
OUTBOX_KEEP = {"delivered": 7 * 86400.0, "dead": 30 * 86400.0}

PURGE_EVENTS_SQL = """
DELETE FROM {s}.events AS e USING (
    SELECT id FROM {s}.events WHERE expires_at < now() ORDER BY expires_at LIMIT %s
) old WHERE e.id = old.id
"""
PURGE_OUTBOX_SQL = """
DELETE FROM {s}.outbox AS o USING (
    SELECT id FROM {s}.outbox
    WHERE state = %(state)s AND coalesce(delivered_at, next_at) < now() - make_interval(secs => %(keep)s)
    ORDER BY id LIMIT %(n)s
) old WHERE o.id = old.id
"""


# The rows of one slice of job ids (after the cursor) whose job is gone; answers the slice's end.
ORPHANS_SQL = """
WITH k AS (
    SELECT DISTINCT job_id FROM {s}.{t} WHERE job_id > %(after)s ORDER BY job_id LIMIT %(n)s
), gone AS (
    DELETE FROM {s}.{t} AS x USING k
    WHERE x.job_id = k.job_id AND NOT EXISTS (SELECT 1 FROM {s}.jobs j WHERE j.id = k.job_id){h}
    RETURNING 1
)
SELECT max(k.job_id), (SELECT count(*) FROM gone) FROM k
"""
ORPHAN_TABLES = ("job_steps", "job_deps", "job_logs")
#: Tables whose rows stay while their job is in partitioned history (forklift.ops.job_logs).
KEPT_IN_HISTORY = ("job_logs",)
_IN_HISTORY = "\n      AND NOT EXISTS (SELECT 1 FROM {s}.jobs_history h WHERE h.id = k.job_id)"


async def orphans(conn: psycopg.AsyncConnection[Any], schema: str, cursors: dict[str, int],
                  batch: int = 1000) -> int:
    """One slice per table of rows whose job is gone; ``cursors`` (table -> last job id) move
    on and wrap around."""
    deleted = 0
    partitioned: bool | None = None
    for table in ORPHAN_TABLES:
        keep = ""
        if table in KEPT_IN_HISTORY:
            if partitioned is None:
                partitioned = await history_enabled(conn, schema)
            keep = _IN_HISTORY if partitioned else ""
        sql = ORPHANS_SQL.replace("{t}", table).replace("{h}", keep)
        cur = await conn.execute(render(sql, schema),
                                 {"after": cursors.get(table, 0), "n": batch})
        row = await cur.fetchone()
        cursors[table] = int(row[0]) if row and row[0] is not None else 0
        deleted += int(row[1]) if row else 0
    return deleted


async def purge(conn: psycopg.AsyncConnection[Any], schema: str, batch: int = 1000,
                max_batches: int = 10) -> int:
    """Delete expired events and old outbox messages; bounded work per call."""
    deleted = 0
    for _ in range(max_batches):
        cur = await conn.execute(render(PURGE_EVENTS_SQL, schema), (batch,))
        deleted += cur.rowcount
        if cur.rowcount < batch:
            break
    for state, keep in OUTBOX_KEEP.items():
        for _ in range(max_batches):
            cur = await conn.execute(render(PURGE_OUTBOX_SQL, schema),
                                     {"state": state, "keep": keep, "n": batch})
            deleted += cur.rowcount
            if cur.rowcount < batch:
                break
    return deleted


class WorkflowRetention(Chore):
    name = "workflow-retention"

    def __init__(self, config: WorkerConfig, state: WorkerState, *, leading: asyncio.Event
                 ) -> None:
        super().__init__(config, state, leading=leading)
        self.cursors: dict[str, int] = {}

    def every(self) -> float:
        return 60.0

    async def once(self) -> None:
        await self.db.run(lambda c: purge(c, self.config.schema))
        await self.db.run(lambda c: orphans(c, self.config.schema, self.cursors))
