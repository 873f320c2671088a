"""The elected leader's chores: staging due jobs, rescuing expired leases, pruning.

Leadership is a row with an expiry, renewed by its holder; when the holder dies another worker
takes the row once it expires, so the role moves within one lease. Every chore is one guarded
statement, safe if two workers briefly both believe they lead.
"""

from __future__ import annotations

from typing import Any

import psycopg

from forklift import _batches as batches
from forklift._sqltext import render

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

# Due scheduled and retryable jobs become available; one NOTIFY per queue that gained work.
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

PRUNE_WORKERS_SQL = (
    "DELETE FROM {s}.workers WHERE heartbeat_at < now() - make_interval(secs => %s) RETURNING id"
)

# Retention: terminal rows past their window, in short keyset batches (never one huge delete).
# Targets of a batch whose TTL has not lapsed stay readable (forklift.batches).
RETENTION_SQL = """
WITH old AS (
    SELECT id FROM {s}.jobs j
    WHERE state = %s AND finished_at < now() - make_interval(secs => %s)
      AND (batch_id IS NULL OR NOT EXISTS (
          SELECT 1 FROM {s}.batches b WHERE b.id = j.batch_id AND b.expires_at > now()))
    ORDER BY finished_at LIMIT %s
    FOR UPDATE SKIP LOCKED
)
DELETE FROM {s}.jobs AS t USING old WHERE t.id = old.id AND t.state = %s
"""


async def elect(conn: psycopg.AsyncConnection[Any], schema: str, worker_id: str, ttl: float) -> bool:
    cur = await conn.execute(render(ELECT_SQL, schema), (worker_id, ttl))
    return await cur.fetchone() is not None


async def resign(conn: psycopg.AsyncConnection[Any], schema: str, worker_id: str) -> None:
    await conn.execute(render(RESIGN_SQL, schema), (worker_id,))


async def stage(conn: psycopg.AsyncConnection[Any], schema: str, limit: int = 5000) -> int:
    cur = await conn.execute(render(STAGE_SQL, schema), (limit,))
    return sum(int(r[1]) for r in await cur.fetchall())


async def rescue(conn: psycopg.AsyncConnection[Any], schema: str) -> list[tuple[int, str]]:
    """Rescue every expired lease in one guarded statement; (id, new state) of each."""
    # Empty parameters, not None: psycopg then turns the SQL's %% into the % format() needs.
    cur = await conn.execute(render(RESCUE_SQL, schema), ())
    return [(int(r[0]), str(r[1])) for r in await cur.fetchall()]


async def prune_workers(conn: psycopg.AsyncConnection[Any], schema: str, stale_after: float) -> int:
    cur = await conn.execute(render(PRUNE_WORKERS_SQL, schema), (stale_after,))
    return len(await cur.fetchall())


async def retention(
    conn: psycopg.AsyncConnection[Any],
    schema: str,
    windows: dict[str, float],
    batch: int = 1000,
    max_batches: int = 10,
) -> int:
    """Delete terminal jobs older than their state's window; bounded work per call."""
    deleted = 0
    for state, seconds in windows.items():
        for _ in range(max_batches):
            cur = await conn.execute(render(RETENTION_SQL, schema), (state, seconds, batch, state))
            deleted += cur.rowcount
            if cur.rowcount < batch:
                break
    await batches.prune_expired(conn, schema, batch)
    return deleted
