"""Events: ``app.publish_event(name, data, conn=...)``, stored in the publisher's transaction.

An event row carries the transaction that published it (``xact``), so a wait can tell an event
committed after it began from one it could already see (see :mod:`forklift._features.durable.waits`).
With ``conn=`` the insert runs inside the caller's transaction: the event exists, and wakes the
waits it matches, exactly when that transaction commits (the wake-up is a deferred trigger,
``functions/workflows_v1.sql`` and ``_v2.sql``); a rolled-back publish matches nothing. Events expire (``ttl``,
the database's clock) and the leader's ``workflow-retention`` chore deletes them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from forklift._base.errors import InvalidOption
from forklift._base.names import check_name
from forklift._db.sqltext import render
from forklift._db.steps import Query, Steps
from forklift._jobs.payload import to_json_text

if TYPE_CHECKING:
    from forklift._features.host import Host

DEFAULT_TTL = timedelta(days=1)
MAX_TTL = timedelta(days=3650)

PUBLISH_SQL = (
    "INSERT INTO {s}.events (name, data, expires_at)"
    " VALUES (%s, %s::jsonb, now() + make_interval(secs => %s))"
    " RETURNING id, name, data, published_at, expires_at"
)


@dataclass(frozen=True)
class Event:
    id: int
    name: str
    data: Any
    published_at: datetime
    expires_at: datetime


def prepare(app: Host, name: object, data: Any, ttl: timedelta | float) -> tuple[Any, ...]:
    """Checked parameters of :data:`PUBLISH_SQL`; raises a typed refusal, stores nothing."""
    return check(name, data, ttl, app.payload_limit)


def check(name: object, data: Any, ttl: timedelta | float, limit: int) -> tuple[Any, ...]:
    checked = check_name(name, "event", field="event name")
    seconds = ttl.total_seconds() if isinstance(ttl, timedelta) else float(ttl)
    if not 0 < seconds <= MAX_TTL.total_seconds():
        raise InvalidOption(f"ttl must be positive and at most {MAX_TTL.days} days", field="ttl")
    text = to_json_text(data, what="event data", kind=checked, limit=limit)
    return checked, text, seconds


def publish_steps(schema: str, params: tuple[Any, ...]) -> Steps[Event]:
    """Insert the event (one statement; sync and async drivers share it)."""
    row = yield Query(render(PUBLISH_SQL, schema), params, "one")
    assert row is not None
    return Event(*row)
