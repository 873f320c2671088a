"""Why isn't this job (or this queue) moving? Plain sentences built from facts in the database.

Each :class:`Reason` has a stable ``code`` (for scripts and tests), a sentence for people, and
the facts it was built from. Codes: scheduled, backing_off, due, queue_paused, pause_expired,
concurrency_full, no_worker, workers_busy, no_leader, jobs_ahead, next_in_line, running,
cancel_requested, worker_stale, lease_expired, completed, cancelled, dead, idle, moving,
unknown_kind (live workers listen on the queue, but none registered the job's kind: it waits
for one that does, e.g. until a rolling deploy finishes); and from flow control
(forklift.ops.flow_explain): key_full, rate_limited, key_unrecorded, fair_share.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import psycopg

from forklift._job import Job
from forklift._sqltext import render
from forklift._words import plural
from forklift.ops.context import OpsContext
from forklift.ops.jobs import COUNT_CAP, get_job
from forklift.ops.queues import QueueInfo, get_queue
from forklift.ops.shape import Shape
from forklift.ops.workers import WorkerInfo, list_workers

__all__ = ["Explanation", "Reason", "ago", "explain_job", "explain_queue", "when"]

AHEAD_SQL = """
SELECT count(*) FROM (
    SELECT 1 FROM {s}.jobs
    WHERE state = 'available' AND queue = %s AND (priority, run_at, id) < (%s, %s, %s)
    LIMIT %s
) x
"""
QUEUE_FACTS_SQL = """
SELECT
    now(),
    (SELECT count(*) FROM {s}.jobs WHERE state = 'available' AND queue = %(q)s),
    (SELECT min(run_at) FROM {s}.jobs WHERE state = 'available' AND queue = %(q)s),
    (SELECT count(*) FROM {s}.jobs WHERE state = 'running' AND queue = %(q)s),
    (SELECT min(run_at) FROM {s}.jobs WHERE state IN ('scheduled', 'retryable') AND queue = %(q)s),
    (SELECT count(*) FROM {s}.jobs
        WHERE state IN ('scheduled', 'retryable') AND queue = %(q)s AND run_at <= now()),
    (SELECT count(*) FROM {s}.jobs
        WHERE state = 'completed' AND finished_at > now() - interval '5 minutes' AND queue = %(q)s),
    (SELECT worker_id FROM {s}.leader WHERE name = 'leader' AND expires_at > now())
"""
NOW_SQL = "SELECT now()"
# Available jobs per kind (the claim index leads with queue, kind).
KINDS_SQL = """
SELECT kind, count(*) FROM {s}.jobs WHERE state = 'available' AND queue = %s
GROUP BY kind ORDER BY kind
"""


@dataclass(frozen=True)
class Reason(Shape):
    code: str
    text: str
    facts: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Explanation(Shape):
    """For a job: ``subject`` is ``"job"``, ``job_id`` and ``state`` are set; for a queue,
    ``subject`` is ``"queue"``. ``summary`` is the first reason's text."""

    subject: str
    queue: str
    summary: str
    reasons: list[Reason]
    job_id: int | None = None
    state: str | None = None

    @property
    def codes(self) -> list[str]:
        return [r.code for r in self.reasons]


def ago(delta: timedelta) -> str:
    s = abs(delta.total_seconds())
    if s < 90:
        text = f"{s:.0f}s"
    elif s < 5400:
        text = f"{s / 60:.0f}m"
    elif s < 172800:
        text = f"{s / 3600:.1f}h"
    else:
        text = f"{s / 86400:.1f}d"
    return text


def when(at: datetime, now: datetime) -> str:
    delta = at - now
    rel = f"in {ago(delta)}" if delta.total_seconds() >= 0 else f"{ago(delta)} ago"
    return f"{at.isoformat(timespec='seconds')} ({rel})"


# -- the queue's side: shared by both explanations ---------------------------------------------
@dataclass(frozen=True)
class _QueueFacts:
    now: datetime
    available: int
    oldest_available: datetime | None
    running: int
    next_due: datetime | None
    overdue: int
    recent_completed: int
    leader: str | None
    info: QueueInfo | None
    workers: list[WorkerInfo]


def _queue_facts(conn: psycopg.Connection[Any], ctx: OpsContext, queue: str) -> _QueueFacts:
    row = conn.execute(render(QUEUE_FACTS_SQL, ctx.schema), {"q": queue}).fetchone()
    assert row is not None
    workers = [w for w in list_workers(conn, ctx) if queue in w.queues]
    return _QueueFacts(
        row[0], int(row[1]), row[2], int(row[3]), row[4], int(row[5]), int(row[6]), row[7],
        get_queue(conn, ctx, queue), workers,
    )


def _blockers(f: _QueueFacts, queue: str) -> list[Reason]:
    """What stops any available job of the queue from being claimed right now."""
    out: list[Reason] = []
    info = f.info
    if info is not None and info.paused:
        since = f" since {when(info.paused_at, f.now)}" if info.paused_at else ""
        by = info.paused_by or "someone"
        why = f" ({info.pause_reason})" if info.pause_reason else ""
        until = (
            f"; the pause ends by itself at {when(info.pause_expires_at, f.now)}"
            if info.pause_expires_at else "; it stays paused until someone resumes it"
        )
        out.append(Reason(
            "queue_paused",
            f"queue {queue!r} is paused by {by}{since}{why}{until}",
            {"paused_by": info.paused_by, "paused_at": info.paused_at,
             "reason": info.pause_reason, "expires_at": info.pause_expires_at},
        ))
    elif info is not None and info.paused_flag and info.pause_expires_at is not None:
        out.append(Reason(
            "pause_expired",
            f"queue {queue!r} was paused by {info.paused_by or 'someone'}; the pause expired at"
            f" {when(info.pause_expires_at, f.now)}, so workers claim from it again",
            {"expired_at": info.pause_expires_at},
        ))
    if info is not None and info.concurrency is not None and f.running >= info.concurrency:
        out.append(Reason(
            "concurrency_full",
            f"queue {queue!r} is at its concurrency limit: {f.running} running of at most"
            f" {info.concurrency}",
            {"running": f.running, "limit": info.concurrency},
        ))
    live = [w for w in f.workers if w.live and w.state == "running"]
    if not live:
        draining = [w.id for w in f.workers if w.live and w.state == "draining"]
        text = f"no live worker listens on queue {queue!r}"
        if draining:
            text += f" (draining, not claiming: {', '.join(draining)})"
        else:
            text += ": start one with `forklift worker --queues " + queue + "`"
        out.append(Reason("no_worker", text, {"draining": draining}))
    elif all(w.in_use >= w.slots for w in live):
        out.append(Reason(
            "workers_busy",
            f"every slot of the {plural(len(live), 'worker')} listening on {queue!r} is busy"
            f" ({sum(w.in_use for w in live)} of {sum(w.slots for w in live)})",
            {"workers": [w.id for w in live]},
        ))
    return [r for r in out if r.code != "pause_expired"] + [
        r for r in out if r.code == "pause_expired"
    ]


def _unknown_kinds(f: _QueueFacts, kinds: list[str]) -> list[str]:
    """Kinds no live worker of the queue has a handler for (when some live worker listens:
    with none at all, no_worker says it). A worker claims only the kinds it registered."""
    live = [w for w in f.workers if w.live]
    if not live or any(not w.kinds for w in live):  # a row without kinds: an older worker
        return []
    known = {k for w in live for k in w.kinds}
    return [k for k in kinds if k not in known]


def _unknown_reason(f: _QueueFacts, queue: str, kind: str, waiting: int | None) -> Reason:
    count = (f" ({plural(waiting, 'job')} {'waits' if waiting == 1 else 'wait'})"
             if waiting is not None else "")
    return Reason(
        "unknown_kind",
        f"no worker knows kind {kind!r}{count}: the live workers on queue {queue!r} have no"
        " handler for it, so none claims it; it waits for a worker that registers the kind"
        " (e.g. until a rolling deploy finishes)",
        {"kind": kind, "waiting": waiting,
         "workers": [w.id for w in f.workers if w.live]},
    )


# -- one job ----------------------------------------------------------------------------------
def explain_job(conn: psycopg.Connection[Any], ctx: OpsContext, job_id: int) -> Explanation:
    job = get_job(conn, ctx.schema, job_id)
    f = _queue_facts(conn, ctx, job.queue)
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
    conn: psycopg.Connection[Any], ctx: OpsContext, job: Job, f: _QueueFacts
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
    reasons += _blockers(f, job.queue)
    unknown = _unknown_kinds(f, [job.kind])
    if unknown:
        reasons.insert(0, _unknown_reason(f, job.queue, job.kind, None))
    if job.state == "available":
        from forklift.ops import flow_explain  # keys, rates, fair share

        reasons += flow_explain.job_reasons(conn, ctx, job)
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


def _running_reasons(job: Job, f: _QueueFacts) -> list[Reason]:
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
    f = _queue_facts(conn, ctx, queue)
    if f.info is None and not f.workers and not (f.available or f.running or f.next_due):
        from forklift.ops.errors import QueueNotFound

        raise QueueNotFound(
            f"no queue named {queue!r}: list queues with `forklift queues list`", queue=queue
        )
    reasons = _blockers(f, queue)
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
        for kind in _unknown_kinds(f, list(waiting)):
            reasons.append(_unknown_reason(f, queue, kind, int(waiting[kind])))
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
