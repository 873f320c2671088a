"""Rates (token buckets) as an operator reads and sets them: parsing ``100/s``, the bucket of a
key value or a queue right now, and a queue's rate and fair share (``forklift queues rate``,
``forklift queues fair``).

A bucket holds up to ``burst`` tokens and gains ``limit / per`` a second; a claim takes one per
job it starts. Its row stores the tokens left at the last claim and when, so what it holds now
is computed: ``min(burst, tokens + elapsed * limit / per)``. A limited job waits for a token;
it never fails.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg

from forklift._base.errors import ConfigError
from forklift._base.names import check_name
from forklift._db.sqltext import channel, render
from forklift._features.flow.keys import Rate
from forklift.ops import audit
from forklift.ops.context import OpsContext
from forklift.ops.errors import InvalidFilter, QueueNotFound
from forklift.ops.queues import WAKE_SQL, QueueInfo, _check_name, get_queue
from forklift.ops.shape import Shape

__all__ = ["WAITING_CAP", "Bucket", "FlowQueue", "QueueFlow", "RateInfo", "bucket", "flow_queues",
           "parse_rate", "queue_flow", "rate_info", "set_fair", "set_queue_rate"]

QUEUE_RATE_SQL = """
INSERT INTO {s}.queues AS q (name, flow, rate_limit, rate_per, rate_burst)
VALUES (%(q)s, true, %(limit)s, %(per)s, %(burst)s)
ON CONFLICT (name) DO UPDATE SET flow = true, rate_limit = excluded.rate_limit,
    rate_per = excluded.rate_per, rate_burst = excluded.rate_burst, updated_at = now()
"""
# A queue's bucket row: the claim locks it like a key value's (created here so the first claim
# after the change finds it).
QUEUE_BUCKET_SQL = "INSERT INTO {s}.flow_values (key) VALUES ('@' || %s) ON CONFLICT DO NOTHING"
QUEUE_FAIR_SQL = """
INSERT INTO {s}.queues AS q (name, flow, fair) VALUES (%(q)s, true, %(fair)s)
ON CONFLICT (name) DO UPDATE SET flow = true, fair = excluded.fair, updated_at = now()
"""
QUEUE_FLOW_SQL = """
SELECT q.flow, q.fair, q.rate_limit, q.rate_per, q.rate_burst, v.tokens, v.refilled_at, now()
FROM {s}.queues q LEFT JOIN {s}.flow_values v ON v.key = '@' || q.name WHERE q.name = %s
"""
FLOW_QUEUES_SQL = """
SELECT q.name, q.fair, q.concurrency, q.rate_limit, q.rate_per, q.rate_burst, v.tokens,
       v.refilled_at, now(),
       (SELECT count(*) FROM {s}.jobs r WHERE r.state = 'running' AND r.queue = q.name),
       (SELECT count(*) FROM (SELECT 1 FROM {s}.jobs a WHERE a.state = 'available'
                              AND a.queue = q.name LIMIT %(cap)s) x),
       (SELECT min(a.run_at) FROM {s}.jobs a WHERE a.state = 'available' AND a.queue = q.name)
FROM {s}.queues q LEFT JOIN {s}.flow_values v ON v.key = '@' || q.name
WHERE q.flow ORDER BY q.name
"""
WAITING_CAP = 50_000
KNOWN_SQL = """
SELECT EXISTS (SELECT 1 FROM {s}.queues WHERE name = %(q)s)
    OR EXISTS (SELECT 1 FROM {s}.workers WHERE %(q)s = ANY(queues))
"""


@dataclass(frozen=True)
class RateInfo(Shape):
    limit: int
    per_seconds: float
    burst: int
    #: As typed back: ``100/s``, ``10/5s``.
    text: str


@dataclass(frozen=True)
class Bucket(Shape):
    """A token bucket now: tokens held, and when the next one is due if it holds none."""

    tokens: float
    #: Seconds until a job may start; 0 when a token is there now.
    next_slot_seconds: float


@dataclass(frozen=True)
class QueueFlow(Shape):
    queue: str
    #: Claims go through the flow claim (keys, a rate or fair share seen in this queue).
    flow: bool
    fair: bool
    rate: RateInfo | None
    bucket: Bucket | None


@dataclass(frozen=True)
class FlowQueue(Shape):
    """A queue whose claims go through the flow claim, as the console's flow screen shows it."""

    queue: str
    fair: bool
    #: The queue's own concurrency limit (forklift queues limit), None for none.
    concurrency: int | None
    rate: RateInfo | None
    bucket: Bucket | None
    running: int
    #: Waiting (available) jobs, counted up to WAITING_CAP.
    waiting: int
    waiting_capped: bool
    oldest_waiting_seconds: float | None


def flow_queues(conn: psycopg.Connection[Any], ctx: OpsContext) -> list[FlowQueue]:
    out = []
    for row in conn.execute(render(FLOW_QUEUES_SQL, ctx.schema), {"cap": WAITING_CAP}):
        name, fair, conc, rl, rp, rb, tokens, at, now, running, waiting, oldest = row
        rate = rate_info(rl, rp, rb)
        out.append(FlowQueue(
            name, bool(fair), conc, rate, bucket(rate, tokens, at, now), int(running),
            int(waiting), int(waiting) >= WAITING_CAP,
            (now - oldest).total_seconds() if oldest is not None else None))
    return out


def parse_rate(text: str, burst: int | None = None) -> Rate | None:
    """``100/s``, ``10/5s``, ``600/m`` (or ``none``, ``off``: no rate); InvalidFilter if not."""
    if text.strip().lower() in ("none", "off", "unlimited"):
        return None
    try:
        return Rate.parse(text, burst)
    except ConfigError as exc:
        raise InvalidFilter(exc.message, field="rate") from None


def rate_info(limit: int | None, per: float | None, burst: int | None) -> RateInfo | None:
    if limit is None or per is None:
        return None
    rate = Rate(int(limit), float(per), int(burst) if burst is not None else None)
    return RateInfo(rate.limit, rate.per, rate.capacity, str(Rate(rate.limit, rate.per)))


def bucket(rate: RateInfo | None, tokens: float | None, refilled_at: datetime | None,
           now: datetime) -> Bucket | None:
    """What a bucket holds at ``now`` (full when no claim has drawn from it yet)."""
    if rate is None:
        return None
    held = float(rate.burst)
    if tokens is not None and refilled_at is not None:
        elapsed = max(0.0, (now - refilled_at).total_seconds())
        held = min(float(rate.burst), tokens + elapsed * rate.limit / rate.per_seconds)
    wait = 0.0 if held >= 1 else (1 - held) * rate.per_seconds / rate.limit
    return Bucket(held, wait)


def queue_flow(conn: psycopg.Connection[Any], ctx: OpsContext, queue: str) -> QueueFlow:
    row = conn.execute(render(QUEUE_FLOW_SQL, ctx.schema), (queue,)).fetchone()
    if row is None:
        return QueueFlow(queue, False, False, None, None)
    rate = rate_info(row[2], row[3], row[4])
    return QueueFlow(queue, bool(row[0]), bool(row[1]), rate, bucket(rate, row[5], row[6], row[7]))


def _queue_act(conn: psycopg.Connection[Any], ctx: OpsContext, action: str, queue: str,
               target: dict[str, Any], reason: str | None, create: bool, sql: str,
               params: dict[str, Any]) -> QueueInfo:
    ctx.require_write(action)
    queue, reason = _check_name(queue), audit.clean_reason(reason)
    target["queue"] = queue
    params["q"] = queue
    try:
        with conn.transaction():
            known = conn.execute(render(KNOWN_SQL, ctx.schema), {"q": queue}).fetchone()
            if not (known and known[0]):
                if not create:
                    raise QueueNotFound(f"no queue named {queue!r}: check the name, or pass"
                                        " --create to set it up before its first job",
                                        queue=queue)
                check_name(queue, "queue")  # a new queue is named as enqueue would name it
            conn.execute(render(sql, ctx.schema), params)
            conn.execute(render(QUEUE_BUCKET_SQL, ctx.schema), (queue,))
            conn.execute(WAKE_SQL, (channel(ctx.schema), queue))
            audit.record(conn, ctx, action, target, count=1, reason=reason)
    except QueueNotFound as exc:
        audit.record_refusal(conn, ctx, action, target, exc.code, reason)
        raise
    info = get_queue(conn, ctx, queue)
    assert info is not None
    return info


def set_queue_rate(conn: psycopg.Connection[Any], ctx: OpsContext, queue: str,
                   rate: Rate | None, *, reason: str | None = None, create: bool = False
                   ) -> QueueInfo:
    """At most ``rate`` starts of the queue's jobs over all workers (None lifts it); from the
    next claim. The queue's claims go through the flow claim from then on."""
    params = {"q": queue, "limit": rate.limit if rate else None,
              "per": rate.per if rate else None, "burst": rate.capacity if rate else None}
    target = {"queue": queue, "rate": str(rate) if rate else None}
    return _queue_act(conn, ctx, "queue_rate", queue, target, reason, create, QUEUE_RATE_SQL,
                      params)


def set_fair(conn: psycopg.Connection[Any], ctx: OpsContext, queue: str, fair: bool, *,
             reason: str | None = None, create: bool = False) -> QueueInfo:
    """Claims of the queue take turns across key values (first keys) instead of claim order."""
    return _queue_act(conn, ctx, "queue_fair", queue, {"queue": queue, "fair": fair}, reason,
                      create, QUEUE_FAIR_SQL, {"q": queue, "fair": fair})
