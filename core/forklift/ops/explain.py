"""Why isn't this job (or this queue) moving? Plain sentences built from facts in the database.

Each :class:`Reason` has a stable ``code`` (for scripts and tests), a sentence for people, and
the facts it was built from. Codes: scheduled, backing_off, due, queue_paused, pause_expired,
concurrency_full, no_worker, workers_busy, no_leader, jobs_ahead, next_in_line, running,
cancel_requested, worker_stale, lease_expired, completed, cancelled, dead, idle, moving,
unknown_kind (live workers listen on the queue, but none registered the job's kind: it waits
for one that does, e.g. until a rolling deploy finishes), weighted (an available job that takes
more than one slot: it starts once a worker has that many free, and reserves them),
behind_weighted (a job ahead of it in a weighted queue's claim order takes more than one slot
and waits for room, which nothing behind it takes); and from
flow control (forklift.ops.flow_explain): key_full, rate_limited, key_unrecorded, fair_share.
"""

from __future__ import annotations

from typing import Any

import psycopg

from forklift._base.words import plural
from forklift._db.sqltext import render
from forklift._features.durable.holds import PAUSED_UNTIL
from forklift._jobs.job import Job
from forklift.ops._queue_facts import (
    QueueFacts,
    blockers,
    queue_facts,
    unknown_kinds,
    unknown_reason,
)
from forklift.ops._reason import Explanation, Reason, ago, when
from forklift.ops.context import OpsContext
from forklift.ops.jobs import COUNT_CAP, get_job

__all__ = ["Explanation", "Reason", "ago", "explain_job", "explain_queue", "when"]

AHEAD_SQL = """
SELECT count(*) FROM (
    SELECT 1 FROM {s}.jobs
    WHERE state = 'available' AND queue = %s AND (priority, run_at, id) < (%s, %s, %s)
    LIMIT %s
) x
"""
# The first available job ahead in claim order that takes more than one slot (a weighted
# queue's only): the room it gathers is kept from the jobs behind it.
HEAVY_AHEAD_SQL = """
SELECT id, weight FROM {s}.jobs
WHERE state = 'available' AND queue = %s AND (priority, run_at, id) < (%s, %s, %s)
  AND weight IS NOT NULL
ORDER BY priority, run_at, id LIMIT 1
"""
NOW_SQL = "SELECT now()"
# Available jobs per kind (the claim index leads with queue, kind).
KINDS_SQL = """
SELECT kind, count(*) FROM {s}.jobs WHERE state = 'available' AND queue = %s
GROUP BY kind ORDER BY kind
"""


# -- one job ----------------------------------------------------------------------------------
def explain_job(conn: psycopg.Connection[Any], ctx: OpsContext, job_id: int) -> Explanation:
    job = get_job(conn, ctx.schema, job_id)
    f = queue_facts(conn, ctx, job.queue)
    reasons = _job_reasons(conn, ctx, job, f)
    return Explanation("job", job.queue, reasons[0].text, reasons, job.id, job.state)


def _last_error(job: Job) -> dict[str, Any]:
    return job.errors[-1] if job.errors else {}


def _last_error_words(code: str, kind: str | None, message: str | None) -> str:
    """``last error invalid_payload: ...``; a plain exception (code ``error``) is named by its
    type, never "last error error: ..."."""
    label = (kind or "") if code == "error" else code
    return "last error" + (f" {label}" if label else "") + (f": {message}" if message else "")


def _job_reasons(
    conn: psycopg.Connection[Any], ctx: OpsContext, job: Job, f: QueueFacts
) -> list[Reason]:
    now = f.now
    err = _last_error(job)
    if job.state == "completed":
        assert job.finished_at is not None
        return [Reason(
            "completed",
            f"job {job.id} completed {when(job.finished_at, now)} after"
            f" {plural(job.attempt, 'attempt')};"
            " it will not run again unless requeued",
            {"finished_at": job.finished_at, "attempt": job.attempt},
        )]
    if job.state == "cancelled":
        assert job.finished_at is not None
        why = err.get("message") if err.get("code") == "cancelled" else None
        return [Reason(
            "cancelled",
            f"job {job.id} was cancelled {when(job.finished_at, now)}"
            + (f" ({why})" if why else "") + "; requeue it to run it again",
            {"finished_at": job.finished_at, "message": why},
        )]
    if job.state == "dead":
        assert job.finished_at is not None
        code = err.get("code") or "unknown"
        exhausted = job.attempt >= job.max_attempts
        why = (
            f"its attempts ran out ({job.attempt} of {job.max_attempts})" if exhausted
            else f"attempt {job.attempt} failed terminally"
        )
        message = err.get("message")
        return [Reason(
            "dead",
            f"job {job.id} is dead since {when(job.finished_at, now)}: {why};"
            f" {_last_error_words(code, err.get('type'), message)}; requeue it once the cause"
            " is fixed",
            {"finished_at": job.finished_at, "attempt": job.attempt,
             "max_attempts": job.max_attempts, "code": code, "message": message,
             "exhausted": exhausted},
        )]
    if job.state == "running":
        return _running_reasons(job, f)

    reasons: list[Reason] = []
    if job.state == "scheduled" and job.run_at == PAUSED_UNTIL:
        return [Reason(
            "paused",
            f"job {job.id} is held by a pause of its workflow or of its kind {job.kind}; it"
            f" waits until resumed (forklift workflows pauses lists the pauses)",
            {"kind": job.kind},
        )]
    if job.state in ("scheduled", "retryable"):
        if job.run_at > now:
            if job.state == "retryable":
                code = err.get("code") or "error"
                reasons.append(Reason(
                    "backing_off",
                    f"job {job.id} is backing off after attempt {job.attempt} failed ({code});"
                    f" it retries at {when(job.run_at, now)}",
                    {"attempt": job.attempt, "retry_at": job.run_at, "code": code,
                     "message": err.get("message")},
                ))
            else:
                reasons.append(Reason(
                    "scheduled",
                    f"job {job.id} is scheduled for later: it becomes available at"
                    f" {when(job.run_at, now)}",
                    {"run_at": job.run_at},
                ))
            return reasons
        reasons.append(Reason(
            "due",
            f"job {job.id} is due since {when(job.run_at, now)} and waits for the leader to make"
            " it available (within a second when a worker leads)",
            {"run_at": job.run_at},
        ))
        if f.leader is None:
            reasons.append(Reason(
                "no_leader",
                "no worker is leading, so nothing moves due jobs to available: start a worker",
                {},
            ))
    reasons += blockers(f, job.queue)
    unknown = unknown_kinds(f, [job.kind])
    if unknown:
        reasons.insert(0, unknown_reason(f, job.queue, job.kind, None))
    if job.state == "available":
        from forklift.ops import flow_explain  # keys, rates, fair share

        reasons += flow_explain.job_reasons(conn, ctx, job)
        if job.weight is not None:
            reasons.append(_weight_reason(job, job.weight, f))
        if f.info is not None and f.info.weighted:
            heavy = conn.execute(render(HEAVY_AHEAD_SQL, ctx.schema),
                                 (job.queue, job.priority, job.run_at, job.id)).fetchone()
            if heavy is not None:
                reasons.append(Reason(
                    "behind_weighted",
                    f"job {heavy[0]} ahead of it in claim order weighs {heavy[1]} slots and"
                    " waits for room: the slots it gathers are not given to the jobs behind it",
                    {"job_id": heavy[0], "weight": heavy[1]}))
        row = conn.execute(
            render(AHEAD_SQL, ctx.schema),
            (job.queue, job.priority, job.run_at, job.id, COUNT_CAP + 1),
        ).fetchone()
        ahead = int(row[0]) if row else 0
        capped = ahead > COUNT_CAP
        if ahead:
            reasons.append(Reason(
                "jobs_ahead",
                f"{min(ahead, COUNT_CAP):,}{'+' if capped else ''}"
                f" {'job' if ahead == 1 else 'jobs'} of queue {job.queue!r}"
                f" {'is' if ahead == 1 else 'are'} ahead of it at higher or equal priority",
                {"ahead": min(ahead, COUNT_CAP), "capped": capped, "priority": job.priority},
            ))
        elif not [r for r in reasons if r.code not in ("pause_expired", "unknown_kind")]:
            reasons.append(Reason(
                "next_in_line",
                f"job {job.id} is next in line on queue {job.queue!r}: a worker should claim it"
                " within a poll interval",
                {},
            ))
    return reasons


def _weight_reason(job: Job, weight: int, f: QueueFacts) -> Reason:
    """Why a job that takes ``weight`` slots may wait with slots free: it starts only once a
    worker has that many free (all of them, when it weighs more than the worker has), and no
    job behind it in claim order takes the slots it gathers. Read from the facts the
    explanation already holds (the job's row, its queue's and workers'), no statement more."""
    live = [w for w in f.workers if w.live and w.state == "running"]
    most = max((w.slots for w in live), default=None)
    free = max((max(w.slots - w.in_use, 0) for w in live), default=None)
    need = weight if most is None else min(weight, most)
    text = (f"job {job.id} weighs {weight} slots: it starts once a worker has {need} free, and"
            " nothing behind it in claim order takes them")
    if most is not None and weight > most:
        text += f" (it weighs more than any live worker's {most} slots: it runs alone on one)"
    limit = f.info.concurrency if f.info is not None else None
    if limit is not None and weight > limit:
        text += (f"; it weighs more than queue {job.queue!r}'s concurrency limit of {limit}:"
                 " it runs alone under it")
    if free is not None:
        text += f"; the most free on a live worker of the queue now: {free}"
    return Reason("weighted", text, {"weight": weight, "needs_free": need,
                                     "most_free": free, "queue_limit": limit})


def _running_reasons(job: Job, f: QueueFacts) -> list[Reason]:
    now = f.now
    since = when(job.attempted_at, now) if job.attempted_at else "an unknown time"
    reasons = [Reason(
        "running",
        f"job {job.id} is running on worker {job.worker_id} since {since}"
        f" (attempt {job.attempt} of {job.max_attempts})",
        {"worker": job.worker_id, "since": job.attempted_at, "attempt": job.attempt,
         "lease_expires_at": job.lease_expires_at},
    )]
    if job.cancel_requested_at is not None:
        reasons.append(Reason(
            "cancel_requested",
            f"a cancel was requested {when(job.cancel_requested_at, now)}; the worker stops the"
            " handler and records it cancelled (or completed, if it had already finished)",
            {"at": job.cancel_requested_at},
        ))
    expires = job.lease_expires_at
    if expires is not None and expires < now:
        reasons.append(Reason(
            "lease_expired",
            f"its lease expired {when(expires, now)}: the worker stopped heartbeating and the"
            " leader will rescue the job (retry, or dead when out of attempts)",
            {"lease_expires_at": expires},
        ))
        return reasons
    holder = next((w for w in f.workers if w.id == job.worker_id), None)
    if holder is None or not holder.live:
        reasons.append(Reason(
            "worker_stale",
            f"worker {job.worker_id} is not heartbeating; if it is gone the job is rescued when"
            f" its lease expires at {when(expires, now) if expires else 'its expiry'}",
            {"lease_expires_at": expires},
        ))
    return reasons


# -- one queue --------------------------------------------------------------------------------
def explain_queue(conn: psycopg.Connection[Any], ctx: OpsContext, queue: str) -> Explanation:
    f = queue_facts(conn, ctx, queue)
    if f.info is None and not f.workers and not (f.available or f.running or f.next_due):
        from forklift.ops.errors import QueueNotFound

        raise QueueNotFound(
            f"no queue named {queue!r}: list queues with `forklift queues list`", queue=queue
        )
    reasons = blockers(f, queue)
    from forklift.ops import flow_explain  # keys, rates, fair share

    reasons += flow_explain.queue_reasons(conn, ctx, queue)
    facts = {"available": f.available, "running": f.running,
             "completed_last_5_minutes": f.recent_completed}
    if f.available and f.oldest_available is not None:
        reasons.append(Reason(
            "waiting",
            f"{plural(f.available, 'job')} {'is' if f.available == 1 else 'are'} available;"
            f" the oldest has waited"
            f" {ago(f.now - f.oldest_available)}",
            {**facts, "oldest_available_at": f.oldest_available},
        ))
    if f.overdue:
        reasons.append(Reason(
            "due",
            f"{plural(f.overdue, 'scheduled or retrying job')}"
            f" {'is due and waits' if f.overdue == 1 else 'are due and wait'} to be made available"
            + ("" if f.leader else "; no worker is leading, start one"),
            {"overdue": f.overdue, "leader": f.leader},
        ))
        if f.leader is None:
            reasons.append(Reason("no_leader", "no worker is leading: start a worker", {}))
    if f.available:
        waiting = dict(conn.execute(render(KINDS_SQL, ctx.schema), (queue,)).fetchall())
        for kind in unknown_kinds(f, list(waiting)):
            reasons.append(unknown_reason(f, queue, kind, int(waiting[kind])))
    blocked = any(r.code in ("queue_paused", "concurrency_full", "no_worker", "workers_busy")
                  for r in reasons)
    if not blocked:
        if f.available == 0 and f.running == 0:
            nxt = f" the next scheduled job is due {when(f.next_due, f.now)}" if f.next_due else ""
            reasons.insert(0, Reason(
                "idle",
                f"queue {queue!r} has no work waiting{';' + nxt if nxt else ''}",
                {**facts, "next_due": f.next_due},
            ))
        else:
            reasons.insert(0, Reason(
                "moving",
                f"queue {queue!r} is moving: {f.running} running,"
                f" {f.recent_completed:,} completed in the last 5 minutes",
                facts,
            ))
    return Explanation("queue", queue, reasons[0].text, reasons)
