"""The claim: up to N jobs in one statement, in priority, run_at, id order.

The queue's pause and concurrency limit are read by the claim itself, so a pause holds from the
very next claim. Queues with a limit are serialised by a transaction-scoped advisory lock taken
in the same pipelined transaction, so two workers cannot both see room for the last slot.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg

from forklift.sqltext import render

LOCK_LIMITED_SQL = (
    "SELECT pg_advisory_xact_lock(hashtextextended('forklift.queue:' || name, 0))"
    " FROM {s}.queues WHERE name = ANY(%s::text[]) AND concurrency IS NOT NULL ORDER BY name"
)

CLAIM_SQL = """
WITH q AS (
    SELECT w.name,
           CASE WHEN qs.concurrency IS NULL THEN %(n)s
                ELSE greatest(0, least(%(n)s, qs.concurrency - (
                    SELECT count(*) FROM {s}.jobs r WHERE r.state = 'running' AND r.queue = w.name)))
           END AS room
    FROM unnest(%(queues)s::text[]) AS w(name)
    LEFT JOIN {s}.queues qs ON qs.name = w.name
    WHERE qs.name IS NULL OR NOT qs.paused
       OR (qs.pause_expires_at IS NOT NULL AND qs.pause_expires_at <= now())
), c AS (
    SELECT j.id FROM q CROSS JOIN LATERAL (
        SELECT id, priority, run_at FROM {s}.jobs
        WHERE state = 'available' AND queue = q.name
        ORDER BY priority, run_at, id
        LIMIT q.room
        FOR UPDATE SKIP LOCKED
    ) j
    ORDER BY j.priority, j.run_at, j.id
    LIMIT %(n)s
)
UPDATE {s}.jobs AS t
SET state = 'running', attempt = t.attempt + 1, attempted_at = now(), worker_id = %(w)s,
    fence = nextval('{s}.fence_seq'), lease_expires_at = now() + make_interval(secs => %(lease)s),
    cancel_requested_at = NULL
FROM c WHERE t.id = c.id
RETURNING t.id, t.queue, t.kind, t.args, t.attempt, t.max_attempts, t.fence, t.retry, t.meta,
          t.batch_id, t.priority
"""


@dataclass(frozen=True)
class Claimed:
    id: int
    queue: str
    kind: str
    args: Any
    attempt: int
    max_attempts: int
    fence: int
    retry: dict[str, Any] | None
    meta: dict[str, Any]
    batch_id: int | None
    priority: int


async def claim(
    conn: psycopg.AsyncConnection[Any],
    schema: str,
    *,
    worker_id: str,
    queues: list[str],
    n: int,
    lease: float,
) -> list[Claimed]:
    params = {"n": n, "queues": queues, "w": worker_id, "lease": lease}
    # One round trip: BEGIN, the limit locks, the claim and COMMIT travel together.
    async with conn.pipeline(), conn.transaction():
        await conn.execute(render(LOCK_LIMITED_SQL, schema), (queues,))
        cur = await conn.execute(render(CLAIM_SQL, schema), params)
    rows = await cur.fetchall()
    return [Claimed(*r) for r in rows]
