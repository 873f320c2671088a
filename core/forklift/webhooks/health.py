"""What a delivery reads and writes about its endpoint: the gate before it sends (enabled? an
earlier delivery still owed, for an ordered endpoint?) and the record after (one attempt row,
the endpoint's health, and, when the endpoint answered as gone, its disabling and the audit row,
in one statement so none of them exists without the others).

An endpoint's row is made by its first delivery; operators change it through
``forklift.ops.webhooks``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg

from forklift._db.sqltext import render

__all__ = ["ACTOR", "Gate", "Outcome", "gate", "record"]

#: Who the audit trail names when a delivery disables its endpoint.
ACTOR = "forklift:webhooks"

LIVE = "('scheduled', 'available', 'running', 'retryable')"

GATE_SQL = f"""
SELECT coalesce(e.enabled, true), e.disabled_reason,
       (SELECT j.run_at FROM {{s}}.jobs j
        WHERE %(ordered)s AND j.kind = %(kind)s AND j.id < %(id)s AND j.state IN {LIVE}
        ORDER BY j.id LIMIT 1)
FROM (VALUES (1)) AS one (x)
LEFT JOIN {{s}}.webhook_endpoints e ON e.name = %(name)s
"""

RECORD_SQL = """
WITH attempt AS (
    INSERT INTO {s}.webhook_attempts
        (endpoint, event_id, event_type, job_id, attempt, status, size, outcome, error, duration_ms)
    VALUES (%(name)s, %(event_id)s, %(event_type)s, %(job_id)s, %(attempt)s, %(status)s,
            %(size)s, %(outcome)s, %(error)s, %(duration_ms)s)
), audited AS (
    INSERT INTO {s}.audit (actor, action, target, count, reason, outcome)
    SELECT %(actor)s, 'webhooks.disable', jsonb_build_object('endpoint', %(name)s::text,
           'status', %(status)s::integer, 'event_id', %(event_id)s::text), 1, %(reason)s, 'done'
    WHERE %(disable)s
)
INSERT INTO {s}.webhook_endpoints AS e
    (name, url, enabled, disabled_reason, disabled_at, disabled_by, last_status, last_size,
     last_error, last_at, last_ok_at, failure_streak, delivered, failed)
VALUES (%(name)s, %(url)s, NOT %(disable)s, CASE WHEN %(disable)s THEN %(reason)s END,
        CASE WHEN %(disable)s THEN now() END, CASE WHEN %(disable)s THEN %(actor)s END,
        %(status)s, %(size)s, %(error)s, now(), CASE WHEN %(ok)s THEN now() END,
        CASE WHEN %(ok)s THEN 0 ELSE 1 END, %(ok)s::int, (NOT %(ok)s)::int)
ON CONFLICT (name) DO UPDATE SET
    url = EXCLUDED.url,
    enabled = e.enabled AND NOT %(disable)s,
    disabled_reason = CASE WHEN %(disable)s THEN EXCLUDED.disabled_reason ELSE e.disabled_reason END,
    disabled_at = CASE WHEN %(disable)s THEN now() ELSE e.disabled_at END,
    disabled_by = CASE WHEN %(disable)s THEN EXCLUDED.disabled_by ELSE e.disabled_by END,
    last_status = EXCLUDED.last_status,
    last_size = EXCLUDED.last_size,
    last_error = EXCLUDED.last_error,
    last_at = now(),
    last_ok_at = coalesce(EXCLUDED.last_ok_at, e.last_ok_at),
    failure_streak = CASE WHEN %(ok)s THEN 0 ELSE e.failure_streak + 1 END,
    delivered = e.delivered + EXCLUDED.delivered,
    failed = e.failed + EXCLUDED.failed
"""


@dataclass(frozen=True)
class Gate:
    """What a delivery learns before it sends."""

    enabled: bool
    disabled_reason: str | None
    #: when the earliest delivery still owed before this one is due (ordered endpoints only)
    earlier_due: datetime | None


@dataclass(frozen=True)
class Outcome:
    """One attempt, as it is recorded: never the answer's body, only its status and size."""

    endpoint: str
    url: str
    event_id: str
    event_type: str
    job_id: int
    attempt: int
    status: int | None
    size: int | None
    outcome: str  # delivered | retry | rejected | gone | failed
    error: str | None
    duration_ms: int
    #: set when the answer disables the endpoint: the reason shown to operators
    disable_reason: str | None = None

    @property
    def ok(self) -> bool:
        return self.outcome == "delivered"


async def gate(conn: psycopg.AsyncConnection[Any], schema: str, *, name: str, kind: str,
               job_id: int, ordered: bool) -> Gate:
    cur = await conn.execute(render(GATE_SQL, schema), {
        "name": name, "kind": kind, "id": job_id, "ordered": ordered})
    row = await cur.fetchone()
    assert row is not None
    return Gate(bool(row[0]), row[1], row[2])


async def record(conn: psycopg.AsyncConnection[Any], schema: str, outcome: Outcome) -> None:
    await conn.execute(render(RECORD_SQL, schema), {
        "name": outcome.endpoint, "url": outcome.url, "event_id": outcome.event_id,
        "event_type": outcome.event_type, "job_id": outcome.job_id, "attempt": outcome.attempt,
        "status": outcome.status, "size": outcome.size, "outcome": outcome.outcome,
        "error": outcome.error, "duration_ms": outcome.duration_ms, "ok": outcome.ok,
        "disable": outcome.disable_reason is not None, "reason": outcome.disable_reason,
        "actor": ACTOR,
    })
