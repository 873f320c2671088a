"""Lease renewal and fenced interim writes (progress, partial results), one statement a batch."""

from __future__ import annotations

from typing import Any

import psycopg

from forklift.sqltext import render

HEARTBEAT_SQL = """
UPDATE {s}.jobs AS t SET lease_expires_at = now() + make_interval(secs => %s)
FROM unnest(%s::bigint[], %s::bigint[]) AS h(id, fence)
WHERE t.id = h.id AND t.fence = h.fence AND t.state = 'running'
RETURNING t.id, t.cancel_requested_at IS NOT NULL
"""

PROGRESS_SQL = """
UPDATE {s}.jobs AS t SET progress = coalesce(p.progress, t.progress),
                         partial = coalesce(p.partial, t.partial)
FROM unnest(%s::bigint[], %s::bigint[], %s::jsonb[], %s::jsonb[]) AS p(id, fence, progress, partial)
WHERE t.id = p.id AND t.fence = p.fence AND t.state = 'running'
RETURNING t.id
"""


async def renew(
    conn: psycopg.AsyncConnection[Any], schema: str, held: dict[int, int], lease: float
) -> dict[int, bool]:
    """Renew every held lease (id -> fence). Returns id -> cancel requested, for those still held.

    An id missing from the answer has lost its lease: rescued, cancelled or requeued.
    """
    if not held:
        return {}
    ids = list(held)
    cur = await conn.execute(
        render(HEARTBEAT_SQL, schema), (lease, ids, [held[i] for i in ids])
    )
    return {row[0]: bool(row[1]) for row in await cur.fetchall()}


async def write_progress(
    conn: psycopg.AsyncConnection[Any],
    schema: str,
    updates: list[tuple[int, int, str | None, str | None]],
) -> set[int]:
    """Write (id, fence, progress json, partial json) rows; returns the ids still held."""
    if not updates:
        return set()
    cur = await conn.execute(
        render(PROGRESS_SQL, schema),
        (
            [u[0] for u in updates],
            [u[1] for u in updates],
            [u[2] for u in updates],
            [u[3] for u in updates],
        ),
    )
    return {row[0] for row in await cur.fetchall()}
