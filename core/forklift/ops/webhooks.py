"""Outbound webhook endpoints for operators: their health, their attempts, enable and disable.

An endpoint's health is what its deliveries recorded (:mod:`forklift.webhooks.health`): the
last status, the failure streak, and when it is disabled, why and by whom. Disabling holds the
endpoint's later deliveries (they wait, live, and are never lost); enabling wakes every held
one at once, in one statement with its audit row.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg

from forklift._base.names import check_name
from forklift._db.sqltext import render
from forklift.ops import audit
from forklift.ops.context import OpsContext
from forklift.ops.errors import InvalidFilter
from forklift.ops.shape import Shape
from forklift.webhooks.endpoint import KIND_PREFIX
from forklift.webhooks.errors import EndpointNotFound

__all__ = ["MAX_PAGE", "Attempt", "EndpointChange", "EndpointInfo", "attempts", "disable",
           "enable", "endpoints"]

MAX_PAGE = 1000
LIVE = "('scheduled', 'available', 'running', 'retryable')"

_COLUMNS = f"""
e.name, e.url, e.enabled, e.disabled_reason, e.disabled_at, e.disabled_by, e.last_status,
e.last_size, e.last_error, e.last_at, e.last_ok_at, e.failure_streak, e.delivered, e.failed,
(SELECT count(*) FROM {{s}}.jobs j WHERE j.kind = '{KIND_PREFIX}' || e.name AND j.state IN {LIVE}),
'{KIND_PREFIX}' || e.name
"""
LIST_SQL = f"SELECT {_COLUMNS} FROM {{s}}.webhook_endpoints e ORDER BY e.name"
ONE_SQL = f"SELECT {_COLUMNS} FROM {{s}}.webhook_endpoints e WHERE e.name = %s"
ENABLE_SQL = f"""
WITH endpoint AS (
    UPDATE {{s}}.webhook_endpoints SET enabled = true, disabled_reason = NULL,
        disabled_at = NULL, disabled_by = NULL, failure_streak = 0
    WHERE name = %(name)s RETURNING name
)
UPDATE {{s}}.jobs SET run_at = now()
WHERE kind = '{KIND_PREFIX}' || %(name)s AND state = 'scheduled' AND run_at > now()
  AND EXISTS (SELECT 1 FROM endpoint)
RETURNING id
"""
EXISTS_SQL = "SELECT 1 FROM {s}.webhook_endpoints WHERE name = %s"
DISABLE_SQL = """
INSERT INTO {s}.webhook_endpoints AS e (name, enabled, disabled_reason, disabled_at, disabled_by)
VALUES (%(name)s, false, %(reason)s, now(), %(actor)s)
ON CONFLICT (name) DO UPDATE SET enabled = false, disabled_reason = EXCLUDED.disabled_reason,
    disabled_at = now(), disabled_by = EXCLUDED.disabled_by
"""
ATTEMPTS_SQL = """
SELECT id, endpoint, event_id, event_type, job_id, attempt, at, status, size, outcome, error,
       duration_ms
FROM {s}.webhook_attempts
WHERE (%(endpoint)s::text IS NULL OR endpoint = %(endpoint)s)
  AND (%(before)s::bigint IS NULL OR id < %(before)s)
ORDER BY id DESC LIMIT %(limit)s
"""


@dataclass(frozen=True)
class EndpointInfo(Shape):
    name: str
    url: str | None
    enabled: bool
    disabled_reason: str | None
    disabled_at: datetime | None
    disabled_by: str | None
    last_status: int | None
    last_size: int | None
    last_error: str | None
    last_at: datetime | None
    last_ok_at: datetime | None
    #: attempts in a row that did not deliver (0 after a delivery)
    failure_streak: int
    delivered: int
    failed: int
    #: deliveries still owed: waiting, held while disabled, retrying or running
    pending: int
    #: the job kind that delivers to it
    kind: str


@dataclass(frozen=True)
class EndpointChange(Shape):
    endpoint: EndpointInfo
    #: held deliveries woken by an enable (0 for a disable)
    released: int


@dataclass(frozen=True)
class Attempt(Shape):
    id: int
    endpoint: str
    event_id: str
    event_type: str
    job_id: int
    attempt: int
    at: datetime
    #: None when nothing answered (a timeout, a refused connection)
    status: int | None
    #: bytes of the answer's body, counted and never stored
    size: int | None
    outcome: str
    error: str | None
    duration_ms: int | None


def _name(name: object) -> str:
    return check_name(name, "kind", field="endpoint")


def _one(conn: psycopg.Connection[Any], ctx: OpsContext, name: str) -> EndpointInfo:
    row = conn.execute(render(ONE_SQL, ctx.schema), (name,)).fetchone()
    if row is None:
        raise EndpointNotFound(f"no webhook endpoint named {name!r}: see `forklift webhooks"
                               " endpoints`", endpoint=name)
    return EndpointInfo(*row)


def endpoints(conn: psycopg.Connection[Any], ctx: OpsContext) -> list[EndpointInfo]:
    """Every endpoint that has delivered or been disabled, by name."""
    return [EndpointInfo(*r) for r in conn.execute(render(LIST_SQL, ctx.schema)).fetchall()]


def enable(conn: psycopg.Connection[Any], ctx: OpsContext, name: str, *,
           reason: str | None = None) -> EndpointChange:
    """Enable an endpoint and wake its held deliveries now (audited)."""
    ctx.require_write("webhooks enable")
    name = _name(name)
    with conn.transaction():
        if conn.execute(render(EXISTS_SQL, ctx.schema), (name,)).fetchone() is None:
            _one(conn, ctx, name)  # raises EndpointNotFound
        released = len(conn.execute(render(ENABLE_SQL, ctx.schema), {"name": name}).fetchall())
        audit.record(conn, ctx, "webhooks.enable", {"endpoint": name}, count=released,
                     reason=audit.clean_reason(reason))
        return EndpointChange(_one(conn, ctx, name), released)


def disable(conn: psycopg.Connection[Any], ctx: OpsContext, name: str, *,
            reason: str | None = None) -> EndpointChange:
    """Disable an endpoint (one not seen yet too): its deliveries are held until enabled."""
    ctx.require_write("webhooks disable")
    name = _name(name)
    why = audit.clean_reason(reason)
    with conn.transaction():
        conn.execute(render(DISABLE_SQL, ctx.schema), {
            "name": name, "reason": why or f"disabled by {ctx.actor}", "actor": ctx.actor})
        audit.record(conn, ctx, "webhooks.disable", {"endpoint": name}, count=1, reason=why)
        return EndpointChange(_one(conn, ctx, name), 0)


def attempts(conn: psycopg.Connection[Any], ctx: OpsContext, *, endpoint: str | None = None,
             limit: int = 50, before_id: int | None = None) -> list[Attempt]:
    """Delivery attempts, newest first; page with ``before_id`` = the last id you saw."""
    if not 1 <= limit <= MAX_PAGE:
        raise InvalidFilter(f"limit must be between 1 and {MAX_PAGE}", field="limit")
    params = {"endpoint": _name(endpoint) if endpoint is not None else None,
              "before": before_id, "limit": limit}
    rows = conn.execute(render(ATTEMPTS_SQL, ctx.schema), params).fetchall()
    return [Attempt(*r) for r in rows]
