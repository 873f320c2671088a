"""The audit trail: one row per action, written in the same transaction as the action.

The table is append-only: the API has no update or delete, and migration 0002 adds a trigger
that refuses both.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg

from forklift._base.scrub import scrub
from forklift._db.sqltext import render
from forklift.ops.context import OpsContext
from forklift.ops.filters import check_text, moment
from forklift.ops.shape import Shape

__all__ = [
    "OUTCOME_DONE",
    "OUTCOME_REFUSED",
    "AuditEntry",
    "clean_reason",
    "entries",
    "record",
    "record_refusal",
]

INSERT_SQL = """
INSERT INTO {s}.audit (actor, action, target, count, reason, outcome)
VALUES (%s, %s, %s::jsonb, %s, %s, %s)
"""

LIST_SQL = """
SELECT id, at, actor, action, target, count, reason, outcome FROM {s}.audit
WHERE (%(actor)s::text IS NULL OR actor = %(actor)s)
  AND (%(action)s::text IS NULL OR action = %(action)s)
  AND (%(since)s::timestamptz IS NULL OR at >= %(since)s)
  AND (%(before_id)s::bigint IS NULL OR id < %(before_id)s)
ORDER BY id DESC
LIMIT %(limit)s
"""

OUTCOME_DONE = "done"
OUTCOME_REFUSED = "refused"


@dataclass(frozen=True)
class AuditEntry(Shape):
    id: int
    at: datetime
    actor: str
    action: str
    target: dict[str, Any]
    count: int
    reason: str | None
    outcome: str


def record(
    conn: psycopg.Connection[Any],
    ctx: OpsContext,
    action: str,
    target: dict[str, Any],
    *,
    count: int = 0,
    reason: str | None = None,
    outcome: str = OUTCOME_DONE,
) -> None:
    """Append one audit row on ``conn``; call it inside the action's transaction."""
    conn.execute(
        render(INSERT_SQL, ctx.schema),
        (
            ctx.actor,
            action,
            json.dumps(target, default=str),
            count,
            scrub(reason) if reason else None,
            outcome,
        ),
    )


def record_refusal(
    conn: psycopg.Connection[Any],
    ctx: OpsContext,
    action: str,
    target: dict[str, Any],
    code: str,
    reason: str | None,
) -> None:
    """A refused action leaves a trace too (its own transaction: the action's rolled back)."""
    if ctx.read_only or conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
        return
    try:
        with conn.transaction():
            record(conn, ctx, action, target, reason=reason, outcome=f"{OUTCOME_REFUSED}: {code}")
    except psycopg.Error:
        pass  # the refusal itself is what the caller needs to see


def clean_reason(reason: str | None) -> str | None:
    if reason is None or not reason.strip():
        return None
    return check_text(reason, "reason").strip()


def entries(
    conn: psycopg.Connection[Any],
    ctx: OpsContext,
    *,
    limit: int = 50,
    actor: str | None = None,
    action: str | None = None,
    since: str | datetime | None = None,
    before_id: int | None = None,
) -> list[AuditEntry]:
    """The newest entries first; page with ``before_id`` = the last id you saw."""
    params = {
        "actor": check_text(actor, "actor") if actor else None,
        "action": check_text(action, "action") if action else None,
        "since": moment(since, "since") if since is not None else None,
        "before_id": before_id,
        "limit": max(1, min(int(limit), 1000)),
    }
    rows = conn.execute(render(LIST_SQL, ctx.schema), params).fetchall()
    return [AuditEntry(*r) for r in rows]
