"""The queue's side of an explanation, shared by a job's and a queue's: one statement of
facts about the queue, its workers, and what stops its available jobs from being claimed."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg

from forklift._base.words import plural
from forklift._db.sqltext import render
from forklift.ops._reason import Reason, when
from forklift.ops.context import OpsContext
from forklift.ops.queues import QueueInfo, get_queue
from forklift.ops.workers import WorkerInfo, list_workers

__all__ = ["QUEUE_FACTS_SQL", "QueueFacts", "blockers", "queue_facts", "unknown_kinds", "unknown_reason"]

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


@dataclass(frozen=True)
class QueueFacts:
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


def queue_facts(conn: psycopg.Connection[Any], ctx: OpsContext, queue: str) -> QueueFacts:
    row = conn.execute(render(QUEUE_FACTS_SQL, ctx.schema), {"q": queue}).fetchone()
    assert row is not None
    workers = [w for w in list_workers(conn, ctx) if queue in w.queues]
    return QueueFacts(
        row[0], int(row[1]), row[2], int(row[3]), row[4], int(row[5]), int(row[6]), row[7],
        get_queue(conn, ctx, queue), workers,
    )


def blockers(f: QueueFacts, queue: str) -> list[Reason]:
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


def unknown_kinds(f: QueueFacts, kinds: list[str]) -> list[str]:
    """Kinds no live worker of the queue has a handler for (when some live worker listens:
    with none at all, no_worker says it). A worker claims only the kinds it registered."""
    live = [w for w in f.workers if w.live]
    if not live or any(not w.kinds for w in live):  # a row without kinds: an older worker
        return []
    known = {k for w in live for k in w.kinds}
    return [k for k in kinds if k not in known]


def unknown_reason(f: QueueFacts, queue: str, kind: str, waiting: int | None) -> Reason:
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
