"""Workers register themselves so operators can see them, their load and their drain.

A worker's row says which queues it serves and which kinds it has handlers for (with what the
rescuer needs of each: its backoff and its lease-expiry limit), and which schema versions it
works with (the one it was built for, the oldest it accepts): ``forklift migrate`` names the
live workers a pending migration would break. When the worker exits the row stays, ``exited``
with when and how, until the leader prunes it (see :mod:`forklift._worker.maintenance.workers`).
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from forklift._db.sqltext import render

REGISTER_SQL = """
INSERT INTO {s}.workers (id, host, pid, queues, slots, version, kinds, schema_built, schema_min)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)
ON CONFLICT (id) DO UPDATE SET heartbeat_at = now(), kinds = excluded.kinds, state = 'running',
                               exited_at = NULL, exit_reason = NULL,
                               schema_built = excluded.schema_built,
                               schema_min = excluded.schema_min
"""
# A row marked exited (the leader took the worker for dead) is not beaten back to life here:
# the worker registers again, so its row says running.
BEAT_SQL = (
    "UPDATE {s}.workers SET heartbeat_at = now(), in_use = %s, restarts = %s"
    " WHERE id = %s AND state <> 'exited'"
)
DRAIN_SQL = (
    "UPDATE {s}.workers SET state = 'draining', drain_deadline = now() + make_interval(secs => %s)"
    " WHERE id = %s"
)
EXIT_SQL = (
    "UPDATE {s}.workers SET state = 'exited', exited_at = now(), exit_reason = %s, in_use = 0"
    " WHERE id = %s"
)


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
    kinds: dict[str, dict[str, Any]] | None = None,
    schema_built: int,
    schema_min: int,
) -> None:
    """``schema_built``: the schema version the worker was built for; ``schema_min``: the
    oldest it can work with."""
    await conn.execute(render(REGISTER_SQL, schema),
                       (worker_id, host, pid, queues, slots, version, Jsonb(kinds or {}),
                        schema_built, schema_min))


async def beat(
    conn: psycopg.AsyncConnection[Any], schema: str, worker_id: str, in_use: int,
    restarts: dict[str, int],
) -> bool:
    """Refresh the worker's heartbeat and its services' restart counts; False when its row is
    gone or marked exited (pruned as stale)."""
    cur = await conn.execute(render(BEAT_SQL, schema), (in_use, Jsonb(restarts), worker_id))
    return cur.rowcount == 1


async def draining(
    conn: psycopg.AsyncConnection[Any], schema: str, worker_id: str, seconds: float
) -> None:
    await conn.execute(render(DRAIN_SQL, schema), (seconds, worker_id))


async def exited(
    conn: psycopg.AsyncConnection[Any], schema: str, worker_id: str, how: str
) -> None:
    """The worker is leaving: ``drained``, or ``lease_lost`` when some of its leases were lost."""
    await conn.execute(render(EXIT_SQL, schema), (how, worker_id))
