"""The rescuer: jobs whose lease expired go back to the queue (or dead, or cancelled)."""

from __future__ import annotations

import logging
from typing import Any

import psycopg

from forklift._sqltext import render
from forklift._worker.maintenance.chore import Chore
from forklift._worker.maintenance.stager import stage

log = logging.getLogger("forklift.worker")

# Expired leases: the attempt counts; cancel beats rescue; exhausted attempts go dead.
RESCUE_SQL = """
WITH expired AS (
    SELECT id FROM {s}.jobs
    WHERE state = 'running' AND lease_expires_at < now()
    FOR UPDATE SKIP LOCKED
)
UPDATE {s}.jobs AS t SET
    state = CASE WHEN t.cancel_requested_at IS NOT NULL THEN 'cancelled'
                 WHEN t.attempt >= t.max_attempts THEN 'dead'
                 ELSE 'retryable' END,
    finished_at = CASE WHEN t.cancel_requested_at IS NOT NULL OR t.attempt >= t.max_attempts
                       THEN now() END,
    run_at = now(),
    lease_expires_at = NULL,
    errors = t.errors || jsonb_build_array(jsonb_build_object(
        'code', 'lease_expired',
        'type', 'LeaseExpired',
        'message', format('the lease of worker %%s expired at %%s without a heartbeat',
                          t.worker_id, t.lease_expires_at),
        'attempt', t.attempt,
        'worker', t.worker_id,
        'at', now()))
FROM expired
WHERE t.id = expired.id AND t.state = 'running' AND t.lease_expires_at < now()
RETURNING t.id, t.state
"""


async def rescue(conn: psycopg.AsyncConnection[Any], schema: str) -> list[tuple[int, str]]:
    """Rescue every expired lease in one guarded statement; (id, new state) of each."""
    # Empty parameters, not None: psycopg then turns the SQL's %% into the % format() needs.
    cur = await conn.execute(render(RESCUE_SQL, schema), ())
    return [(int(r[0]), str(r[1])) for r in await cur.fetchall()]


class Rescuer(Chore):
    name = "rescue"

    def every(self) -> float:
        return min(5.0, self.w.lease / 3)

    async def once(self) -> None:
        w = self.w
        rescued = await self.db.run(lambda c: rescue(c, w.schema))
        if not rescued:
            return
        w.stats.rescued += len(rescued)
        log.warning("rescued %d job(s) whose lease expired: %s", len(rescued),
                    ", ".join(f"{i}->{s}" for i, s in rescued[:20]))
        # Rescued jobs are due at once: make them available now rather than at the next stage.
        w.stats.staged += await self.db.run(lambda c: stage(c, w.schema))
