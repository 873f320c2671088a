"""Lease renewal and fenced interim writes (progress, partial results), one statement a batch."""

from __future__ import annotations

from typing import Any

import psycopg

from forklift._db.sqltext import RUNNING, render

# A row another transaction holds locked is skipped, not waited for: the settle statement locks
# the same rows in its plan's order, not id order, so waiting could deadlock with it (a
# second's stall of both, and a failed beat). A skipped row that is still ours in this
# statement's snapshot comes back with NULL (held, not renewed this time); the next beat
# renews it, long before the lease runs out.
HEARTBEAT_SQL = """
WITH h AS (SELECT * FROM unnest(%s::bigint[], %s::bigint[]) AS h(id, fence)),
free AS (
    SELECT t.id FROM {s}.jobs AS t JOIN h ON t.id = h.id AND t.fence = h.fence
    WHERE t.state = """ + RUNNING + """
    FOR UPDATE OF t SKIP LOCKED
), renewed AS (
    UPDATE {s}.jobs AS t SET lease_expires_at = now() + make_interval(secs => %s)
    WHERE t.id = ANY (ARRAY(SELECT id FROM free))  -- by primary key, not a join with h
    RETURNING t.fence, t.cancel_requested_at IS NOT NULL AS cancel
)
SELECT fence, cancel FROM renewed
UNION ALL
SELECT t.fence, NULL FROM {s}.jobs AS t JOIN h ON t.id = h.id AND t.fence = h.fence
WHERE t.state = """ + RUNNING + """ AND t.id NOT IN (SELECT id FROM free)
"""

# Buffered jobs whose handlers started (the claim stamped only those that started at once):
# from now on a lease expiry charges their attempt (forklift._worker.maintenance.rescuer).
# It never waits for a row lock: the settle statement locks the same rows in its plan's order,
# not id order, so waiting could deadlock with it (a second's stall each time). A row it skips
# is being settled (which stamps attempted_at itself) or written by an operator; the caller
# tries it again while the attempt runs.
START_SQL = """
WITH a AS (SELECT * FROM unnest(%s::bigint[], %s::bigint[], %s::float8[]) AS a(id, fence, ago)),
free AS (
    SELECT t.id, a.ago FROM {s}.jobs AS t JOIN a ON t.id = a.id AND t.fence = a.fence
    WHERE t.state = """ + RUNNING + """ AND t.attempted_at IS NULL
    FOR UPDATE OF t SKIP LOCKED
)
UPDATE {s}.jobs AS t SET attempted_at = now() - make_interval(secs => free.ago)
FROM free WHERE t.id = free.id
RETURNING t.fence
"""

PROGRESS_SQL = """
UPDATE {s}.jobs AS t SET progress = coalesce(p.progress, t.progress),
                         partial = coalesce(p.partial, t.partial)
FROM unnest(%s::bigint[], %s::bigint[], %s::jsonb[], %s::jsonb[]) AS p(id, fence, progress, partial)
WHERE t.id = p.id AND t.fence = p.fence AND t.state = """ + RUNNING + """
RETURNING t.fence
"""


async def renew(
    conn: psycopg.AsyncConnection[Any], schema: str, held: dict[int, int], lease: float
) -> dict[int, bool | None]:
    """Renew every held lease (fence -> job id). Returns fence -> cancel requested, for the
    leases still held; None for one held but not renewed this time (its row was locked by
    another transaction, most often this worker's own settle).

    A fence missing from the answer has lost its lease: rescued, cancelled, requeued, or
    settled by this worker since the caller looked.
    """
    if not held:
        return {}
    pairs = sorted((job_id, fence) for fence, job_id in held.items())
    cur = await conn.execute(
        render(HEARTBEAT_SQL, schema), ([p[0] for p in pairs], [p[1] for p in pairs], lease)
    )
    return {row[0]: None if row[1] is None else bool(row[1]) for row in await cur.fetchall()}


async def write_progress(
    conn: psycopg.AsyncConnection[Any],
    schema: str,
    updates: list[tuple[int, int, str | None, str | None]],
) -> set[int]:
    """Write (id, fence, progress json, partial json) rows; returns the fences still held."""
    if not updates:
        return set()
    rows = sorted(updates, key=lambda u: u[0])
    cur = await conn.execute(
        render(PROGRESS_SQL, schema),
        (
            [u[0] for u in rows],
            [u[1] for u in rows],
            [u[2] for u in rows],
            [u[3] for u in rows],
        ),
    )
    return {row[0] for row in await cur.fetchall()}


async def record_starts(
    conn: psycopg.AsyncConnection[Any], schema: str, starts: list[tuple[int, int, float]]
) -> set[int]:
    """Record (id, fence, seconds ago) starts of buffered jobs, one statement for all; returns
    the fences recorded (a row locked by another transaction is skipped, not waited for)."""
    if not starts:
        return set()
    rows = sorted(starts)
    cur = await conn.execute(render(START_SQL, schema), (
        [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows],
    ))
    return {row[0] for row in await cur.fetchall()}
