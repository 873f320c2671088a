"""Workflow retention: expired events, and outbox messages delivered (or dead) long ago.

Short keyset batches, like the jobs' retention, so no delete holds many locks for long.
"""

from __future__ import annotations

from typing import Any

import psycopg

from forklift._sqltext import render
from forklift._worker.maintenance.chore import Chore

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

    def every(self) -> float:
        return 60.0

    async def once(self) -> None:
        await self.db.run(lambda c: purge(c, self.w.schema))
