"""Cron schedules for operators: list them, pause and resume them, run one now.

Schedules are declared in the app's code; the leader records each definition in the database
(see :mod:`forklift._features.cron`), which is what these functions read, so no app needs to be loaded.
A paused schedule's ticks pass without a job, and resuming does not catch them up: the next
tick after the resume is the first to run.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

import psycopg

from forklift._base.errors import ConfigError, ForkliftError
from forklift._base.names import check_name
from forklift._db.sqltext import render
from forklift._features import cron
from forklift._jobs import insert as _enq
from forklift.ops import audit
from forklift.ops.context import OpsContext
from forklift.ops.shape import Shape

__all__ = [
    "RunNow", "ScheduleInfo", "ScheduleNotFound", "audited", "get_schedule", "list_schedules",
    "pause", "required_name", "resume", "run_now"
]

ScheduleNotFound = cron.ScheduleNotFound
T = TypeVar("T")

_COLUMNS = """
s.name, s.kind, s.cron, s.tz, s.policy, s.max_catch_up, s.queue, s.args, s.paused, s.paused_by,
s.paused_at, s.pause_reason, s.last_tick_at,
greatest(s.last_tick_at, s.resumed_at, s.created_at) AS anchor,
t.tick_at, t.enqueued_at, t.job_id, t.manual, j.state, now()
FROM {s}.schedules s
LEFT JOIN LATERAL (
    SELECT x.tick_at, x.enqueued_at, x.job_id, x.manual FROM {s}.schedule_ticks x
    WHERE x.schedule = s.name ORDER BY x.tick_at DESC LIMIT 1
) t ON true
LEFT JOIN {s}.jobs j ON j.id = t.job_id
"""
LIST_SQL = "SELECT " + _COLUMNS + " ORDER BY s.name"
GET_SQL = "SELECT " + _COLUMNS + " WHERE s.name = %s"
PAUSE_SQL = """
UPDATE {s}.schedules SET paused = true, paused_by = %s, paused_at = now(), pause_reason = %s,
    updated_at = now()
WHERE name = %s AND NOT paused RETURNING name
"""
RESUME_SQL = """
UPDATE {s}.schedules SET paused = false, paused_by = NULL, paused_at = NULL, pause_reason = NULL,
    resumed_at = now(), updated_at = now()
WHERE name = %s AND paused RETURNING name
"""
EXISTS_SQL = ("SELECT kind, queue, args, priority, max_attempts, payload_version, weight"
              " FROM {s}.schedules WHERE name = %s")
MANUAL_TICK_SQL = """
INSERT INTO {s}.schedule_ticks (schedule, tick_at, job_id, manual, actor)
VALUES (%s, clock_timestamp(), %s, true, %s)
"""


@dataclass(frozen=True)
class ScheduleInfo(Shape):
    name: str
    kind: str
    cron: str
    tz: str
    policy: str
    max_catch_up: int
    queue: str
    args: Any
    paused: bool
    paused_by: str | None
    paused_at: datetime | None
    pause_reason: str | None
    #: The next tick that will fire (None while paused); at or before now means overdue: it
    #: fires as soon as a worker leads.
    next_at: datetime | None
    #: The latest cron tick fired (manual runs do not move it).
    last_tick_at: datetime | None
    #: The latest run of either sort, when it was enqueued, its job and that job's state now
    #: (``pruned`` once retention removed the job).
    last_run_at: datetime | None
    last_job_id: int | None
    last_manual: bool
    last_outcome: str | None


@dataclass(frozen=True)
class RunNow(Shape):
    schedule: str
    job_id: int
    queue: str
    kind: str


def _info(row: tuple[Any, ...]) -> ScheduleInfo:
    (name, kind, expr, tz, policy, max_catch_up, queue, args, paused, paused_by, paused_at,
     pause_reason, last_tick_at, anchor, _tick_at, enqueued_at, job_id, manual, job_state,
     _now) = row
    next_at: datetime | None = None
    if not paused:
        try:
            next_at = cron.next_tick(expr, tz, anchor)
        except ConfigError:
            next_at = None  # a definition this forklift cannot read (a newer cron dialect)
    outcome = job_state if job_state is not None else ("pruned" if job_id is not None else None)
    return ScheduleInfo(
        name=name, kind=kind, cron=expr, tz=tz, policy=policy, max_catch_up=max_catch_up,
        queue=queue, args=args, paused=paused, paused_by=paused_by, paused_at=paused_at,
        pause_reason=pause_reason, next_at=next_at, last_tick_at=last_tick_at,
        last_run_at=enqueued_at, last_job_id=job_id, last_manual=bool(manual),
        last_outcome=outcome,
    )


def required_name(name: str, what: str) -> str:
    """A schedule's or backfill's name as the app declares it (InvalidName otherwise)."""
    return check_name(name, what)


def _name(name: str) -> str:
    return required_name(name, "schedule")


def list_schedules(conn: psycopg.Connection[Any], ctx: OpsContext) -> list[ScheduleInfo]:
    return [_info(r) for r in conn.execute(render(LIST_SQL, ctx.schema)).fetchall()]


def get_schedule(conn: psycopg.Connection[Any], ctx: OpsContext, name: str) -> ScheduleInfo:
    row = conn.execute(render(GET_SQL, ctx.schema), (_name(name),)).fetchone()
    if row is None:
        raise _not_found(conn, ctx, name)
    return _info(row)


def _not_found(conn: psycopg.Connection[Any], ctx: OpsContext, name: str) -> ScheduleNotFound:
    known = [r[0] for r in conn.execute(render("SELECT name FROM {s}.schedules ORDER BY name LIMIT 20", ctx.schema))]
    hint = f" (known: {', '.join(known)})" if known else " (none recorded yet: a worker of the app records them when it leads)"
    return ScheduleNotFound(f"no schedule named {name!r}{hint}", schedule=name)


def audited(
    conn: psycopg.Connection[Any],
    ctx: OpsContext,
    action: str,
    target: dict[str, Any],
    reason: str | None,
    body: Callable[[psycopg.Connection[Any]], tuple[T, str]],
    refusals: tuple[type[ForkliftError], ...],
) -> T:
    """``body(conn) -> (result, outcome)`` and its audit row in one transaction; a refusal
    (one of ``refusals``) is audited on its own and re-raised."""
    ctx.require_write(action)
    try:
        with conn.transaction():
            result, outcome = body(conn)
            audit.record(conn, ctx, action, target, count=1, reason=reason, outcome=outcome)
    except refusals as exc:
        audit.record_refusal(conn, ctx, action, target, exc.code, reason)
        raise
    return result


def _toggle(
    conn: psycopg.Connection[Any], ctx: OpsContext, name: str, reason: str | None, *, pause: bool
) -> ScheduleInfo:
    name, reason = _name(name), audit.clean_reason(reason)

    def body(c: psycopg.Connection[Any]) -> tuple[None, str]:
        _require(c, ctx, name)
        if pause:
            done = c.execute(render(PAUSE_SQL, ctx.schema), (ctx.actor, reason, name)).fetchone()
        else:
            done = c.execute(render(RESUME_SQL, ctx.schema), (name,)).fetchone()
        noop = "noop: already paused" if pause else "noop: not paused"
        return None, audit.OUTCOME_DONE if done else noop

    action = "schedule.pause" if pause else "schedule.resume"
    audited(conn, ctx, action, {"schedule": name}, reason, body, (ScheduleNotFound,))
    return get_schedule(conn, ctx, name)


def _require(c: psycopg.Connection[Any], ctx: OpsContext, name: str) -> tuple[Any, ...]:
    got = c.execute(render(EXISTS_SQL, ctx.schema), (name,)).fetchone()
    if got is None:
        raise _not_found(c, ctx, name)
    return tuple(got)


def pause(
    conn: psycopg.Connection[Any], ctx: OpsContext, name: str, *, reason: str | None = None
) -> ScheduleInfo:
    """Stop a schedule firing (audited); a paused schedule stays paused across deploys."""
    return _toggle(conn, ctx, name, reason, pause=True)


def resume(
    conn: psycopg.Connection[Any], ctx: OpsContext, name: str, *, reason: str | None = None
) -> ScheduleInfo:
    """Let a schedule fire again from its next tick; ticks missed while paused are not run."""
    return _toggle(conn, ctx, name, reason, pause=False)


def run_now(
    conn: psycopg.Connection[Any], ctx: OpsContext, name: str, *, reason: str | None = None
) -> RunNow:
    """Enqueue the schedule's job once, now (paused or not); the cron ticks are unaffected."""
    name, reason = _name(name), audit.clean_reason(reason)

    def body(c: psycopg.Connection[Any]) -> tuple[RunNow, str]:
        kind, queue, args, priority, max_attempts, version, weight = _require(c, ctx, name)
        # the args are in the payload version of the app that recorded the schedule
        row = _enq.Row(
            queue=queue, kind=kind, args=json.dumps(args), priority=priority,
            max_attempts=max_attempts, at=None, delay=0.0, unique_key=None, tags=[],
            meta=json.dumps({"schedule": name, "manual": True, "actor": ctx.actor}), retry=None,
            payload_version=version, weight=weight,
        )
        job = _enq.insert_one(c, ctx.schema, row, "return_existing")
        c.execute(render(MANUAL_TICK_SQL, ctx.schema), (name, job.id, ctx.actor))
        return RunNow(schedule=name, job_id=job.id, queue=queue, kind=kind), audit.OUTCOME_DONE

    return audited(conn, ctx, "schedule.run_now", {"schedule": name}, reason, body,
                   (ScheduleNotFound,))
