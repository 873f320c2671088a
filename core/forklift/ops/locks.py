"""Locks with fencing tokens (forklift._features.flow.locks), as an operator sees them.

A row stays in the table until its holder releases it or the next holder takes it over, so a
lock whose holder died shows as expired (``live`` false): it is free, and the next request
takes it under a new token.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg

from forklift._db.sqltext import render
from forklift.ops.context import OpsContext
from forklift.ops.errors import InvalidFilter
from forklift.ops.filters import check_text
from forklift.ops.shape import Shape

__all__ = ["MAX_LIST", "LockInfo", "list_locks"]

MAX_LIST = 1000

LIST_SQL = """
SELECT key, token, owner, job_id, worker_id, ttl, acquired_at, expires_at,
       extract(epoch FROM expires_at - now())::float8, expires_at > now(),
       extract(epoch FROM now() - acquired_at)::float8
FROM {s}.locks
WHERE (%(prefix)s::text IS NULL OR starts_with(key, %(prefix)s))
ORDER BY key
LIMIT %(limit)s
"""


@dataclass(frozen=True)
class LockInfo(Shape):
    key: str
    token: int
    #: The holding process: a worker id, or an app process (host:pid:tag) outside jobs.
    owner: str
    job_id: int | None
    worker_id: str | None
    ttl_seconds: float
    acquired_at: datetime
    expires_at: datetime
    #: Seconds until it expires unless renewed; negative once expired.
    expires_in_seconds: float
    #: False once expired: the lock is free, whatever the row says.
    live: bool
    held_seconds: float


def list_locks(
    conn: psycopg.Connection[Any], ctx: OpsContext, *, prefix: str | None = None,
    limit: int = 500,
) -> list[LockInfo]:
    """Locks in key order (those whose key starts with ``prefix``), at most ``limit``."""
    if not 1 <= limit <= MAX_LIST:
        raise InvalidFilter(f"limit is 1 to {MAX_LIST}, not {limit}", field="limit")
    params = {"prefix": check_text(prefix, "prefix") if prefix else None, "limit": limit}
    rows = conn.execute(render(LIST_SQL, ctx.schema), params).fetchall()
    return [LockInfo(*r) for r in rows]
