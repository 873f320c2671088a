"""Events for operators: the newest events (by name), the jobs parked waiting for them, and a
publish by hand (audited), e.g. to wake a wait whose publisher failed."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg

from forklift._base.names import check_name
from forklift._db.sqltext import render
from forklift._db.steps import drive
from forklift._features.durable import events as _events
from forklift.ops import audit
from forklift.ops.context import OpsContext
from forklift.ops.errors import InvalidFilter
from forklift.ops.shape import Shape

__all__ = ["MAX_PAGE", "PREVIEW", "EventInfo", "WaitInfo", "list_events", "publish", "waits"]

MAX_PAGE = 1000
PREVIEW = 200

LIST_SQL = f"""
SELECT id, name, left(data::text, {PREVIEW}), published_at, expires_at,
       (SELECT count(*) FROM {{s}}.job_steps w WHERE w.event_id = e.id)
FROM {{s}}.events e
WHERE (%(name)s::text IS NULL OR name = %(name)s)
  AND (%(before)s::bigint IS NULL OR id < %(before)s)
ORDER BY id DESC LIMIT %(limit)s
"""
WAITS_SQL = f"""
SELECT w.job_id, j.kind, j.queue, j.state, w.name, w.event, left(w.match::text, {PREVIEW}),
       w.started_at, w.wake_at
FROM {{s}}.job_steps w JOIN {{s}}.jobs j ON j.id = w.job_id
WHERE w.state = 'waiting' AND (%(name)s::text IS NULL OR w.event = %(name)s)
ORDER BY w.started_at, w.job_id LIMIT %(limit)s
"""


@dataclass(frozen=True)
class EventInfo(Shape):
    id: int
    name: str
    data_preview: str
    published_at: datetime
    expires_at: datetime
    #: waits this event ended
    woke: int


@dataclass(frozen=True)
class WaitInfo(Shape):
    job_id: int
    kind: str
    queue: str
    state: str
    step: str
    event: str
    match_preview: str | None
    since: datetime
    #: the wait's deadline (None: it waits for ever)
    deadline: datetime | None


def _page(limit: int) -> int:
    if not 1 <= limit <= MAX_PAGE:
        raise InvalidFilter(f"limit must be between 1 and {MAX_PAGE}", field="limit")
    return limit


def _name(name: str | None) -> str | None:
    return None if name is None else check_name(name, "event", field="name")


def list_events(
    conn: psycopg.Connection[Any], ctx: OpsContext, *, name: str | None = None, limit: int = 50,
    before_id: int | None = None,
) -> list[EventInfo]:
    params = {"name": _name(name), "before": before_id, "limit": _page(limit)}
    return [EventInfo(*r) for r in conn.execute(render(LIST_SQL, ctx.schema), params)]


def waits(
    conn: psycopg.Connection[Any], ctx: OpsContext, *, name: str | None = None, limit: int = 50,
) -> list[WaitInfo]:
    """Jobs parked waiting for an event (of ``name``), longest waiting first."""
    params = {"name": _name(name), "limit": _page(limit)}
    return [WaitInfo(*r) for r in conn.execute(render(WAITS_SQL, ctx.schema), params)]


def publish(
    conn: psycopg.Connection[Any], ctx: OpsContext, name: str, data: Any, *,
    payload_limit: int = 1024 * 1024, reason: str | None = None,
) -> EventInfo:
    """Publish an event as an operator (audited in the same transaction)."""
    ctx.require_write("events publish")
    params = _events.check(name, data, _events.DEFAULT_TTL, payload_limit)
    with conn.transaction():
        event = drive(conn, _events.publish_steps(ctx.schema, params))
        audit.record(conn, ctx, "events.publish", {"event": event.id, "name": event.name},
                     count=1, reason=audit.clean_reason(reason))
    return EventInfo(event.id, event.name, str(params[1])[:PREVIEW], event.published_at,
                     event.expires_at, 0)
