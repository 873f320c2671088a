"""Workers as they registered themselves: load, heartbeat, drain, leadership."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg

from forklift._db.sqltext import render
from forklift.ops.context import OpsContext
from forklift.ops.shape import Shape

__all__ = ["STALE_AFTER", "WorkerInfo", "list_workers"]

#: A worker whose heartbeat is older than this is shown stale and not counted as listening.
#: Workers beat every lease/3 (10 s by default); the leader marks a row exited (killed) after
#: 60 s or 3 leases without a heartbeat, and deletes exited rows a day after the exit.
STALE_AFTER = 60.0

_SELECT = """
SELECT w.id, w.host, w.pid, w.state, w.queues, w.slots, w.in_use, w.started_at, w.heartbeat_at,
       extract(epoch FROM now() - w.heartbeat_at)::float8 AS heartbeat_age,
       w.drain_deadline,
       CASE WHEN w.state = 'draining'
            THEN extract(epoch FROM w.drain_deadline - now())::float8 END AS drain_remaining,
       coalesce(l.worker_id = w.id, false) AS leader,
       w.version, w.restarts,
       coalesce(ARRAY(SELECT jsonb_object_keys(w.kinds) ORDER BY 1), '{}') AS kinds,
       w.exited_at, w.exit_reason
FROM {s}.workers w
LEFT JOIN {s}.leader l ON l.name = 'leader' AND l.expires_at > now()
"""
#: Workers that have not exited (what stats count).
LIST_SQL = _SELECT + "WHERE w.state <> 'exited'\nORDER BY w.host, w.pid, w.id\n"
#: Every worker row, exited ones (the recent history) last, newest exit first.
ALL_SQL = _SELECT + "ORDER BY w.state = 'exited', w.exited_at DESC, w.host, w.pid, w.id\n"


@dataclass(frozen=True)
class WorkerInfo(Shape):
    id: str
    host: str
    pid: int
    #: running, draining or exited (``exit_reason`` tells how: drained, lease_lost, killed)
    state: str
    queues: list[str]
    slots: int
    in_use: int
    started_at: datetime
    heartbeat_at: datetime
    heartbeat_age_seconds: float
    drain_deadline: datetime | None
    #: Seconds until the drain cutoff (negative once past it); None unless draining (an exited
    #: worker keeps its drain_deadline, but nothing counts down to it any more).
    drain_remaining_seconds: float | None
    leader: bool
    version: str | None
    #: Restarts of the worker's services after their loop died (service name -> count).
    restarts: dict[str, int]
    #: The kinds it has handlers for (the only ones it claims).
    kinds: list[str]
    #: When it exited, and how: drained, lease_lost (drained after losing some leases) or
    #: killed (its heartbeat stopped; the leader marked it). None while it runs.
    exited_at: datetime | None
    exit_reason: str | None
    #: No heartbeat for STALE_AFTER seconds: probably dead, its row not pruned yet.
    stale: bool
    #: Running or draining with a fresh heartbeat: it claims or finishes jobs now. A field, not
    #: a property, so the JSON shape carries it too.
    live: bool

    @classmethod
    def from_row(cls, row: tuple[Any, ...]) -> WorkerInfo:
        """A row of LIST_SQL or ALL_SQL."""
        stale = row[3] != "exited" and float(row[9]) > STALE_AFTER
        live = row[3] in ("running", "draining") and not stale
        names = [f for f in cls.__dataclass_fields__ if f not in ("stale", "live")]
        return cls(**dict(zip(names, row, strict=True)), stale=stale, live=live)


def list_workers(conn: psycopg.Connection[Any], ctx: OpsContext) -> list[WorkerInfo]:
    """Every worker, the recent history of exited ones included (``live`` tells them apart)."""
    rows = conn.execute(render(ALL_SQL, ctx.schema)).fetchall()
    return [WorkerInfo.from_row(r) for r in rows]
