"""What flow control holds back, in the words of ``jobs explain`` and ``queues explain``.

Codes: ``key_full`` (a key value has as many jobs running as its limit; the reason names the
holders), ``rate_limited`` (a key value's or the queue's bucket is empty: when the next slot
comes), ``key_unrecorded`` (no worker has recorded the key yet, so its jobs wait),
``fair_share`` (the queue takes turns across partitions: where this job's partition stands).
"""

from __future__ import annotations

from typing import Any

import psycopg

from forklift._db.sqltext import render
from forklift._features.flow.claim import TENANT_PART
from forklift._features.flow.keys import SEP, split
from forklift.ops._reason import Reason
from forklift.ops.context import OpsContext
from forklift.ops.rates import bucket, queue_flow, rate_info

__all__ = ["MAX_HOLDERS", "MAX_LISTED", "SAMPLE", "job_reasons", "queue_reasons", "shown"]

MAX_HOLDERS = 5
SAMPLE = 1_000  # waiting keyed jobs a queue's explanation looks at
MAX_LISTED = 10  # reasons of one code a queue's explanation lists

KEYS_OF_SQL = "SELECT keys FROM {s}.jobs WHERE id = %s"
VALUES_SQL = """
SELECT e, f.name IS NOT NULL, f.concurrency, f.rate_limit, f.rate_per, f.rate_burst,
       v.tokens, v.refilled_at, now(),
       CASE WHEN f.concurrency IS NULL THEN 0 ELSE (
           SELECT count(*) FROM {s}.jobs r
           WHERE r.state = 'running' AND r.keys IS NOT NULL AND r.keys @> ARRAY[e]) END
FROM unnest(%s::text[]) AS e
LEFT JOIN {s}.flow_keys f ON f.name = split_part(e, chr(31), 1)
LEFT JOIN {s}.flow_values v ON v.key = e
"""
HOLDERS_SQL = """
SELECT id, worker_id FROM {s}.jobs
WHERE state = 'running' AND keys IS NOT NULL AND keys @> ARRAY[%s] ORDER BY id LIMIT %s
"""
PARTITION_SQL = """
SELECT (SELECT count(*) FROM (SELECT 1 FROM {s}.jobs
            WHERE state = 'available' AND keys IS NOT NULL AND queue = %(q)s AND kind = %(k)s
              AND keys[1] = %(p)s AND (priority, run_at, id) < (%(prio)s, %(at)s, %(id)s)
            LIMIT 10001) a),
       (SELECT count(*) FROM (SELECT DISTINCT keys[1] FROM (SELECT keys FROM {s}.jobs
            WHERE state = 'available' AND keys IS NOT NULL AND queue = %(q)s
            LIMIT %(sample)s) s) d)
"""
# A fair queue's unkeyed job that names a tenant: its partition is its tenant's
# (forklift._features.flow.claim), read by jobs_tenant_fair_idx.
TENANT_PARTITION_SQL = """
SELECT (SELECT count(*) FROM (SELECT 1 FROM {s}.jobs
            WHERE state = 'available' AND keys IS NULL AND tenant IS NOT NULL
              AND queue = %(q)s AND kind = %(k)s AND """ + TENANT_PART.format(a="") + """ = %(p)s
              AND (priority, run_at, id) < (%(prio)s, %(at)s, %(id)s)
            LIMIT 10001) a),
       (SELECT count(*) FROM (SELECT DISTINCT tenant FROM (SELECT tenant FROM {s}.jobs
            WHERE state = 'available' AND keys IS NULL AND tenant IS NOT NULL
              AND queue = %(q)s AND kind = %(k)s
            LIMIT %(sample)s) s) d)
"""
SAMPLE_SQL = """
SELECT DISTINCT e FROM (SELECT keys FROM {s}.jobs
    WHERE state = 'available' AND keys IS NOT NULL AND queue = %s LIMIT %s) j, unnest(j.keys) e
"""


def _count(n: int, one: str) -> str:
    return f"{n:,} {one if n == 1 else one + 's'}"


def shown(element: str) -> str:
    name, value = split(element)
    return f"{name}={value}"


def _value_reasons(conn: psycopg.Connection[Any], ctx: OpsContext, elements: list[str]
                   ) -> list[Reason]:
    out = []
    rows = conn.execute(render(VALUES_SQL, ctx.schema), (elements,)).fetchall()
    for e, recorded, conc, rl, rp, rb, tokens, at, now, running in rows:
        key = shown(e)
        if not recorded:
            out.append(Reason(
                "key_unrecorded",
                f"key {split(e)[0]!r} is not recorded: its jobs wait until a worker that declares"
                " it starts (it records its kinds' keys at start)", {"key": split(e)[0]}))
            continue
        if conc is not None and running >= conc:
            holders = conn.execute(render(HOLDERS_SQL, ctx.schema), (e, MAX_HOLDERS)).fetchall()
            named = ", ".join(f"job {j} on {w}" for j, w in holders)
            out.append(Reason(
                "key_full",
                f"key {key} is at its limit: {running} running of {conc} ({named})",
                {"key": split(e)[0], "value": split(e)[1], "running": int(running),
                 "limit": conc, "holders": [{"job_id": j, "worker_id": w} for j, w in holders]}))
        rate = rate_info(rl, rp, rb)
        b = bucket(rate, tokens, at, now)
        if rate is not None and b is not None and b.next_slot_seconds > 0:
            out.append(Reason(
                "rate_limited",
                f"rate limit of key {key} ({rate.text}): next slot in"
                f" {b.next_slot_seconds * 1000:.0f} ms",
                {"key": split(e)[0], "value": split(e)[1], "rate": rate.text,
                 "next_slot_seconds": b.next_slot_seconds}))
    return out


def _queue_rate(conn: psycopg.Connection[Any], ctx: OpsContext, queue: str) -> list[Reason]:
    f = queue_flow(conn, ctx, queue)
    if f.rate is None or f.bucket is None or f.bucket.next_slot_seconds <= 0:
        return []
    return [Reason(
        "rate_limited",
        f"rate limit of queue {queue!r} ({f.rate.text}): next slot in"
        f" {f.bucket.next_slot_seconds * 1000:.0f} ms",
        {"queue": queue, "rate": f.rate.text, "next_slot_seconds": f.bucket.next_slot_seconds})]


def job_reasons(conn: psycopg.Connection[Any], ctx: OpsContext, job: Any) -> list[Reason]:
    """What holds back one available job: its key values, its queue's rate, fair share."""
    row = conn.execute(render(KEYS_OF_SQL, ctx.schema), (job.id,)).fetchone()
    elements: list[str] = list(row[0]) if row and row[0] else []
    out = _value_reasons(conn, ctx, elements) if elements else []
    out += _queue_rate(conn, ctx, job.queue)
    flow = queue_flow(conn, ctx, job.queue)
    tenant = getattr(job, "tenant", None)
    if flow.fair and (elements or tenant is not None):
        part = elements[0] if elements else "tenant" + SEP + str(tenant)
        ahead, parts = conn.execute(render(PARTITION_SQL if elements else TENANT_PARTITION_SQL,
                                           ctx.schema), {
            "q": job.queue, "k": job.kind, "p": part, "prio": job.priority,
            "at": job.run_at, "id": job.id, "sample": SAMPLE}).fetchone() or (0, 0)
        out.append(Reason(
            "fair_share",
            f"queue {job.queue!r} takes turns across partitions: {shown(part)} has"
            f" {min(ahead, 10_000):,}{'+' if ahead > 10_000 else ''} {'job' if ahead == 1 else 'jobs'}"
            f" ahead of this one, and {_count(parts, 'partition')} wait (each claim takes from"
            " each in turn)",
            {"partition": shown(part), "ahead_in_partition": min(ahead, 10_000),
             "partitions": parts}))
    return out


def queue_reasons(conn: psycopg.Connection[Any], ctx: OpsContext, queue: str) -> list[Reason]:
    """What holds back the queue's waiting jobs: full or empty key values (from a sample of
    its waiting keyed jobs), the queue's rate, fair share."""
    elements = [str(r[0]) for r in
                conn.execute(render(SAMPLE_SQL, ctx.schema), (queue, SAMPLE)).fetchall()]
    found = _value_reasons(conn, ctx, sorted(elements)) if elements else []
    out: list[Reason] = []
    for code in ("key_unrecorded", "key_full", "rate_limited"):
        same = [r for r in found if r.code == code]
        out += same[:MAX_LISTED]
        if len(same) > MAX_LISTED:
            out.append(Reason(code, f"... and {_count(len(same) - MAX_LISTED, 'more key value')} like"
                                    " these: forklift keys list", {"more": len(same) - MAX_LISTED}))
    out += _queue_rate(conn, ctx, queue)
    flow = queue_flow(conn, ctx, queue)
    if flow.fair:
        out.append(Reason("fair_share", f"queue {queue!r} takes turns across partitions"
                          f" (fair share on; {_count(len(elements), 'key value')} among the first"
                          f" {SAMPLE:,} waiting jobs)", {"fair": True}))
    return out
