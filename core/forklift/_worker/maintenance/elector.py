"""Leadership: a row with an expiry, renewed by its holder on a session of its own.

When the holder dies another worker takes the row once it expires, so the role moves within one
lease. Renewed well inside its expiry (a third of a lease), so a live leader never loses the role
while it waits for a chore: the chores run elsewhere.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

import psycopg

from forklift._db.session import DB_ERRORS
from forklift._db.sqltext import render
from forklift._worker.util import why

if TYPE_CHECKING:
    from forklift._db.session import Session
    from forklift._worker.config import WorkerConfig
    from forklift._worker.state import WorkerState

log = logging.getLogger("forklift.worker")

ELECT_SQL = """
INSERT INTO {s}.leader AS l (name, worker_id, expires_at)
VALUES ('leader', %s, now() + make_interval(secs => %s))
ON CONFLICT (name) DO UPDATE SET
    worker_id = excluded.worker_id,
    expires_at = excluded.expires_at,
    elected_at = CASE WHEN l.worker_id = excluded.worker_id THEN l.elected_at ELSE now() END
WHERE l.worker_id = excluded.worker_id OR l.expires_at < now()
RETURNING worker_id
"""

RESIGN_SQL = "DELETE FROM {s}.leader WHERE name = 'leader' AND worker_id = %s"


async def elect(conn: psycopg.AsyncConnection[Any], schema: str, worker_id: str, ttl: float) -> bool:
    cur = await conn.execute(render(ELECT_SQL, schema), (worker_id, ttl))
    return await cur.fetchone() is not None


async def resign(conn: psycopg.AsyncConnection[Any], schema: str, worker_id: str) -> None:
    await conn.execute(render(RESIGN_SQL, schema), (worker_id,))


class Elector:
    name = "elector"

    def __init__(self, config: WorkerConfig, state: WorkerState, *, db: Session) -> None:
        self.config = config
        self.state = state
        self.db = db
        #: Set while this worker leads: the chores wait on it.
        self.leading = asyncio.Event()
        self._resigned = False

    def _set(self, leader: bool) -> None:
        if leader != self.state.is_leader:
            log.info("worker %s %s the leader", self.state.id, "is now" if leader else "is no longer")
        self.state.is_leader = leader
        if leader:
            self.leading.set()
        else:
            self.leading.clear()

    async def run(self) -> None:
        while not self._resigned:
            try:
                self._set(await self.db.run(lambda c: elect(c, self.config.schema, self.state.id, self.config.lease)))
            except DB_ERRORS as exc:
                self._set(False)
                if not self.state.closing:
                    log.warning("leader election failed (%s)", why(exc))
            await asyncio.sleep(min(self.config.leader_interval, self.config.lease / 3))

    async def resign(self, timeout: float) -> None:
        from forklift._worker.drain import bounded

        self._resigned = True  # a renewal after this would take the role back
        if self.state.is_leader:
            self._set(False)
            await bounded("resigning leadership", self.db,
                          lambda c: resign(c, self.config.schema, self.state.id), timeout)
