"""A job's durable side for operators: its steps (with state, time and a result summary), the
jobs it waits for, and whether it is parked (sleeping, waiting for an event, held for its
dependencies). Read by ``forklift jobs show`` and the console's job detail."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg

from forklift._durable.deps import HELD_UNTIL
from forklift._job import Job
from forklift._sqltext import render
from forklift.ops.shape import Shape

__all__ = ["MAX_STEPS", "SUMMARY", "Dependency", "StepInfo", "parked", "read"]

SUMMARY = 120
MAX_STEPS = 200

STEPS_SQL = """
SELECT name, state, attempt, started_at, finished_at,
       extract(epoch FROM finished_at - started_at)::float8,
       left(result::text, %(n)s), error ->> 'code', left(error ->> 'message', %(n)s),
       wake_at, event, left(match::text, %(n)s), event_id
FROM {s}.job_steps WHERE job_id = %(id)s ORDER BY started_at, name LIMIT %(limit)s
"""
DEPS_SQL = """
SELECT d.depends_on, coalesce(j.state, 'deleted'), d.policy
FROM {s}.job_deps d LEFT JOIN {s}.jobs j ON j.id = d.depends_on
WHERE d.job_id = %s ORDER BY d.depends_on
"""


@dataclass(frozen=True)
class StepInfo(Shape):
    name: str
    #: completed, failed, sleeping or waiting
    state: str
    attempt: int
    started_at: datetime
    finished_at: datetime | None
    seconds: float | None
    #: the result's JSON (cut), or the failure's code and message
    summary: str | None
    #: a sleep's wake time, a wait's deadline
    wake_at: datetime | None = None
    #: a wait's event name and match
    event: str | None = None
    match: str | None = None
    #: the event that ended a wait (None after a timeout)
    event_id: int | None = None


@dataclass(frozen=True)
class Dependency(Shape):
    job_id: int
    state: str
    policy: str


def _step(r: tuple[Any, ...]) -> StepInfo:
    summary = r[6] if r[1] == "completed" else (f"{r[7]}: {r[8] or ''}".strip() if r[7] else None)
    return StepInfo(r[0], r[1], r[2], r[3], r[4], r[5], summary, r[9], r[10], r[11], r[12])


def read(conn: psycopg.Connection[Any], schema: str, job_id: int
         ) -> tuple[list[StepInfo], list[Dependency]]:
    steps = conn.execute(render(STEPS_SQL, schema),
                         {"id": job_id, "n": SUMMARY, "limit": MAX_STEPS}).fetchall()
    deps = conn.execute(render(DEPS_SQL, schema), (job_id,)).fetchall()
    return [_step(r) for r in steps], [Dependency(*r) for r in deps]


def parked(job: Job, steps: list[StepInfo], deps: list[Dependency]) -> str | None:
    """Why a scheduled job is parked, in words ("sleeping until ..."), or None."""
    if job.state != "scheduled":
        return None
    for s in steps:
        if s.state == "sleeping" and s.wake_at is not None:
            return f"sleeping ({s.name}) until {s.wake_at.isoformat()}"
        if s.state == "waiting":
            until = s.wake_at.isoformat() if s.wake_at else "no deadline"
            match = f" matching {s.match}" if s.match else ""
            return f"waiting for event {json.dumps(s.event)}{match} ({until})"
    live = [d.job_id for d in deps if d.state in ("scheduled", "available", "running", "retryable")]
    if job.run_at == HELD_UNTIL and deps:
        return "waiting for jobs " + ", ".join(str(i) for i in live) if live else "released"
    return None
