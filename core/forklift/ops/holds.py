"""Pausing and resuming a workflow or a kind: its jobs are not started until the resume.

A pause is a row in ``pauses`` (a kind's name, or a workflow's job id), and the jobs it covers
leave the claimable set: each waiting one (available, scheduled, retryable) is held
``scheduled`` at :data:`~forklift._features.durable.holds.PAUSED_UNTIL`, where it would be
without the pause kept in ``job_holds``. The claim statement does not change, so a job of a kind
nobody paused pays nothing there; the pause holds from the next claim because the jobs are gone
from it when the pause commits. A running job is recorded held too and parks at its next step
boundary (forklift._features.durable.holds); a handler that stores no more steps finishes its
attempt, and its job is not started again until the resume.

New jobs of a paused kind are held by the insert trigger, in their own transaction
(``functions/jobs_wake_v4.sql``). A kind's pause takes, before it holds anything, the lock that
trigger takes shared, so an insert that had not yet seen the pause has committed by then and is
held by the pause itself. Enqueues wait behind a pause waiting for that lock, so it waits at
most :data:`LOCK_WAIT` for an open transaction that inserted jobs, then is refused
(``pause_blocked``) rather than stall every producer. Under the lock it turns on the flag that
tells the trigger to look at ``pauses`` at all; a resume that leaves no kind paused turns it off,
under the same lock, after its own commit (a flag left on costs inserts one statement, never a
missed pause).

The resume deletes the pause and puts back the jobs no other pause still covers: a job whose
time has come (or whose wait an event ended meanwhile) becomes available at once, its queue's
idle workers woken; one that waits for dependencies is looked at again; the rest wait for
their time as before.

A workflow is one job: its steps, sleeps and waits are all in it (jobs it enqueued with
``after=`` are jobs of their own, paused by their kind or their own id).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg

from forklift._base.errors import ForkliftError, JobNotFound
from forklift._base.names import check_name
from forklift._db.sqltext import render
from forklift._features.durable.deps import HELD_UNTIL
from forklift._features.durable.holds import PAUSED_UNTIL
from forklift._jobs.job import LIVE_STATES
from forklift.ops import audit
from forklift.ops.context import OpsContext
from forklift.ops.errors import InvalidFilter, NotPausable, PauseBlocked
from forklift.ops.shape import Shape

__all__ = ["PAUSED_UNTIL", "PauseInfo", "PauseResult", "list_pauses", "pause", "resume"]

TARGETS = ("kind", "workflow")

# The lock the insert trigger takes shared (functions/jobs_wake_v4.sql).
LOCK_SQL = "SELECT pg_advisory_xact_lock(hashtext('forklift.pauses'), 0)"
#: How long a kind's pause (or a resume's flag update) waits for open inserts.
LOCK_WAIT = "2s"
# The insert trigger's flag: on while some kind may be paused (schema.sql, kind_pauses_flag).
FLAG_ON_SQL = "SELECT setval('{s}.kind_pauses_flag', 1, true)"
FLAG_OFF_SQL = """
SELECT setval('{s}.kind_pauses_flag', 1, false)
WHERE NOT EXISTS (SELECT FROM {s}.pauses WHERE target = 'kind')
"""
UPSERT_SQL = """
INSERT INTO {s}.pauses (target, name, paused_by, reason) VALUES (%s, %s, %s, %s)
ON CONFLICT (target, name) DO UPDATE SET reason = coalesce(EXCLUDED.reason, pauses.reason)
RETURNING paused_at, paused_by, reason
"""
# The jobs a pause covers, as a predicate on jobs ``j``.
_COVER = {"kind": "j.kind = %(name)s", "workflow": "j.id = %(id)s"}
HOLD_SQL = """
WITH c AS (
    SELECT j.id, j.state, j.run_at FROM {s}.jobs j
    WHERE {cover} AND j.state = ANY ('{scheduled,available,retryable,running}'::text[])
      AND NOT EXISTS (SELECT FROM {s}.job_holds h WHERE h.job_id = j.id)
    FOR UPDATE OF j
), h AS (
    INSERT INTO {s}.job_holds (job_id, state, run_at)
    SELECT id, state, run_at FROM c ON CONFLICT (job_id) DO NOTHING
), moved AS (
    UPDATE {s}.jobs t SET state = 'scheduled', run_at = %(paused)s
    FROM c WHERE t.id = c.id AND c.state <> 'running'
    RETURNING t.id
)
SELECT (SELECT count(*) FROM moved), (SELECT count(*) FROM c WHERE state = 'running')
"""
DELETE_SQL = "DELETE FROM {s}.pauses WHERE target = %s AND name = %s RETURNING 1"
# Put back every held job of this pause that no other pause covers. A job still held where the
# pause put it goes back to its kept state and time; one that ran on (a running job that
# finished, failed or parked) keeps what it became. Then: due, or a wait an event ended while
# held (no parked step left, no dependency) -> available now.
RELEASE_SQL = """
WITH gone AS (
    DELETE FROM {s}.job_holds h USING {s}.jobs j
    WHERE h.job_id = j.id AND {cover}
      AND NOT EXISTS (SELECT FROM {s}.pauses p
                      WHERE (p.target = 'kind' AND p.name = j.kind)
                         OR (p.target = 'workflow' AND p.name = j.id::text))
    RETURNING h.job_id, h.state, h.run_at
), back AS (
    SELECT j.id,
           CASE WHEN j.run_at = %(paused)s THEN g.state ELSE j.state END AS state,
           CASE WHEN j.run_at = %(paused)s THEN g.run_at ELSE j.run_at END AS run_at
    FROM gone g JOIN {s}.jobs j ON j.id = g.job_id
    WHERE j.state = ANY ('{scheduled,available,retryable}'::text[])
), ready AS (
    SELECT b.*, (b.state = 'available' OR b.run_at <= now()
                 OR (b.run_at = %(held)s
                     AND NOT EXISTS (SELECT FROM {s}.job_steps x WHERE x.job_id = b.id
                                     AND x.state IN ('sleeping', 'waiting'))
                     AND NOT EXISTS (SELECT FROM {s}.job_deps d WHERE d.job_id = b.id))
                ) AS now_ready
    FROM back b
), moved AS (
    UPDATE {s}.jobs t SET
        state = CASE WHEN r.now_ready THEN 'available' ELSE r.state END,
        run_at = CASE WHEN r.now_ready AND r.run_at > now() THEN now() ELSE r.run_at END
    FROM ready r WHERE t.id = r.id
    RETURNING t.id, t.queue, t.state, t.run_at
)
SELECT (SELECT count(*) FROM gone),
       coalesce((SELECT array_agg(DISTINCT queue) FROM moved WHERE state = 'available'), '{}'),
       (SELECT count(*) FROM moved WHERE state = 'available'),
       coalesce((SELECT array_agg(id) FROM moved
                 WHERE state = 'scheduled' AND run_at = %(held)s), '{}')
"""
# Then, in their own statements (each reads what the release wrote): dependents looked at
# again, and the idle workers of the queues that got work back woken.
DEPS_SQL = "SELECT {s}.deps_release(id) FROM unnest(%s::bigint[]) AS d(id)"
WAKE_SQL = "SELECT {s}.wake_queue(q) FROM unnest(%s::text[]) AS w(q)"
LIST_SQL = """
SELECT p.target, p.name, p.paused_by, p.paused_at, p.reason,
       (SELECT count(*) FROM {s}.job_holds h JOIN {s}.jobs j ON j.id = h.job_id
        WHERE (p.target = 'kind' AND j.kind = p.name)
           OR (p.target = 'workflow' AND j.id::text = p.name)) AS held
FROM {s}.pauses p ORDER BY p.paused_at, p.target, p.name
"""
JOB_SQL = "SELECT state, kind FROM {s}.jobs WHERE id = %s"


@dataclass(frozen=True)
class PauseInfo(Shape):
    """A pause in force: what it covers, who set it and why, how many jobs it holds."""

    target: str
    name: str
    paused_by: str | None
    paused_at: datetime
    reason: str | None
    held: int

    @property
    def text(self) -> str:
        what = f"workflow {self.name}" if self.target == "workflow" else f"kind {self.name}"
        why = f": {self.reason}" if self.reason else ""
        return f"{what} paused by {self.paused_by or 'unknown'}{why} ({self.held} held)"


@dataclass(frozen=True)
class PauseResult(Shape):
    """What a pause or a resume did."""

    action: str  # paused | resumed
    target: str
    name: str
    #: waiting jobs held now (a pause) or put back (a resume)
    jobs: int
    #: a pause: running jobs that park at their next step boundary; a resume: jobs made
    #: available at once
    running: int = 0
    available: int = 0
    #: a resume of something that was not paused changes nothing
    changed: bool = True

    @property
    def text(self) -> str:
        what = f"workflow {self.name}" if self.target == "workflow" else f"kind {self.name}"
        if self.action == "paused":
            park = (f"; {self.running} running park at their next step" if self.running
                    else "")
            return f"{what} paused: {self.jobs} waiting held{park}"
        if not self.changed:
            return f"{what} was not paused: nothing changed"
        return f"{what} resumed: {self.jobs} put back, {self.available} available now"


def _target(target: str, name: str | int) -> tuple[str, dict[str, Any]]:
    if target == "kind":
        kind = check_name(name, "kind", field="kind")
        return kind, {"name": kind}
    if target == "workflow":
        if isinstance(name, bool) or not isinstance(name, int) or name < 1:
            raise InvalidFilter(f"a workflow is named by its job id, not {name!r}",
                                field="job_id")
        return str(name), {"id": name}
    raise InvalidFilter(f"pause target must be one of {', '.join(TARGETS)}, not {target!r}",
                        field="target")


def _workflow_job(conn: psycopg.Connection[Any], ctx: OpsContext, job_id: int) -> None:
    row = conn.execute(render(JOB_SQL, ctx.schema), (job_id,)).fetchone()
    if row is None:
        raise JobNotFound(f"no job with id {job_id}: check the id with `forklift jobs list`",
                          job_id=job_id)
    if row[0] not in LIVE_STATES:
        raise NotPausable(f"job {job_id} is {row[0]}: only a live workflow can be paused",
                          job_id=job_id, state=row[0])


def pause(conn: psycopg.Connection[Any], ctx: OpsContext, target: str, name: str | int, *,
          reason: str | None = None) -> PauseResult:
    """Pause a kind (``target="kind"``, its name) or one workflow (``"workflow"``, its job
    id): see the module. Pausing again keeps the pause (a new reason replaces the old)."""
    action = f"{target}s.pause"
    ctx.require_write(f"{target}s pause")
    reason = audit.clean_reason(reason)
    audited: dict[str, Any] = {"target": target, "name": str(name)}
    try:
        key, params = _target(target, name)
        audited["name"] = key
        with conn.transaction():
            if target == "workflow":
                _workflow_job(conn, ctx, int(key))
            if target == "kind":
                _lock_inserts(conn)  # inserts that missed the pause have committed
                conn.execute(render(FLAG_ON_SQL, ctx.schema))
            conn.execute(render(UPSERT_SQL, ctx.schema), (target, key, ctx.actor, reason))
            sql = render(HOLD_SQL.replace("{cover}", _COVER[target]), ctx.schema)
            row = conn.execute(sql, {**params, "paused": PAUSED_UNTIL}).fetchone()
            held, running = (int(row[0]), int(row[1])) if row else (0, 0)
            audit.record(conn, ctx, action, {**audited, "held": held, "running": running},
                         count=held + running, reason=reason)
    except ForkliftError as exc:
        audit.record_refusal(conn, ctx, action, audited, exc.code, reason)
        raise
    return PauseResult("paused", target, key, held, running=running)


def resume(conn: psycopg.Connection[Any], ctx: OpsContext, target: str, name: str | int, *,
           reason: str | None = None) -> PauseResult:
    """Lift a pause: its jobs that no other pause covers are put back (see the module)."""
    action = f"{target}s.resume"
    ctx.require_write(f"{target}s resume")
    reason = audit.clean_reason(reason)
    audited: dict[str, Any] = {"target": target, "name": str(name)}
    try:
        key, params = _target(target, name)
        audited["name"] = key
        with conn.transaction():
            existed = conn.execute(render(DELETE_SQL, ctx.schema), (target, key)).fetchone()
            sql = render(RELEASE_SQL.replace("{cover}", _COVER[target]), ctx.schema)
            row = conn.execute(sql, {**params, "paused": PAUSED_UNTIL, "held": HELD_UNTIL}
                               ).fetchone()
            assert row is not None
            back, queues, available, dependents = int(row[0]), row[1], int(row[2]), row[3]
            if dependents:
                conn.execute(render(DEPS_SQL, ctx.schema), (dependents,))
            if queues:
                conn.execute(render(WAKE_SQL, ctx.schema), (queues,))
            audit.record(conn, ctx, action, {**audited, "put_back": back,
                                             "available": available},
                         count=back, reason=reason,
                         outcome="done" if existed else "not_paused")
    except ForkliftError as exc:
        audit.record_refusal(conn, ctx, action, audited, exc.code, reason)
        raise
    if target == "kind" and existed:
        _flag_off_unless_paused(conn, ctx)
    return PauseResult("resumed", target, key, back, available=available,
                       changed=existed is not None or back > 0)


def _lock_inserts(conn: psycopg.Connection[Any]) -> None:
    """Wait (at most LOCK_WAIT) until no transaction is inserting jobs, and keep them waiting
    until this one ends."""
    conn.execute(f"SET LOCAL lock_timeout = '{LOCK_WAIT}'")
    try:
        conn.execute(LOCK_SQL)
    except psycopg.errors.LockNotAvailable:
        raise PauseBlocked(
            f"a transaction that inserted jobs stayed open for over {LOCK_WAIT}, and a kind's"
            " pause waits for every open insert (enqueues wait behind it meanwhile): commit or"
            " end it, then pause again (`forklift health` names long transactions)") from None
    conn.execute("SET LOCAL lock_timeout = DEFAULT")


def _flag_off_unless_paused(conn: psycopg.Connection[Any], ctx: OpsContext) -> None:
    """After a kind's resume: with no kind paused any more, inserts stop looking at pauses.
    Under the pause lock, so a pause going on meanwhile keeps it on; if open inserts keep the
    lock, the flag stays on (harmless: one statement an insert) until the next resume."""
    try:
        with conn.transaction():
            _lock_inserts(conn)
            conn.execute(render(FLAG_OFF_SQL, ctx.schema))
    except PauseBlocked:
        pass


def list_pauses(conn: psycopg.Connection[Any], ctx: OpsContext) -> list[PauseInfo]:
    """The pauses in force, oldest first."""
    rows = conn.execute(render(LIST_SQL, ctx.schema)).fetchall()
    return [PauseInfo(t, n, by, at, why, int(held)) for t, n, by, at, why, held in rows]
