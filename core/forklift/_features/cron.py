"""Cron schedules: declared in code, fired by the elected leader, once per tick.

A schedule names a job kind, a cron expression and a time zone. The leader calls :func:`tick`
from its loop; for each schedule it computes the ticks that fell due since the last one and, in
ONE transaction per schedule, inserts a ``schedule_ticks`` row (primary key (schedule, tick_at))
and the job. A second leader, a leader that took over mid-tick, or a tick whose job already
completed all meet that primary key, so a tick is enqueued at most once; a leader killed before
its commit leaves neither row, so the next leader enqueues it. Exactly once, per tick.

Time zones and daylight saving time are handled on the wall clock, the way cron users expect:

- a wall time that does not exist (the spring-forward gap) fires once, at the first instant
  after the gap (a 02:30 daily job runs at 03:00 local on that day);
- a wall time that happens twice (the fall-back repeat) fires once, at its first occurrence;
- a schedule whose hour field is ``*`` (every hour) keeps its real-time rhythm instead: nothing
  fires inside a gap that did not happen, and the repeated hour fires twice, as it elapses twice.

Missed ticks (no worker ran): policy ``skip`` runs the latest missed tick once; ``catch_up``
runs each missed tick, at most ``max_catch_up`` of them (the most recent ones).
"""

from __future__ import annotations

import logging
import time
import weakref
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, Protocol

import psycopg

from forklift._base.calendar import instants, next_tick, normalise, ticks_between, zone_of
from forklift._base.errors import ConfigError, ForkliftError
from forklift._base.names import check_name
from forklift._db.sqltext import render
from forklift._db.steps import Query, Steps, drive, drive_async
from forklift._features.host import Host, Kind
from forklift._jobs import insert as _enq

if TYPE_CHECKING:
    from forklift._features.backfill.backfill import Backfill

__all__ = ["POLICIES", "CronHost", "Policy", "Schedule", "ScheduleNotFound", "declare",
           "definition_steps", "instants", "next_tick", "normalise", "sync_definitions",
           "sync_definitions_now", "tick", "ticks_between", "zone_of"]

log = logging.getLogger("forklift.cron")

Policy = Literal["skip", "catch_up"]
POLICIES: tuple[Policy, ...] = ("skip", "catch_up")
MAX_CATCH_UP = 1000
DEFAULT_CATCH_UP = 10
# Definitions are re-synced at most this often (and at a leader's first tick).
SYNC_EVERY = 30.0
TICK_RETENTION_DAYS = 7


class ScheduleNotFound(ForkliftError):
    code = "schedule_not_found"


# -- declarations -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Schedule:
    """A declared schedule: which kind to enqueue, with which args, when."""

    name: str
    kind: Kind
    cron: str
    tz: str
    args: Any
    policy: Policy
    max_catch_up: int

    def row(self, *, meta: dict[str, Any] | None = None) -> _enq.Row:
        return self.kind.row(self.args, meta=meta)

    def due(self, after: datetime, until: datetime) -> list[datetime]:
        limit = 1 if self.policy == "skip" else self.max_catch_up
        return ticks_between(self.cron, self.tz, after, until, limit)

    def next_after(self, at: datetime) -> datetime:
        return next_tick(self.cron, self.tz, at)


class CronHost(Host, Protocol):
    """What schedules need from an app: its schedules, and its backfills to record with them."""

    @property
    def schedules(self) -> dict[str, Schedule]: ...

    @property
    def backfills(self) -> Mapping[str, Backfill]: ...


def declare(
    app: CronHost,
    kind: Kind,
    *,
    cron: str,
    tz: str = "UTC",
    name: str | None = None,
    args: Any = None,
    policy: Policy = "skip",
    max_catch_up: int | None = None,
) -> Schedule:
    """Validate and register a schedule on an app (``app.periodic`` and ``app.schedule``)."""
    if app.kinds.get(kind.name) is not kind:
        raise ConfigError(f"job kind {kind.name} belongs to another app")
    schedule_name = check_name(name or kind.name, "schedule", field="name")
    if schedule_name in app.schedules:
        raise ConfigError(
            f"schedule {schedule_name!r} is already declared: give each schedule of a kind a name="
        )
    if policy not in POLICIES:
        raise ConfigError(f"policy must be 'skip' or 'catch_up', not {policy!r}")
    limit = max_catch_up if max_catch_up is not None else (
        DEFAULT_CATCH_UP if policy == "catch_up" else 1
    )
    if not 1 <= limit <= MAX_CATCH_UP:
        raise ConfigError(f"max_catch_up must be between 1 and {MAX_CATCH_UP}, not {limit}")
    zone_of(tz)
    schedule = Schedule(
        name=schedule_name,
        kind=kind,
        cron=normalise(cron),
        tz=tz,
        args={} if args is None else args,
        policy=policy,
        max_catch_up=limit,
    )
    schedule.row()  # the args must validate now, not at 3 a.m. in the leader
    app.schedules[schedule_name] = schedule
    return schedule


# -- the leader's chore -------------------------------------------------------------------------
SYNC_SCHEDULE_SQL = """
INSERT INTO {s}.schedules AS t
    (name, kind, cron, tz, policy, max_catch_up, queue, args, priority, max_attempts,
     payload_version, weight)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s::jsonb, %s, %s, %s, %s)
ON CONFLICT (name) DO UPDATE SET
    kind = excluded.kind, cron = excluded.cron, tz = excluded.tz, policy = excluded.policy,
    max_catch_up = excluded.max_catch_up, queue = excluded.queue, args = excluded.args,
    priority = excluded.priority, max_attempts = excluded.max_attempts,
    payload_version = excluded.payload_version, weight = excluded.weight, updated_at = now()
WHERE (t.kind, t.cron, t.tz, t.policy, t.max_catch_up, t.queue, t.args, t.priority, t.max_attempts,
       t.payload_version, t.weight)
    IS DISTINCT FROM (excluded.kind, excluded.cron, excluded.tz, excluded.policy,
                      excluded.max_catch_up, excluded.queue, excluded.args, excluded.priority,
                      excluded.max_attempts, excluded.payload_version, excluded.weight)
"""

STATE_SQL = """
SELECT name, paused, greatest(last_tick_at, resumed_at, created_at), now()
FROM {s}.schedules WHERE name = ANY(%s::text[])
"""

CLAIM_TICK_SQL = """
INSERT INTO {s}.schedule_ticks (schedule, tick_at) VALUES (%s, %s)
ON CONFLICT (schedule, tick_at) DO NOTHING RETURNING tick_at
"""
SET_TICK_JOB_SQL = "UPDATE {s}.schedule_ticks SET job_id = %s WHERE schedule = %s AND tick_at = %s"
ADVANCE_SQL = """
UPDATE {s}.schedules SET last_tick_at = greatest(last_tick_at, %s)
WHERE name = %s AND NOT paused
"""

# Old tick rows are only history; the newest row of each schedule is kept for its last outcome.
PRUNE_TICKS_SQL = """
DELETE FROM {s}.schedule_ticks AS t
WHERE t.ctid = ANY(ARRAY(
    SELECT x.ctid FROM {s}.schedule_ticks x
    WHERE x.tick_at < now() - make_interval(days => %s)
      AND x.tick_at < (SELECT max(y.tick_at) FROM {s}.schedule_ticks y WHERE y.schedule = x.schedule)
    LIMIT 1000))
"""

FaultHook = Callable[[str, str, datetime], Awaitable[None]]
#: A seam for fault-injection tests only: awaited inside the tick's transaction ("before_commit")
#: and right after it ("after_commit") with (point, schedule name, tick instant).
fault_hook: FaultHook | None = None

# When each app last recorded its definitions, per (schema, database).
_synced: weakref.WeakKeyDictionary[CronHost, dict[tuple[str, str], float]] = (
    weakref.WeakKeyDictionary()
)
# Per app, (schema, database, schedule) -> (anchor, first tick after it): an idle tick of the
# leader then costs no calendar arithmetic, which croniter makes slow (about a millisecond).
_next_due: weakref.WeakKeyDictionary[
    CronHost, dict[tuple[str, str, str], tuple[datetime, str, datetime]]
] = weakref.WeakKeyDictionary()


def _where(conn: psycopg.AsyncConnection[Any]) -> str:
    """Which database a connection is on (libpq's own fields: conn.info.dsn costs a parse)."""
    pg = conn.pgconn
    return f"{pg.host!r}:{pg.port!r}/{pg.db!r}"


def _not_yet(app: CronHost, key: tuple[str, str, str], s: Schedule, anchor: datetime,
             now: datetime) -> bool:
    """Whether the schedule's next tick after ``anchor`` is still in the future."""
    cache = _next_due.setdefault(app, {})
    hit = cache.get(key)
    definition = f"{s.cron}|{s.tz}"
    if hit is None or hit[0] != anchor or hit[1] != definition:
        hit = (anchor, definition, s.next_after(anchor))
        cache[key] = hit
    return now < hit[2]


def _definition_params(s: Schedule) -> tuple[Any, ...]:
    row = s.row()
    return (s.name, s.kind.name, s.cron, s.tz, s.policy, s.max_catch_up, row.queue, row.args,
            row.priority, row.max_attempts, row.payload_version, row.weight)


def definition_steps(app: CronHost, schema: str) -> Steps[None]:
    """Record the app's schedules and backfills so operators can list them without the app;
    run with ``tx="savepoint"`` (one transaction)."""
    from forklift._features.backfill import backfill as _backfill

    for s in app.schedules.values():
        yield Query(render(SYNC_SCHEDULE_SQL, schema), _definition_params(s))
    yield from _backfill.definition_steps(app.backfills.values(), schema)


async def sync_definitions(
    conn: psycopg.AsyncConnection[Any], app: CronHost, schema: str
) -> None:
    """Record the definitions (the leader, on its own connection)."""
    await drive_async(conn, definition_steps(app, schema), "savepoint")
    _synced.setdefault(app, {})[(schema, _where(conn))] = time.monotonic()


def sync_definitions_now(conn: psycopg.Connection[Any], app: CronHost, schema: str) -> None:
    """The same, on a plain connection (the CLI with --app)."""
    drive(conn, definition_steps(app, schema), "savepoint")


async def _fire(
    conn: psycopg.AsyncConnection[Any], schema: str, s: Schedule, due: list[datetime]
) -> int:
    """Enqueue the due ticks of one schedule in one transaction; returns jobs enqueued."""
    enqueued = 0
    async with conn.transaction():
        for at in due:
            cur = await conn.execute(render(CLAIM_TICK_SQL, schema), (s.name, at))
            if await cur.fetchone() is None:
                continue  # another leader enqueued this tick already
            meta = {"schedule": s.name, "tick": at.isoformat()}
            job = await _enq.insert_one_async(conn, schema, s.row(meta=meta), "return_existing")
            await conn.execute(render(SET_TICK_JOB_SQL, schema), (job.id, s.name, at))
            enqueued += 1
        await conn.execute(render(ADVANCE_SQL, schema), (due[-1], s.name))
        if fault_hook is not None:
            await fault_hook("before_commit", s.name, due[-1])
    if fault_hook is not None:
        await fault_hook("after_commit", s.name, due[-1])
    return enqueued


async def tick(
    conn: psycopg.AsyncConnection[Any],
    *,
    app: CronHost,
    schema: str,
    now: datetime | None = None,
) -> int:
    """The leader's cron chore: enqueue every due tick once. Returns the jobs enqueued.

    ``now`` (tests) replaces the database clock, which is the one every host shares.
    """
    if not app.schedules and not app.backfills:
        return 0
    where = _where(conn)
    last_sync = _synced.get(app, {}).get((schema, where))
    if last_sync is None or time.monotonic() - last_sync >= SYNC_EVERY:
        await sync_definitions(conn, app, schema)
        await conn.execute(render(PRUNE_TICKS_SQL, schema), (TICK_RETENTION_DAYS,))
    if not app.schedules:
        return 0
    cur = await conn.execute(render(STATE_SQL, schema), (list(app.schedules),))
    rows = await cur.fetchall()
    if len(rows) < len(app.schedules):  # declared since the last sync, or the rows were removed
        await sync_definitions(conn, app, schema)
        cur = await conn.execute(render(STATE_SQL, schema), (list(app.schedules),))
        rows = await cur.fetchall()
    enqueued = 0
    for name, paused, anchor, db_now in rows:
        s = app.schedules[name]
        at = now or db_now
        if paused or _not_yet(app, (schema, where, name), s, anchor, at):
            continue
        due = s.due(anchor, at)
        if not due:
            continue
        try:
            enqueued += await _fire(conn, schema, s, due)
        except ForkliftError as exc:
            # One schedule whose args no longer validate must not starve the others.
            log.error("schedule %s: cannot enqueue (%s)", name, exc.message)
    return enqueued

