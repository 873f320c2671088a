"""The outbox for operators: messages by state and topic, per-topic totals, retry of dead ones.

Retry puts dead messages back to ``pending`` (attempts reset, last error kept) in one statement,
with its audit row in the same transaction; the relay then delivers them in their topic's order
(they keep their ids, so a retried message goes before anything published after it).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg

from forklift._base.names import check_name
from forklift._db.sqltext import render
from forklift._features.durable.errors import MessageNotFound
from forklift.ops import audit
from forklift.ops.context import OpsContext
from forklift.ops.errors import InvalidFilter
from forklift.ops.shape import Shape

__all__ = ["MAX_PAGE", "PREVIEW", "STATES", "OutboxMessage", "TopicInfo", "messages", "retry", "topics"]

STATES = ("pending", "delivered", "dead")
MAX_PAGE = 1000
PREVIEW = 200

LIST_SQL = f"""
SELECT id, topic, state, attempts, created_at, next_at, delivered_at, claimed_by,
       left(payload::text, {PREVIEW}), last_error ->> 'code', left(last_error ->> 'message', {PREVIEW}),
       job_id
FROM {{s}}.outbox
WHERE (%(state)s::text IS NULL OR state = %(state)s)
  AND (%(topic)s::text IS NULL OR topic = %(topic)s)
  AND (%(before)s::bigint IS NULL OR id < %(before)s)
ORDER BY id DESC LIMIT %(limit)s
"""
# Totals per topic from the live (pending) index, plus dead counts; delivered ones are counted
# over the retention window only through their index.
TOPICS_SQL = """
SELECT topic,
       count(*) FILTER (WHERE state = 'pending'),
       count(*) FILTER (WHERE state = 'dead'),
       min(created_at) FILTER (WHERE state = 'pending'),
       max(attempts) FILTER (WHERE state = 'pending')
FROM {s}.outbox WHERE state IN ('pending', 'dead')
GROUP BY topic ORDER BY topic
"""
RETRY_SQL = """
UPDATE {s}.outbox SET state = 'pending', attempts = 0, next_at = now(),
    claimed_by = NULL, claimed_until = NULL
WHERE state = 'dead' AND (id = ANY(%(ids)s::bigint[]) OR topic = %(topic)s)
RETURNING id
"""


@dataclass(frozen=True)
class OutboxMessage(Shape):
    id: int
    topic: str
    state: str
    attempts: int
    created_at: datetime
    next_at: datetime
    delivered_at: datetime | None
    claimed_by: str | None
    payload_preview: str
    last_error_code: str | None
    last_error_message: str | None
    job_id: int | None


@dataclass(frozen=True)
class TopicInfo(Shape):
    topic: str
    pending: int
    dead: int
    oldest_pending: datetime | None
    #: attempts of the most-tried pending message (above 0: the head is failing)
    max_attempts: int | None


def messages(
    conn: psycopg.Connection[Any], ctx: OpsContext, *, state: str | None = None,
    topic: str | None = None, limit: int = 50, before_id: int | None = None,
) -> list[OutboxMessage]:
    """Newest first; page with ``before_id`` = the last id you saw."""
    if state is not None and state not in STATES:
        raise InvalidFilter(f"state must be one of {', '.join(STATES)}, not {state!r}",
                            field="state")
    if not 1 <= limit <= MAX_PAGE:
        raise InvalidFilter(f"limit must be between 1 and {MAX_PAGE}", field="limit")
    params = {"state": state, "topic": check_name(topic, "topic") if topic is not None else None,
              "before": before_id, "limit": limit}
    rows = conn.execute(render(LIST_SQL, ctx.schema), params).fetchall()
    return [OutboxMessage(*r) for r in rows]


def topics(conn: psycopg.Connection[Any], ctx: OpsContext) -> list[TopicInfo]:
    rows = conn.execute(render(TOPICS_SQL, ctx.schema)).fetchall()
    return [TopicInfo(*r) for r in rows]


def retry(
    conn: psycopg.Connection[Any], ctx: OpsContext, *, ids: list[int] | None = None,
    topic: str | None = None, reason: str | None = None,
) -> list[int]:
    """Send dead messages again (by id, or every dead one of a topic); returns their ids.

    An id that names no dead message refuses the whole call (``message_not_found``)."""
    ctx.require_write("outbox retry")
    wanted = sorted(set(ids or []))
    topic = check_name(topic, "topic") if topic is not None else None
    if not wanted and not topic:
        raise InvalidFilter("name message ids or a topic to retry", field="ids")
    with conn.transaction():
        rows = conn.execute(render(RETRY_SQL, ctx.schema),
                            {"ids": wanted, "topic": topic}
                            ).fetchall()
        done = sorted(int(r[0]) for r in rows)
        missing = sorted(set(wanted) - set(done))
        if missing:
            raise MessageNotFound(
                f"no dead outbox message with id {missing[0]}: see `forklift outbox list"
                " --state dead`", ids=missing)
        audit.record(conn, ctx, "outbox.retry", {"ids": done, "topic": topic}, count=len(done),
                     reason=audit.clean_reason(reason))
    return done
