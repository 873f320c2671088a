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
from forklift._worker.util import bounded, why

if TYPE_CHECKING:
    from forklift._db.session import Session
    from forklift._worker.config import WorkerConfig
    from forklift._worker.state import WorkerState

log = logging.getLogger("forklift.worker")

# Won or not, the answer says when the current holder's row expires (the CTE's outer query
# reads the row as it was before this statement), so a standby tries again right then instead
# of up to a whole interval later: a dead leader's role moves within its lease.
ELECT_SQL = """
WITH won AS (
    INSERT INTO {s}.leader AS l (name, worker_id, expires_at)
    VALUES ('leader', %s, now() + make_interval(secs => %s))
    ON CONFLICT (name) DO UPDATE SET
        worker_id = excluded.worker_id,
        expires_at = excluded.expires_at,
        elected_at = CASE WHEN l.worker_id = excluded.worker_id THEN l.elected_at ELSE now() END
    WHERE l.worker_id = excluded.worker_id OR l.expires_at < now()
    RETURNING worker_id
)
SELECT EXISTS (SELECT 1 FROM won),
       (SELECT extract(epoch FROM expires_at - now())::float8 FROM {s}.leader
        WHERE name = 'leader')
"""

RESIGN_SQL = "DELETE FROM {s}.leader WHERE name = 'leader' AND worker_id = %s"


async def elect(conn: psycopg.AsyncConnection[Any], schema: str, worker_id: str, ttl: float
                ) -> tuple[bool, float | None]:
    """Take or renew the role: (won, seconds until the holder's row expires, None if none)."""
    cur = await conn.execute(render(ELECT_SQL, schema), (worker_id, ttl))
    row = await cur.fetchone()
    assert row is not None
    return bool(row[0]), None if row[1] is None else float(row[1])


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
        every = min(self.config.leader_interval, self.config.lease / 3)
        while not self._resigned:
            pause = every
            try:
                won, expires_in = await self.db.run(
                    lambda c: elect(c, self.config.schema, self.state.id, self.config.lease))
                self._set(won)
                if not won and expires_in is not None:
                    # Another worker leads: try again the moment its row expires, if sooner.
                    pause = min(every, max(0.01, expires_in + 0.01))
            except DB_ERRORS as exc:
                self._set(False)
                if not self.state.closing:
                    log.warning("leader election failed (%s)", why(exc))
            await asyncio.sleep(pause)

    async def resign(self, timeout: float) -> None:
        self._resigned = True  # a renewal after this would take the role back
        if self.state.is_leader:
            self._set(False)
            await bounded("resigning leadership", self.db,
                          lambda c: resign(c, self.config.schema, self.state.id), timeout)
