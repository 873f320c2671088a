"""A queue's ceiling, as an operator sets it (``forklift queues ceiling``): backpressure.

A ceiling caps a queue's depth (jobs available to run) and/or the wait of its oldest available
job. The elected leader measures each ceilinged queue every second
(forklift._worker.maintenance.ceilings) and marks it full past either; an enqueue to a full
queue then does what its kind declared (``on_full``: raise QueueFull, wait for room, or shed).
The ceiling is soft by what producers enqueue between two measurements (docs:
how-to/backpressure.md). A queue without a ceiling costs nothing: it is never measured and its
enqueues read nothing.
"""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any

import psycopg

from forklift._db.sqltext import render
from forklift._jobs.fullness import full_channel
from forklift.ops import audit
from forklift.ops._parse import duration
from forklift.ops.context import OpsContext
from forklift.ops.errors import InvalidFilter
from forklift.ops.queues import QueueInfo, _act, _check_name, _require_known

__all__ = ["MAX_AGE", "MAX_DEPTH", "MIN_AGE", "set_ceiling"]

#: Bounds of a depth ceiling: jobs waiting.
MAX_DEPTH = 100_000_000
#: Bounds of an age ceiling: the leader measures every second, so a shorter one would flap.
MIN_AGE = 1.0
MAX_AGE = 30 * 86_400.0

CEILING_SQL = """
INSERT INTO {s}.queues AS q (name, ceiling_depth, ceiling_age) VALUES (%(q)s, %(depth)s, %(age)s)
ON CONFLICT (name) DO UPDATE SET ceiling_depth = excluded.ceiling_depth,
    ceiling_age = excluded.ceiling_age, updated_at = now()
"""
# Off: the queue has room at once (apps are told now, not at the leader's next pass).
OFF_SQL = """
WITH u AS (
    UPDATE {s}.queues SET ceiling_depth = NULL, ceiling_age = NULL, full_by = NULL,
        measured_depth = NULL, measured_age = NULL, measured_at = now(), updated_at = now()
    WHERE name = %(q)s RETURNING measured_at
)
SELECT pg_notify(%(channel)s, json_build_object('q', %(q)s::text, 'by', NULL,
    't', extract(epoch FROM u.measured_at)::float8)::text) FROM u
"""


def _depth(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_DEPTH:
        raise InvalidFilter(f"depth = {value!r} is out of range: a depth ceiling is a whole"
                            f" number of jobs from 1 to {MAX_DEPTH:,}", field="depth")
    return value


def _age(value: str | float | timedelta) -> float:
    seconds = duration(value, "age").total_seconds()
    if math.isnan(seconds) or not MIN_AGE <= seconds <= MAX_AGE:
        raise InvalidFilter(f"age = {seconds:g}s is out of range: an age ceiling takes"
                            f" {MIN_AGE:g}s to {MAX_AGE / 86_400:g}d", field="age")
    return seconds


def set_ceiling(conn: psycopg.Connection[Any], ctx: OpsContext, queue: str, *,
                depth: int | None = None, age: str | float | timedelta | None = None,
                off: bool = False, reason: str | None = None, create: bool = False
                ) -> QueueInfo:
    """Cap the queue's depth (``depth`` jobs waiting) and/or its oldest job's wait (``age``:
    ``30s``, ``5m``, seconds or a timedelta); ``off=True`` lifts both. Setting one leaves the
    other off. Audited (``queue_ceiling``)."""
    if off and (depth is not None or age is not None):
        raise InvalidFilter("give a ceiling (depth, age) or off, not both", field="off")
    if not off and depth is None and age is None:
        raise InvalidFilter("give a ceiling: depth (jobs waiting), age (the oldest job's wait),"
                            " or off to lift it", field="depth")
    d = None if depth is None else _depth(depth)
    a = None if age is None else _age(age)
    queue, reason = _check_name(queue), audit.clean_reason(reason)

    def body(c: psycopg.Connection[Any]) -> None:
        _require_known(c, ctx, queue, create)
        if off:
            c.execute(render(OFF_SQL, ctx.schema), {"q": queue, "channel": full_channel(ctx.schema)})
        else:
            c.execute(render(CEILING_SQL, ctx.schema), {"q": queue, "depth": d, "age": a})

    target: dict[str, Any] = {"queue": queue, "depth": d, "age_seconds": a, "off": off}
    return _act(conn, ctx, "queue_ceiling", target, reason, body)
