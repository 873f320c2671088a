"""Queues: list them, pause and resume them (a pause may expire by itself), limit concurrency.

The claim reads the pause inside its own statement, so a pause holds from the very next claim,
and it treats a pause whose expiry has passed as no pause: :attr:`QueueInfo.paused` says the
same thing (the row keeps ``paused_flag`` until someone resumes, for the record).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import psycopg

from forklift._base.names import check_name
from forklift._db.sqltext import channel, render
from forklift.ops import audit
from forklift.ops.context import OpsContext
from forklift.ops.errors import InvalidFilter, QueueNotFound
from forklift.ops.filters import check_text, duration, moment
from forklift.ops.shape import Shape

__all__ = ["COLUMNS", "QueueInfo", "get_queue", "list_queues", "pause", "resume", "set_concurrency"]

COLUMNS = (
    "name, (paused AND (pause_expires_at IS NULL OR pause_expires_at > now())) AS paused,"
    " paused AS paused_flag, paused_by, paused_at, pause_reason, pause_expires_at, concurrency,"
    " created_at, updated_at, fair, rate_limit, rate_per, rate_burst, priority_aging, aging_top,"
    " ceiling_depth, ceiling_age, full_by, measured_depth, measured_age, measured_at, weighted"
)
LIST_SQL = "SELECT " + COLUMNS + " FROM {s}.queues ORDER BY name"
GET_SQL = "SELECT " + COLUMNS + " FROM {s}.queues WHERE name = %s"
KNOWN_SQL = """
SELECT EXISTS (SELECT 1 FROM {s}.queues WHERE name = %(q)s)
    OR EXISTS (SELECT 1 FROM {s}.workers WHERE %(q)s = ANY(queues))
"""
PAUSE_SQL = """
INSERT INTO {s}.queues AS q (name, paused, paused_by, paused_at, pause_reason, pause_expires_at)
VALUES (%(q)s, true, %(by)s, now(), %(reason)s,
        coalesce(%(until)s::timestamptz, now() + make_interval(secs => %(secs)s::float8)))
ON CONFLICT (name) DO UPDATE SET
    paused = true, paused_by = excluded.paused_by, paused_at = excluded.paused_at,
    pause_reason = excluded.pause_reason, pause_expires_at = excluded.pause_expires_at,
    updated_at = now()
"""
RESUME_SQL = """
UPDATE {s}.queues SET paused = false, paused_by = NULL, paused_at = NULL, pause_reason = NULL,
    pause_expires_at = NULL, updated_at = now()
WHERE name = %s
RETURNING (paused_at IS NOT NULL)
"""
WAS_PAUSED_SQL = (
    "SELECT paused AND (pause_expires_at IS NULL OR pause_expires_at > now())"
    " FROM {s}.queues WHERE name = %s FOR UPDATE"
)
LIMIT_SQL = """
INSERT INTO {s}.queues AS q (name, concurrency) VALUES (%s, %s)
ON CONFLICT (name) DO UPDATE SET concurrency = excluded.concurrency, updated_at = now()
"""
WAKE_SQL = "SELECT pg_notify(%s, %s)"


@dataclass(frozen=True)
class QueueInfo(Shape):
    name: str
    #: In force now: set, and not past its expiry.
    paused: bool
    #: As stored; true with ``paused`` false means the pause expired and nobody resumed it.
    paused_flag: bool
    paused_by: str | None
    paused_at: datetime | None
    pause_reason: str | None
    pause_expires_at: datetime | None
    #: Most jobs of this queue running at once, over all workers; None for no limit.
    concurrency: int | None
    created_at: datetime
    updated_at: datetime
    #: Fair share: claims take turns across key values (forklift.ops.rates).
    fair: bool = False
    #: At most ``rate_limit`` starts per ``rate_per`` seconds (bucket of ``rate_burst``); None.
    rate_limit: int | None = None
    rate_per: float | None = None
    rate_burst: int | None = None
    #: Priority aging: every this many seconds a job waits raises its priority one step
    #: (forklift.ops.aging); None: off.
    priority_aging: float | None = None
    #: The highest priority aging raises a job to (the lowest number).
    aging_top: int = 0
    #: Backpressure (forklift.ops.ceiling): at most this many jobs waiting; None: no ceiling.
    ceiling_depth: int | None = None
    #: ... and/or the oldest waiting job's wait at most this many seconds; None: no ceiling.
    ceiling_age: float | None = None
    #: Which ceiling the queue is past as last measured (``depth``, ``age``); None: room.
    full_by: str | None = None
    #: The leader's last measurement: depth (counted up to the ceiling + 1), oldest wait, when.
    measured_depth: int | None = None
    measured_age: float | None = None
    measured_at: datetime | None = None
    #: Weighted: a job of it has weighed more than one slot (set for good by that job's
    #: enqueue): its jobs are claimed by the flow claim, only for slots free now, and a heavy
    #: job waiting for room reserves it (docs: how-to/flow-control.md#weighted-jobs).
    weighted: bool = False

    @property
    def full(self) -> bool:
        """Whether enqueues are refused, waited or shed now (past a ceiling)."""
        return self.full_by is not None

    @property
    def ceiling(self) -> str:
        """The ceiling in words: ``depth 1000, age 5m``, or ``none``."""
        parts = []
        if self.ceiling_depth is not None:
            parts.append(f"depth {self.ceiling_depth}")
        if self.ceiling_age is not None:
            parts.append(f"age {self.ceiling_age:g}s")
        return ", ".join(parts) or "none"


def list_queues(conn: psycopg.Connection[Any], ctx: OpsContext) -> list[QueueInfo]:
    return [QueueInfo(*r) for r in conn.execute(render(LIST_SQL, ctx.schema)).fetchall()]


def get_queue(conn: psycopg.Connection[Any], ctx: OpsContext, name: str) -> QueueInfo | None:
    row = conn.execute(render(GET_SQL, ctx.schema), (name,)).fetchone()
    return QueueInfo(*row) if row else None


def _check_name(name: str) -> str:
    # Never trimmed: " mail" is another queue than "mail" (both are shown escaped, apart).
    if not check_text(name, "queue").strip():
        raise InvalidFilter("a queue name is required", field="queue")
    return name


def _require_known(conn: psycopg.Connection[Any], ctx: OpsContext, name: str, create: bool) -> None:
    row = conn.execute(render(KNOWN_SQL, ctx.schema), {"q": name}).fetchone()
    if row and row[0]:
        return  # a queue that exists is acted on whatever its name holds (it is shown escaped)
    if create:
        check_name(name, "queue")  # a new queue is named as enqueue would name it
        return
    known = [q.name for q in list_queues(conn, ctx)]
    hint = f" (known: {', '.join(known[:20])})" if known else ""
    raise QueueNotFound(
        f"no queue named {name!r}{hint}: check the name, or pass --create to set it up before"
        " its first job",
        queue=name,
    )


def _act(
    conn: psycopg.Connection[Any],
    ctx: OpsContext,
    action: str,
    target: dict[str, Any],
    reason: str | None,
    body: Any,
) -> QueueInfo:
    """Run ``body(conn)`` and the audit row in one transaction; audit refusals too."""
    ctx.require_write(action)
    try:
        with conn.transaction():
            outcome = body(conn) or audit.OUTCOME_DONE
            audit.record(conn, ctx, action, target, count=1, reason=reason, outcome=outcome)
    except QueueNotFound as exc:
        audit.record_refusal(conn, ctx, action, target, exc.code, reason)
        raise
    info = get_queue(conn, ctx, target["queue"])
    assert info is not None
    return info


def pause(
    conn: psycopg.Connection[Any],
    ctx: OpsContext,
    name: str,
    *,
    reason: str | None = None,
    until: str | datetime | None = None,
    for_: str | float | timedelta | None = None,
    create: bool = False,
) -> QueueInfo:
    """Stop claims from this queue at every worker's next claim; running jobs go on.

    ``for_`` (a duration) or ``until`` (a time) makes the pause end by itself.
    """
    name, reason = _check_name(name), audit.clean_reason(reason)
    if until is not None and for_ is not None:
        raise InvalidFilter("give an expiry with --for or --until, not both", field="until")
    until_at = moment(until, "until") if until is not None else None
    secs = duration(for_, "for").total_seconds() if for_ is not None else None
    if secs is not None and secs <= 0:
        raise InvalidFilter(
            "--for must be longer than 0s (a pause that ended at once would pause nothing);"
            " leave it out to pause until someone resumes",
            field="for",
        )
    if until_at is not None and until_at <= datetime.now(until_at.tzinfo):
        raise InvalidFilter(f"--until {until_at.isoformat()} is in the past", field="until")
    target: dict[str, Any] = {"queue": name}
    if until_at is not None:
        target["until"] = until_at.isoformat()
    if secs is not None:
        target["for_seconds"] = secs

    def body(c: psycopg.Connection[Any]) -> None:
        _require_known(c, ctx, name, create)
        c.execute(
            render(PAUSE_SQL, ctx.schema),
            {"q": name, "by": ctx.actor, "reason": reason, "until": until_at, "secs": secs},
        )

    return _act(conn, ctx, "pause", target, reason, body)


def resume(
    conn: psycopg.Connection[Any], ctx: OpsContext, name: str, *, reason: str | None = None
) -> QueueInfo:
    """Lift a pause and wake the queue's workers; resuming a queue that is not paused is a no-op."""
    name, reason = _check_name(name), audit.clean_reason(reason)

    def body(c: psycopg.Connection[Any]) -> str | None:
        row = c.execute(render(WAS_PAUSED_SQL, ctx.schema), (name,)).fetchone()
        if row is None:
            _require_known(c, ctx, name, False)
            return "noop: not paused"
        c.execute(render(RESUME_SQL, ctx.schema), (name,))
        c.execute(WAKE_SQL, (channel(ctx.schema), name))
        return None if row[0] else "noop: not paused"

    return _act(conn, ctx, "resume", {"queue": name}, reason, body)


def set_concurrency(
    conn: psycopg.Connection[Any],
    ctx: OpsContext,
    name: str,
    limit: int | None,
    *,
    reason: str | None = None,
    create: bool = False,
) -> QueueInfo:
    """At most ``limit`` jobs of the queue run at once over all workers; None lifts the limit."""
    name, reason = _check_name(name), audit.clean_reason(reason)
    if limit is not None and not 0 <= limit <= 1_000_000:
        raise InvalidFilter("a concurrency limit is between 0 and 1,000,000", field="limit")

    def body(c: psycopg.Connection[Any]) -> None:
        _require_known(c, ctx, name, create)
        c.execute(render(LIMIT_SQL, ctx.schema), (name, limit))
        c.execute(WAKE_SQL, (channel(ctx.schema), name))

    return _act(conn, ctx, "limit", {"queue": name, "concurrency": limit}, reason, body)
