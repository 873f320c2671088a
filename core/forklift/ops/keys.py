"""Keys (per-key concurrency and rates, forklift._features.flow.keys) as an operator sees and sets them.

``list_keys``: every key name recorded by a worker, its limits (as declared and as in force),
and over all its values the jobs running and waiting. ``show_key``: one key, value by value:
running against the limit, who holds the slots (job ids, workers), waiting jobs and the oldest
one's age, the token bucket. ``set_limit``, ``set_rate``, ``reset``: live changes, audited, in
force from every worker's next claim; an override is kept when workers record the code's
declaration again, until ``reset``.

Waiting jobs are counted over at most :data:`SCAN_CAP` keyed waiting jobs (``queued_capped``
says the count stopped there); running ones are read from the running keyed jobs only
(``jobs_holders_idx``), which the keys' limits bound.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg

from forklift._base.errors import ForkliftError
from forklift._db.sqltext import channel, render
from forklift._features.flow.keys import SEP, Rate, check_limit, split
from forklift.ops import audit
from forklift.ops.context import OpsContext
from forklift.ops.errors import InvalidFilter
from forklift.ops.filters import check_text
from forklift.ops.rates import Bucket, RateInfo, bucket, rate_info
from forklift.ops.shape import Shape

__all__ = ["MAX_HOLDERS", "MAX_VALUES", "SCAN_CAP", "Holder", "KeyDetail", "KeyInfo", "KeyNotFound",
           "ValueInfo", "list_keys", "reset", "set_limit", "set_rate", "show_key"]

SCAN_CAP = 50_000
MAX_VALUES = 200
MAX_HOLDERS = 20


class KeyNotFound(ForkliftError):
    code = "key_not_found"


KEYS_SQL = """
SELECT name, kinds, concurrency, rate_limit, rate_per, rate_burst, declared, overridden, set_by,
       set_at, declared_at
FROM {s}.flow_keys WHERE (%(name)s::text IS NULL OR name = %(name)s) ORDER BY name
"""
RUNNING_SQL = """
SELECT k, count(*) FROM {s}.jobs j, unnest(j.keys) AS k
WHERE j.state = 'running' AND j.keys IS NOT NULL GROUP BY k
"""
QUEUED_SQL = """
WITH w AS MATERIALIZED (
    SELECT keys, run_at FROM {s}.jobs WHERE state = 'available' AND keys IS NOT NULL LIMIT %s
)
SELECT k, count(*), min(w.run_at), now(), (SELECT count(*) FROM w)
FROM w, unnest(w.keys) AS k
GROUP BY k
"""
HOLDERS_SQL = """
SELECT id, worker_id, attempted_at, keys FROM {s}.jobs
WHERE state = 'running' AND keys IS NOT NULL AND keys && %s::text[]
ORDER BY id LIMIT %s
"""
BUCKETS_SQL = "SELECT key, tokens, refilled_at, now() FROM {s}.flow_values WHERE key = ANY(%s)"
SET_LIMIT_SQL = """
UPDATE {s}.flow_keys SET concurrency = %s, overridden = true, set_by = %s, set_at = now(),
    updated_at = now() WHERE name = %s RETURNING name
"""
SET_RATE_SQL = """
UPDATE {s}.flow_keys SET rate_limit = %s, rate_per = %s, rate_burst = %s, overridden = true,
    set_by = %s, set_at = now(), updated_at = now() WHERE name = %s RETURNING name
"""
RESET_SQL = """
UPDATE {s}.flow_keys SET concurrency = (declared->>'concurrency')::int,
    rate_limit = (declared->'rate'->>'limit')::int, rate_per = (declared->'rate'->>'per')::float8,
    rate_burst = (declared->'rate'->>'burst')::int, overridden = false, set_by = %s,
    set_at = now(), updated_at = now()
WHERE name = %s RETURNING name
"""
WAKE_ALL_SQL = "SELECT pg_notify(%s, name) FROM {s}.queues WHERE flow"


@dataclass(frozen=True)
class KeyInfo(Shape):
    name: str
    kinds: list[str]
    #: In force: most jobs with one value of this key running at once; None for no limit.
    concurrency: int | None
    rate: RateInfo | None
    #: As the code declares it: {"concurrency": n | null, "rate": {...} | null}.
    declared: dict[str, Any]
    #: An operator's change is in force (kept until `forklift keys reset`).
    overridden: bool
    set_by: str | None
    set_at: datetime | None
    declared_at: datetime | None
    running: int
    queued: int
    queued_capped: bool
    #: Values with at least one job running or waiting, and those at their limit.
    values: int
    at_limit: int
    oldest_waiting_seconds: float | None


@dataclass(frozen=True)
class Holder(Shape):
    job_id: int
    worker_id: str | None
    since: datetime | None


@dataclass(frozen=True)
class ValueInfo(Shape):
    value: str
    running: int
    limit: int | None
    queued: int
    oldest_waiting_seconds: float | None
    holders: list[Holder]
    bucket: Bucket | None


@dataclass(frozen=True)
class KeyDetail(Shape):
    key: KeyInfo
    values: list[ValueInfo]
    #: More values than listed (the busiest are listed first).
    more_values: int


@dataclass
class _Counts:
    running: dict[str, int]
    queued: dict[str, tuple[int, datetime | None]]
    now: datetime | None
    capped: bool


def _counts(conn: psycopg.Connection[Any], ctx: OpsContext) -> _Counts:
    running = {str(k): int(n) for k, n in
               conn.execute(render(RUNNING_SQL, ctx.schema)).fetchall()}
    rows = conn.execute(render(QUEUED_SQL, ctx.schema), (SCAN_CAP,)).fetchall()
    queued = {str(r[0]): (int(r[1]), r[2]) for r in rows}
    return _Counts(running, queued, rows[0][3] if rows else None,
                   bool(rows) and int(rows[0][4]) >= SCAN_CAP)


def _of(name: str, table: dict[str, Any]) -> dict[str, Any]:
    prefix = name + SEP
    return {split(k)[1]: v for k, v in table.items() if k.startswith(prefix)}


def _info(row: tuple[Any, ...], c: _Counts) -> KeyInfo:
    name, kinds, conc, rl, rp, rb, declared, overridden, set_by, set_at, declared_at = row
    run, wait = _of(name, c.running), _of(name, c.queued)
    oldest = min((at for _, at in wait.values() if at is not None), default=None)
    return KeyInfo(
        name, list(kinds), conc, rate_info(rl, rp, rb),
        declared if isinstance(declared, dict) else json.loads(declared), bool(overridden),
        set_by, set_at, declared_at, sum(run.values()), sum(n for n, _ in wait.values()),
        c.capped, len(set(run) | set(wait)),
        sum(1 for n in run.values() if conc is not None and n >= conc),
        (c.now - oldest).total_seconds() if oldest is not None and c.now else None,
    )


def list_keys(conn: psycopg.Connection[Any], ctx: OpsContext) -> list[KeyInfo]:
    c = _counts(conn, ctx)
    rows = conn.execute(render(KEYS_SQL, ctx.schema), {"name": None}).fetchall()
    return [_info(r, c) for r in rows]


def _row(conn: psycopg.Connection[Any], ctx: OpsContext, name: str) -> tuple[Any, ...]:
    name = check_text(name, "key")
    row = conn.execute(render(KEYS_SQL, ctx.schema), {"name": name}).fetchone()
    if row is None:
        known = [r[0] for r in conn.execute(render(KEYS_SQL, ctx.schema), {"name": None})]
        hint = f" (known: {', '.join(known[:20])})" if known else " (none recorded yet)"
        raise KeyNotFound(f"no key named {name!r}{hint}: a worker records the keys its kinds"
                          " declare when it starts", key=name)
    return tuple(row)


def show_key(conn: psycopg.Connection[Any], ctx: OpsContext, name: str, *,
             limit: int = MAX_VALUES) -> KeyDetail:
    """One key value by value, the busiest first (running, then waiting)."""
    if not 1 <= limit <= MAX_VALUES:
        raise InvalidFilter(f"limit is 1 to {MAX_VALUES}, not {limit}", field="limit")
    row = _row(conn, ctx, name)
    c = _counts(conn, ctx)
    info = _info(row, c)
    run, wait = _of(info.name, c.running), _of(info.name, c.queued)
    ordered = sorted(set(run) | set(wait), key=lambda v: (-run.get(v, 0), -wait.get(v, (0,))[0], v))
    shown = ordered[:limit]
    elements = [info.name + SEP + v for v in shown]
    holders: dict[str, list[Holder]] = {}
    busy = [e for e, v in zip(elements, shown, strict=True) if run.get(v)]
    if busy:
        for job_id, worker, since, keys in conn.execute(
                render(HOLDERS_SQL, ctx.schema), (busy, MAX_HOLDERS * len(busy))):
            for k in keys:
                if k in busy:
                    holders.setdefault(split(k)[1], []).append(Holder(job_id, worker, since))
    buckets = {}
    if info.rate is not None and elements:
        for key, tokens, at, now in conn.execute(render(BUCKETS_SQL, ctx.schema), (elements,)):
            buckets[split(key)[1]] = bucket(info.rate, tokens, at, now)
    values = []
    for v in shown:
        n, oldest = wait.get(v, (0, None))
        age = (c.now - oldest).total_seconds() if oldest is not None and c.now else None
        values.append(ValueInfo(v, run.get(v, 0), info.concurrency, n, age,
                                holders.get(v, [])[:MAX_HOLDERS],
                                buckets.get(v, bucket(info.rate, None, None, c.now)
                                            if c.now else None)))
    return KeyDetail(info, values, len(ordered) - len(shown))


def _act(conn: psycopg.Connection[Any], ctx: OpsContext, action: str, name: str,
         target: dict[str, Any], reason: str | None, sql: str, params: tuple[Any, ...]) -> KeyInfo:
    ctx.require_write(action)
    reason = audit.clean_reason(reason)
    try:
        with conn.transaction():
            _row(conn, ctx, name)
            conn.execute(render(sql, ctx.schema), params)
            # Jobs that waited on the old limit may go now: wake the queues that use keys.
            conn.execute(render(WAKE_ALL_SQL, ctx.schema), (channel(ctx.schema),))
            audit.record(conn, ctx, action, target, count=1, reason=reason)
    except KeyNotFound as exc:
        audit.record_refusal(conn, ctx, action, target, exc.code, reason)
        raise
    return _info(_row(conn, ctx, name), _counts(conn, ctx))


def set_limit(conn: psycopg.Connection[Any], ctx: OpsContext, name: str, limit: int | None, *,
              reason: str | None = None) -> KeyInfo:
    """At most ``limit`` jobs per value of the key run at once (None: no limit)."""
    try:
        check_limit(limit, "limit")
    except ForkliftError as exc:
        raise InvalidFilter(exc.message, field="limit") from None
    return _act(conn, ctx, "key_limit", name, {"key": name, "concurrency": limit}, reason,
                SET_LIMIT_SQL, (limit, ctx.actor, name))


def set_rate(conn: psycopg.Connection[Any], ctx: OpsContext, name: str, rate: Rate | None, *,
             reason: str | None = None) -> KeyInfo:
    """At most ``rate`` starts per value of the key (None: no rate)."""
    params = (rate.limit if rate else None, rate.per if rate else None,
              rate.capacity if rate else None, ctx.actor, name)
    return _act(conn, ctx, "key_rate", name, {"key": name, "rate": str(rate) if rate else None},
                reason, SET_RATE_SQL, params)


def reset(conn: psycopg.Connection[Any], ctx: OpsContext, name: str, *,
          reason: str | None = None) -> KeyInfo:
    """Back to what the code declares (the last declaration a worker recorded)."""
    return _act(conn, ctx, "key_reset", name, {"key": name}, reason, RESET_SQL, (ctx.actor, name))
