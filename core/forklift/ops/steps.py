"""A job's durable side for operators: its steps (with state, time and a result summary), the
jobs it waits for, and whether it is parked (sleeping, waiting for an event, held for its
dependencies). Read by ``forklift jobs show`` and the console's job detail; the jobs list reads
why a scheduled job waits (:data:`PARKED_COLUMN`, :class:`Parked`)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

import psycopg

from forklift._db.sqltext import render
from forklift._features.durable.deps import HELD_UNTIL
from forklift._features.durable.holds import PAUSED_UNTIL
from forklift._jobs.job import Job
from forklift.ops.display import show_id
from forklift.ops.shape import Shape

__all__ = [
    "MAX_STEPS",
    "PARKED_COLUMN",
    "SUMMARY",
    "Dependency",
    "Parked",
    "StepInfo",
    "parked",
    "parked_of",
    "read",
    "with_parked",
]

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


# A list column: why a scheduled row waits, as JSON (NULL for every other row, and for a job
# that is merely scheduled). Evaluated for the page's scheduled rows only, each an index probe
# of the parked steps (job_steps_parked_idx) and, for a held job, of its dependencies.
PARKED_COLUMN = """CASE WHEN t.state = 'scheduled' THEN coalesce(
    (SELECT jsonb_build_object('why', CASE p.state WHEN 'sleeping' THEN 'sleeping' ELSE 'event' END,
                               'until', p.wake_at, 'event', p.event)
     FROM {s}.job_steps p WHERE p.job_id = t.id AND p.state IN ('sleeping', 'waiting') LIMIT 1),
    CASE WHEN t.run_at = '9999-12-31 00:00:00+00' THEN (
        SELECT jsonb_build_object('why', 'jobs', 'jobs', count(*))
        FROM {s}.job_deps d JOIN {s}.jobs j ON j.id = d.depends_on
        WHERE d.job_id = t.id AND j.state IN ('scheduled', 'available', 'running', 'retryable')
        HAVING count(*) > 0) END
) END AS parked"""


@dataclass(frozen=True)
class Parked(Shape):
    """Why a scheduled job waits; its state stays ``scheduled``."""

    #: sleeping (ctx.sleep), event (ctx.wait_for_event), jobs (after=, still unsettled)
    why: Literal["sleeping", "event", "jobs"]
    #: a sleep's wake time, a wait's deadline (None: no deadline)
    until: datetime | None = None
    event: str | None = None
    #: how many of the jobs it waits for are still live
    jobs: int | None = None
    #: the same in words: "sleeping until ...", "waiting for event E", "waiting for N jobs"
    text: str = ""

    def describe(self, when: Callable[[datetime], str] = datetime.isoformat) -> str:
        """The words, with times as ``when`` shows them; identifiers never hide characters."""
        if self.why == "sleeping":
            return f"sleeping until {when(self.until)}" if self.until else "sleeping"
        if self.why == "event":
            name = show_id(self.event or "")
            return f"waiting for event {name}" + (f" until {when(self.until)}" if self.until
                                                  else "")
        n = self.jobs or 0
        return f"waiting for {n:,} job{'' if n == 1 else 's'}"


def parked_of(value: dict[str, Any] | None) -> Parked | None:
    """A :data:`PARKED_COLUMN` value as a :class:`Parked`."""
    if not value:
        return None
    until = value.get("until")
    bare = Parked(value["why"], datetime.fromisoformat(until) if until else None,
                  value.get("event"), value.get("jobs"))
    return Parked(bare.why, bare.until, bare.event, bare.jobs, bare.describe())


def with_parked(row: dict[str, Any]) -> dict[str, Any]:
    """A list row read with :data:`PARKED_COLUMN`, its ``parked`` made a :class:`Parked`."""
    return {**row, "parked": parked_of(row.get("parked"))}


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
    if job.run_at == PAUSED_UNTIL:
        return "paused: held until its workflow or kind is resumed (forklift workflows pauses)"
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
