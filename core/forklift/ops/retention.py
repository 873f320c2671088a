"""Retention windows you can see and set: per terminal state, for every queue or for one.

The leader prunes by these (:mod:`forklift._features.retention`); ``forklift retention show|set|reset``
and the console read and change them here. Every change is audited in its own transaction.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import psycopg

from forklift._base.names import check_name
from forklift._db.sqltext import render
from forklift._features import retention as r
from forklift.ops import audit
from forklift.ops.context import OpsContext
from forklift.ops.errors import InvalidFilter
from forklift.ops.filters import check_text, duration
from forklift.ops.settings import InvalidSetting
from forklift.ops.shape import Shape

__all__ = ["FOREVER", "Retention", "Window", "parse_window", "reset_window", "set_window", "show"]

FOREVER = ("forever", "never", "keep", "none")

ROWS_SQL = ("SELECT state, queue, seconds, updated_by, updated_at FROM {s}.retention"
            " ORDER BY state, queue")
SET_SQL = """
INSERT INTO {s}.retention AS t (state, queue, seconds, updated_by) VALUES (%s, %s, %s, %s)
ON CONFLICT (state, queue) DO UPDATE SET seconds = excluded.seconds,
    updated_by = excluded.updated_by, updated_at = now()
"""
RESET_SQL = "DELETE FROM {s}.retention WHERE state = %s AND queue = %s RETURNING 1"
KNOWN_QUEUE_SQL = """
SELECT EXISTS (SELECT 1 FROM {s}.queues WHERE name = %(q)s)
    OR EXISTS (SELECT 1 FROM {s}.workers WHERE %(q)s = ANY(queues))
    OR EXISTS (SELECT 1 FROM {s}.retention WHERE queue = %(q)s)
"""
CREATE_QUEUE_SQL = "INSERT INTO {s}.queues (name) VALUES (%s) ON CONFLICT DO NOTHING"


@dataclass(frozen=True)
class Window(Shape):
    state: str
    #: None: the window of every queue without one of its own.
    queue: str | None
    #: None keeps these jobs forever.
    seconds: float | None
    updated_by: str | None
    updated_at: datetime | None


@dataclass(frozen=True)
class Retention(Shape):
    #: state -> seconds (None: kept forever) for every queue without a window of its own.
    defaults: dict[str, float | None]
    #: Windows of single queues.
    queues: list[Window]
    windows: list[Window]

    def for_queue(self, queue: str) -> dict[str, float | None]:
        """The windows in force for ``queue``, state by state."""
        found = dict(self.defaults)
        for w in self.queues:
            if w.queue == queue:
                found[w.state] = w.seconds
        return found


def show(conn: psycopg.Connection[Any], ctx: OpsContext) -> Retention:
    rows = conn.execute(render(ROWS_SQL, ctx.schema)).fetchall()
    windows = [Window(s, q or None, sec, by, at) for s, q, sec, by, at in rows]
    stored = {w.state: w.seconds for w in windows if w.queue is None}
    defaults = {s: stored[s] if s in stored else r.DEFAULTS[s] for s in r.STATES}
    return Retention(defaults, [w for w in windows if w.queue is not None], windows)


def parse_window(value: str | float | timedelta | None) -> float | None:
    """Seconds, a duration (7d, 12h, 1h30m) or forever (None). Refusals name the value."""
    if value is None or (isinstance(value, str) and value.strip().lower() in FOREVER):
        return None
    if isinstance(value, timedelta):
        value = value.total_seconds()
    text = str(value).strip()
    if text.startswith("-"):
        raise InvalidSetting(f"retention {text!r} is negative: a window is 0 or more (or"
                             " 'forever')", value=text)
    try:
        seconds = duration(value if isinstance(value, float | int) else text,
                           "retention").total_seconds()
    except InvalidFilter as exc:
        if exc.message.endswith("ten years"):
            raise InvalidSetting(
                f"retention {text!r} is absurd: more than ten years; to keep those jobs"
                " forever say 'forever'", value=text) from None
        raise InvalidSetting(
            f"retention {text!r} is not a window: use e.g. 12h, 7d, 30d, or 'forever'",
            value=text) from None
    return seconds


def _check_state(state: str) -> str:
    if state not in r.STATES:
        raise InvalidSetting(
            f"{state!r} is not a state that retention prunes: use {', '.join(r.STATES)}",
            state=state)
    return state


def _check_queue(conn: psycopg.Connection[Any], ctx: OpsContext, queue: str,
                 create: bool) -> None:
    if not queue.strip():
        raise InvalidSetting("the queue name is empty; leave --queue out for every queue",
                             queue=queue)
    check_text(queue, "queue")
    row = conn.execute(render(KNOWN_QUEUE_SQL, ctx.schema), {"q": queue}).fetchone()
    if row and row[0]:
        return
    if not create:
        raise InvalidSetting(
            f"queue {queue!r} is not known here (no worker serves it and it has no settings);"
            " check the name, or pass --create to set it up", queue=queue)
    check_name(queue, "queue")  # a new queue is named as enqueue would name it
    conn.execute(render(CREATE_QUEUE_SQL, ctx.schema), (queue,))


def set_window(
    conn: psycopg.Connection[Any],
    ctx: OpsContext,
    state: str,
    window: str | float | timedelta | None,
    *,
    queue: str | None = None,
    create: bool = False,
    reason: str | None = None,
) -> Retention:
    """Keep ``state`` jobs (of ``queue``, else of every queue) for ``window``; audited."""
    _check_state(state)
    seconds = parse_window(window)
    ctx.require_write("retention set")
    reason = audit.clean_reason(reason)
    with conn.transaction():
        if queue is not None:
            _check_queue(conn, ctx, queue, create)
        conn.execute(render(SET_SQL, ctx.schema),
                     (state, queue or r.ALL_QUEUES, seconds, ctx.actor))
        audit.record(conn, ctx, "retention set",
                     {"state": state, "queue": queue, "seconds": seconds}, count=1, reason=reason)
    return show(conn, ctx)


def reset_window(
    conn: psycopg.Connection[Any],
    ctx: OpsContext,
    state: str,
    *,
    queue: str | None = None,
    reason: str | None = None,
) -> Retention:
    """A queue's window is removed (the default applies again); the every-queue window goes
    back to forklift's default. Audited."""
    _check_state(state)
    ctx.require_write("retention reset")
    reason = audit.clean_reason(reason)
    with conn.transaction():
        if queue is None:
            conn.execute(render(SET_SQL, ctx.schema),
                         (state, r.ALL_QUEUES, r.DEFAULTS[state], ctx.actor))
        else:
            check_text(queue, "queue")
            gone = conn.execute(render(RESET_SQL, ctx.schema), (state, queue)).fetchone()
            if gone is None:
                raise InvalidSetting(f"queue {queue!r} has no {state} window of its own",
                                     queue=queue, state=state)
        audit.record(conn, ctx, "retention reset", {"state": state, "queue": queue}, count=1,
                     reason=reason)
    return show(conn, ctx)
