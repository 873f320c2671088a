"""Workers register themselves so operators can see them, their load and their drain."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from forklift._sqltext import render

REGISTER_SQL = """
INSERT INTO {s}.workers (id, host, pid, queues, slots, version)
VALUES (%s, %s, %s, %s, %s, %s)
ON CONFLICT (id) DO UPDATE SET heartbeat_at = now()
"""
BEAT_SQL = (
    "UPDATE {s}.workers SET heartbeat_at = now(), in_use = %s, restarts = %s WHERE id = %s"
)
DRAIN_SQL = (
    "UPDATE {s}.workers SET state = 'draining', drain_deadline = now() + make_interval(secs => %s)"
    " WHERE id = %s"
)
DEREGISTER_SQL = "DELETE FROM {s}.workers WHERE id = %s"


async def register(
    conn: psycopg.AsyncConnection[Any],
    schema: str,
    *,
    worker_id: str,
    host: str,
    pid: int,
    queues: list[str],
    slots: int,
    version: str,
) -> None:
    await conn.execute(render(REGISTER_SQL, schema), (worker_id, host, pid, queues, slots, version))


async def beat(
    conn: psycopg.AsyncConnection[Any], schema: str, worker_id: str, in_use: int,
    restarts: dict[str, int],
) -> bool:
    """Refresh the worker's heartbeat and its services' restart counts; False when its row is
    gone (pruned as stale)."""
    cur = await conn.execute(render(BEAT_SQL, schema), (in_use, Jsonb(restarts), worker_id))
    return cur.rowcount == 1


async def draining(
    conn: psycopg.AsyncConnection[Any], schema: str, worker_id: str, seconds: float
) -> None:
    await conn.execute(render(DRAIN_SQL, schema), (seconds, worker_id))


async def deregister(conn: psycopg.AsyncConnection[Any], schema: str, worker_id: str) -> None:
    await conn.execute(render(DEREGISTER_SQL, schema), (worker_id,))
