"""Parking: ``await ctx.sleep(name, duration)`` and ``await ctx.wait_for_event(event, ...)``.

A park is one fenced statement from the handler: it records the sleep or wait in ``job_steps``
and in the same statement moves the job from ``running`` to ``scheduled`` (its lease cleared,
the attempt refunded: parking is not a failed attempt; an operator's cancel requested meanwhile
ends it ``cancelled`` instead), then raises :class:`~forklift._features.durable.errors.Park` so the
attempt ends without an outcome: the worker's slot is free at once and a parked job holds no
slot, no lease and no connection. It runs again (from the top, finished steps skipped) when it
is due: a sleep at its wake time, a wait when a matching event commits (the publisher's
trigger makes it available) or at its deadline. Every time is the database's clock.

Waking is a batch: the leader's stager, in the one statement that makes due jobs available,
ends their sleeps and timed-out waits (``_worker/maintenance/stager.py``), so the resumed
attempt finds the step over in its (batched) read of its steps and writes nothing for it. The
resume statements below remain for a job that runs before its time (an operator's run now).

Which events a wait sees: the wait records the snapshot it began under (``pg_current_snapshot``
at the first statement of its registration) and matches events whose transaction that snapshot
could not see, i.e. events committed after the wait began, even those stamped (inserted) before
it. A wait registers under an exclusive lock on the event name that publishers take shared only
while they commit (``functions/workflows_v1.sql`` and ``_v2.sql``), so an event is either committed before the
registration looks (and is found by it) or commits after the wait row is visible (and wakes it):
no window loses one, and no side waits for the other's open transaction.
"""

from __future__ import annotations

import json
from collections.abc import Generator
from datetime import timedelta
from functools import partial
from typing import Any, Literal

import psycopg

from forklift._base.errors import ForkliftError, InvalidOption
from forklift._base.names import check_name
from forklift._db.sqltext import render
from forklift._features.durable.deps import HELD_UNTIL
from forklift._features.durable.errors import Park, StepLeaseLost, WaitTimedOut, refused
from forklift._features.durable.runtime import AttemptSteps, Stored
from forklift._features.durable.steps import Db, Op, claim_name, drive, drive_sync, loaded
from forklift._jobs.attempt import Attempt
from forklift._jobs.payload import to_json_text

OnTimeout = Literal["return", "raise"]

# The running attempt's row, locked; nothing is parked unless the fence still holds.
_MINE = """j AS (
    SELECT id FROM {s}.jobs
    WHERE id = %(job)s AND fence = %(fence)s AND state = 'running' FOR UPDATE
)"""
# The park itself: written only when the step says the job must wait. Like a settle, it records
# the start (a buffered start may not be written yet) and ends a run of lease expiries.
_PARK = """UPDATE {s}.jobs AS t SET
        state = CASE WHEN t.cancel_requested_at IS NOT NULL THEN 'cancelled' ELSE 'scheduled' END,
        finished_at = CASE WHEN t.cancel_requested_at IS NOT NULL THEN now() END,
        run_at = coalesce(%(until)s, %(held)s), attempt = greatest(0, t.attempt - 1),
        lease_expires_at = NULL, attempted_at = coalesce(t.attempted_at, now()), lost = 0"""

SLEEP_SQL = "WITH " + _MINE + """, s AS (
    INSERT INTO {s}.job_steps (job_id, name, state, fence, attempt, wake_at)
    SELECT j.id, %(name)s, 'sleeping', %(fence)s, %(attempt)s,
           now() + make_interval(secs => %(secs)s) FROM j
    RETURNING wake_at
), parked AS (
    """ + _PARK.replace("%(until)s", "s.wake_at") + """
    FROM s WHERE t.id = %(job)s
    RETURNING t.state, t.run_at
)
SELECT state, run_at FROM parked
"""
# A sleep that was parked before: done when due, else parked again until its wake time.
RESUME_SLEEP_SQL = "WITH " + _MINE + """, s AS (
    SELECT wake_at, wake_at <= now() AS due FROM {s}.job_steps
    WHERE job_id = %(job)s AND name = %(name)s AND state = 'sleeping'
), done AS (
    UPDATE {s}.job_steps AS x SET state = 'completed', finished_at = now(), fence = %(fence)s
    FROM s, j WHERE x.job_id = j.id AND x.name = %(name)s AND s.due
    RETURNING 1
), parked AS (
    """ + _PARK.replace("%(until)s", "s.wake_at") + """
    FROM s, j WHERE t.id = j.id AND NOT s.due
    RETURNING t.state, t.run_at
)
SELECT (SELECT count(*) FROM j), (SELECT count(*) FROM done), p.state, p.run_at
FROM (SELECT 1) one LEFT JOIN parked p ON true
"""

# The wait's snapshot is taken before the lock is waited for: it is when the wait began.
LOCK_SQL = """
SELECT set_config('forklift.wait_snapshot', pg_current_snapshot()::text, true),
       pg_advisory_xact_lock(hashtextextended('forklift.event:' || %s, 0))
"""
_HIT = """hit AS (
    SELECT e.id, e.data FROM {s}.events e
    WHERE e.name = %(event)s AND (%(match)s::jsonb IS NULL OR e.data @> %(match)s::jsonb)
      AND NOT pg_visible_in_snapshot(e.xact, w.snap)
    ORDER BY e.id LIMIT 1
)"""
WAIT_SQL = "WITH " + _MINE + """, w AS (
    SELECT current_setting('forklift.wait_snapshot')::pg_snapshot AS snap
), """ + _HIT.replace("FROM {s}.events e", "FROM w, {s}.events e") + """, s AS (
    INSERT INTO {s}.job_steps (job_id, name, state, result, event_id, fence, attempt, wake_at,
                               event, match, snapshot, finished_at)
    SELECT j.id, %(name)s, CASE WHEN hit.id IS NULL THEN 'waiting' ELSE 'completed' END,
           hit.data, hit.id, %(fence)s, %(attempt)s,
           CASE WHEN %(secs)s::float8 IS NULL THEN NULL
                ELSE now() + make_interval(secs => %(secs)s) END,
           %(event)s, %(match)s::jsonb, w.snap, CASE WHEN hit.id IS NOT NULL THEN now() END
    FROM j CROSS JOIN w LEFT JOIN hit ON true
    RETURNING state, result, event_id, wake_at
), parked AS (
    """ + _PARK.replace("%(until)s", "s.wake_at") + """
    FROM s WHERE t.id = %(job)s AND s.state = 'waiting'
    RETURNING t.state, t.run_at
)
SELECT s.state, s.result, s.event_id, p.state, p.run_at
FROM s LEFT JOIN parked p ON true
"""
# A wait that was parked before and runs again without its event: at or past its deadline it
# times out; an event it can match ends it (a safety net: the publish normally ends it); else
# it is parked again, with the snapshot it began under.
RESUME_WAIT_SQL = "WITH " + _MINE + """, w AS (
    SELECT snapshot AS snap, wake_at, wake_at IS NOT NULL AND wake_at <= now() AS expired
    FROM {s}.job_steps WHERE job_id = %(job)s AND name = %(name)s AND state = 'waiting'
), """ + _HIT.replace("FROM {s}.events e", "FROM w, {s}.events e") + """, done AS (
    UPDATE {s}.job_steps AS x SET state = 'completed', result = hit.data, event_id = hit.id,
        finished_at = now(), fence = %(fence)s
    FROM j, w LEFT JOIN hit ON true
    WHERE x.job_id = j.id AND x.name = %(name)s AND (hit.id IS NOT NULL OR w.expired)
    RETURNING x.result, x.event_id
), parked AS (
    """ + _PARK.replace("%(until)s", "w.wake_at") + """
    FROM w, j WHERE t.id = j.id AND NOT EXISTS (SELECT 1 FROM done)
    RETURNING t.state, t.run_at
)
SELECT (SELECT count(*) FROM j), d.result, d.event_id, (SELECT count(*) FROM done), p.state,
       p.run_at
FROM (SELECT 1) one LEFT JOIN done d ON true LEFT JOIN parked p ON true
"""


def _seconds(value: timedelta | float | None, what: str) -> float | None:
    if value is None:
        return None
    secs = value.total_seconds() if isinstance(value, timedelta) else float(value)
    if not 0 <= secs < 100 * 365 * 86400:
        raise InvalidOption(f"{what} must be between 0 and 100 years, not {value!r}", field=what)
    return secs


def _base(ctx: Attempt, name: str) -> dict[str, Any]:
    return {"job": ctx.job_id, "fence": ctx.fence, "attempt": ctx.attempt, "name": name,
            "held": HELD_UNTIL}


async def _one(conn: psycopg.AsyncConnection[Any], *, sql: str, params: dict[str, Any]) -> Any:
    cur = await conn.execute(sql, params)
    return await cur.fetchone()


async def _locked(conn: psycopg.AsyncConnection[Any], *, event: str, sql: str,
                  params: dict[str, Any]) -> Any:
    """One round trip: BEGIN, the snapshot and the event-name lock, the statement, COMMIT."""
    async with conn.pipeline(), conn.transaction():
        await conn.execute(LOCK_SQL, (event,))
        cur = await conn.execute(sql, params)
    return await cur.fetchone()


def _lost(name: str) -> StepLeaseLost:
    return StepLeaseLost(f"{name!r} could not park the job: this attempt lost its lease",
                         step=name)


def _sleep(ctx: Attempt, state: AttemptSteps, name: object, duration: timedelta | float
           ) -> Generator[Op, Any, None]:
    try:
        secs = _seconds(duration, "duration")
    except ForkliftError as exc:
        raise refused(exc) from None
    checked = claim_name(state, name, "sleep name")
    stored = (yield from loaded(ctx, state)).get(checked)
    schema = state.runtime.schema
    params = {**_base(ctx, checked), "secs": secs}
    if stored is not None and stored.state == "completed":
        return
    if stored is None:
        row = yield Db(partial(_one, sql=render(SLEEP_SQL, schema), params=params))
        if row is None:
            raise _lost(checked)
        raise Park(ctx.job_id, row[1])
    row = yield Db(partial(_one, sql=render(RESUME_SLEEP_SQL, schema), params=params))
    if not row[0]:
        raise _lost(checked)
    if row[1]:
        stored.state = "completed"
        return
    raise Park(ctx.job_id, row[3])


def _wait(ctx: Attempt, state: AttemptSteps, event: object, match: Any,
          timeout: timedelta | float | None, name: str | None, on_timeout: OnTimeout
          ) -> Generator[Op, Any, Any]:
    try:
        event_name = check_name(event, "event", field="event name")
        if on_timeout not in ("return", "raise"):
            raise InvalidOption(f"on_timeout must be 'return' or 'raise', not {on_timeout!r}",
                                field="on_timeout")
        secs = _seconds(timeout, "timeout")
        match_text = None if match is None else to_json_text(
            match, what="event match", kind=event_name, limit=state.runtime.payload_limit)
    except ForkliftError as exc:
        raise refused(exc) from None
    if name is None:
        n = state.waits.get(event_name, 0) + 1
        state.waits[event_name] = n
        name = f"wait:{event_name}" + (f"#{n}" if n > 1 else "")
    checked = claim_name(state, name, "wait name")
    known = yield from loaded(ctx, state)
    stored = known.get(checked)
    schema = state.runtime.schema
    params = {**_base(ctx, checked), "secs": secs, "event": event_name, "match": match_text}
    if stored is None:
        row = yield Db(partial(_locked, event=event_name, sql=render(WAIT_SQL, schema),
                               params=params))
        if row is None:
            raise _lost(checked)
        if row[0] == "waiting":
            raise Park(ctx.job_id, row[4])
        result, event_id = row[1], row[2]
    elif stored.state == "completed":
        result, event_id = stored.result, stored.event_id
    else:
        row = yield Db(partial(_locked, event=event_name, sql=render(RESUME_WAIT_SQL, schema),
                               params=params))
        if not row[0]:
            raise _lost(checked)
        if not row[3]:
            raise Park(ctx.job_id, row[5])
        result, event_id = row[1], row[2]
    known[checked] = Stored("completed", result, event_id)
    if event_id is None:
        if on_timeout == "raise":
            raise WaitTimedOut(f"no {event_name!r} event matching {json.dumps(match)} before"
                               f" the wait's deadline", event=event_name, step=checked)
        return None
    return result


async def sleep(ctx: Attempt, state: AttemptSteps, name: str, duration: timedelta | float
                ) -> None:
    await drive(state, _sleep(ctx, state, name, duration))


def sleep_sync(ctx: Attempt, state: AttemptSteps, name: str, duration: timedelta | float
               ) -> None:
    drive_sync(state, _sleep(ctx, state, name, duration))


async def wait_for_event(ctx: Attempt, state: AttemptSteps, event: str, match: Any,
                         timeout: timedelta | float | None, name: str | None,
                         on_timeout: OnTimeout) -> Any:
    return await drive(state, _wait(ctx, state, event, match, timeout, name, on_timeout))


def wait_for_event_sync(ctx: Attempt, state: AttemptSteps, event: str, match: Any,
                        timeout: timedelta | float | None, name: str | None,
                        on_timeout: OnTimeout) -> Any:
    return drive_sync(state, _wait(ctx, state, event, match, timeout, name, on_timeout))
