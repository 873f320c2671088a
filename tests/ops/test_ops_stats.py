"""Stats: counts, lag, pauses, limits, rates and run times; plans that stay off finished rows."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from apps.ops import error, insert_job, register_worker

from forklift._db.sqltext import render
from forklift.ops import Operator
from forklift.ops.stats import (
    COUNTS_SQL,
    FAILED_SQL,
    RT_ERROR,
    WINDOW_SQL,
    WindowCache,
    _inline,
    stats,
)


def test_counts_lag_pause_limit_and_workers(dsn: str, conn: psycopg.Connection[Any]) -> None:
    now = datetime.now(UTC)
    insert_job(conn, queue="mail", state="available", run_at=now - timedelta(minutes=5))
    insert_job(conn, queue="mail", state="available")
    insert_job(conn, queue="mail", state="scheduled")
    insert_job(conn, queue="mail", state="running", worker_id="w1")
    insert_job(conn, queue="mail", state="retryable", errors=[error()])
    insert_job(conn, queue="mail", state="dead", errors=[error()])
    insert_job(conn, queue="sms", state="completed")
    register_worker(conn, "w1", ["mail"], slots=4, in_use=1)
    register_worker(conn, "w2", ["sms"], state="draining")
    register_worker(conn, "w3", ["mail"], heartbeat_age=3600)
    with Operator(dsn, actor="ops") as op:
        op.pause("mail", reason="db maintenance", for_="1h")
        op.set_concurrency("mail", 3)
        s = op.stats()
    mail = s.queue("mail")
    assert mail is not None
    assert mail.counts == {"scheduled": 1, "available": 2, "running": 1, "retryable": 1, "dead": 1}
    assert mail.pickup_lag_seconds is not None and mail.pickup_lag_seconds >= 290
    assert (mail.paused, mail.paused_by, mail.pause_reason) == (True, "ops", "db maintenance")
    assert mail.pause_expires_at is not None and mail.concurrency == 3
    assert (mail.workers, mail.free_slots) == (1, 3)  # the stale w3 does not count
    sms = s.queue("sms")
    assert sms is not None and sms.completed == 1 and not sms.paused
    t = s.totals
    assert t.counts["available"] == 2 and t.counts["dead"] == 1
    assert (t.workers, t.live_workers, t.draining_workers, t.paused_queues) == (3, 2, 1, 1)
    stale = {w.id: w.stale for w in s.workers}
    assert stale == {"w1": False, "w2": False, "w3": True}
    drain = next(w for w in s.workers if w.id == "w2")
    assert drain.drain_remaining_seconds is not None and drain.drain_remaining_seconds > 0
    shape = s.to_json()
    json.dumps(shape)  # plain JSON all the way down
    assert set(shape) >= {"at", "window_seconds", "bucket_seconds", "buckets", "queues",
                          "workers", "totals"}
    assert len(shape["buckets"]) == len(shape["totals"]["series"]["completed"]) == 30


def test_rates_and_run_times_over_the_window(dsn: str, conn: psycopg.Connection[Any]) -> None:
    now = datetime.now(UTC)
    for run in (1, 2, 3, 4, 10):  # run times in seconds
        insert_job(conn, queue="q", state="completed", attempted_at=now - timedelta(seconds=run),
                   finished_at=now)
    insert_job(conn, queue="q", state="completed", finished_at=now - timedelta(hours=3))  # outside
    insert_job(conn, queue="q", state="completed", attempt=2, errors=[error(at=now)],
               attempted_at=now - timedelta(seconds=5), finished_at=now)
    insert_job(conn, queue="q", state="dead", errors=[error(at=now - timedelta(minutes=2))],
               finished_at=now - timedelta(minutes=2))
    insert_job(conn, queue="q", state="retryable",
               errors=[error(at=now - timedelta(hours=2)), error(at=now)])
    insert_job(conn, queue="q", state="available", attempt=1,
               errors=[error(code="interrupted", at=now)])  # not a failure
    with Operator(dsn) as op:
        s = op.stats(window=timedelta(minutes=10), bucket=timedelta(minutes=1))
    q = s.queue("q")
    assert q is not None
    assert len(q.series.completed) == 10
    assert q.completed == 6 and q.dead_in_window == 1
    assert q.series.completed[-1] == 6 and q.series.dead[-3] == 1
    assert q.failed == 3  # the retried one, the dead one, the retryable one's recent attempt
    assert q.run_time.samples == 6
    assert q.run_time.mean_seconds == pytest.approx(25 / 6, abs=0.1)
    assert q.run_time.p95_seconds == pytest.approx(10, rel=RT_ERROR)
    assert s.totals.completed_per_minute == pytest.approx(0.6)


def test_an_expired_pause_is_no_pause_for_stats_explain_and_claim(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    from forklift._db.connections import aconnect
    from forklift._worker import claim

    job = insert_job(conn, queue="mail")
    with Operator(dsn) as op:
        op.pause("mail", reason="short", for_="1h")
        assert op.stats().queue("mail").paused  # type: ignore[union-attr]
        conn.execute("UPDATE forklift.queues SET pause_expires_at = now() - interval '1 second'")
        q = op.stats().queue("mail")
        assert q is not None and not q.paused and q.paused_by is None
        listed = op.queues()[0]
        assert (listed.paused, listed.paused_flag) == (False, True)
        ex = op.explain(job)
        assert "queue_paused" not in ex.codes and "pause_expired" in ex.codes

    async def claim_one() -> list[claim.Claimed]:
        c = await aconnect(dsn, "claim")
        try:
            return await claim.claim(c, "forklift", worker_id="t", queues=["mail"], n=1, lease=30)
        finally:
            await c.close()

    assert [c.id for c in asyncio.run(claim_one())] == [job]


def _plan_nodes(plan: dict[str, Any]) -> list[dict[str, Any]]:
    nodes = [plan]
    for child in plan.get("Plans", []):
        nodes += _plan_nodes(child)
    return nodes


def test_stats_plans_read_indexes_not_the_finished_history(conn: psycopg.Connection[Any]) -> None:
    conn.execute("""
        INSERT INTO forklift.jobs (queue, kind, state, attempt, attempted_at, finished_at)
        SELECT 'q' || (i % 4), 'k', CASE WHEN i % 40 = 0 THEN 'dead' ELSE 'completed' END, 1,
               now() - (i * interval '1 second') - interval '1 second',
               now() - (i * interval '1 second')
        FROM generate_series(1, 60000) i""")
    for i in range(50):
        insert_job(conn, queue=f"q{i % 4}", state=["available", "scheduled", "running",
                                                    "retryable"][i % 4])
    conn.execute("VACUUM ANALYZE forklift.jobs")
    # As stats sends them: the window's values written in, with and without a cache's start.
    since = datetime.now(UTC) - timedelta(minutes=3)
    for text, p in [(t, {"b": 60.0, "n": 30, "since": at})
                    for t in (COUNTS_SQL, WINDOW_SQL, FAILED_SQL) for at in (None, since)]:
        (plan,) = conn.execute(
            "EXPLAIN (FORMAT JSON) " + _inline(render(text, "forklift"), p)
        ).fetchone()  # type: ignore[misc]
        nodes = _plan_nodes(plan[0]["Plan"])
        scans = [n for n in nodes if n.get("Relation Name") == "jobs"]
        assert scans, text
        for n in scans:
            assert n["Node Type"] != "Seq Scan", (text, n)
            assert n.get("Index Name") or n["Node Type"] == "Bitmap Heap Scan", n
        used = {n.get("Index Name") for n in nodes if n.get("Index Name")}
        assert "jobs_pkey" not in used


def test_a_connection_plans_the_stats_reads_once(dsn: str, conn: psycopg.Connection[Any]) -> None:
    # With parameters the window and failed-attempt reads were planned anew on every call
    # (custom plans); with the window's values written in, the prepared statements keep one.
    insert_job(conn, queue="q", state="completed")
    insert_job(conn, queue="q", state="dead", errors=[error()])
    with Operator(dsn) as op:
        for _ in range(8):
            stats(op.conn, op.ctx)
        rows = op.conn.execute(
            "SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements"
            " WHERE statement LIKE '%jobs_window%' OR statement LIKE '%finished_at >=%'"
        ).fetchall()
    assert rows, "stats' reads of the window are prepared"
    for statement, generic, custom in rows:
        assert custom == 0 and generic >= 1, (statement[:80], generic, custom)


def test_a_cache_reads_only_new_buckets_and_agrees_with_a_fresh_read(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    now = datetime.now(UTC)
    for minutes in (1, 2, 5, 9, 40):
        insert_job(conn, queue="q", state="completed", finished_at=now - timedelta(minutes=minutes))
        insert_job(conn, queue="q", state="dead", errors=[error(at=now - timedelta(minutes=minutes))],
                   finished_at=now - timedelta(minutes=minutes))
    cache = WindowCache()
    with Operator(dsn) as op:
        ctx = op.ctx
        first = stats(op.conn, ctx, cache=cache)
        assert cache.until is not None and cache.finished
        insert_job(conn, queue="q", state="completed")  # lands in the open bucket
        second = stats(op.conn, ctx, cache=cache)
        fresh = stats(op.conn, ctx)
    for a, b in ((second, fresh),):
        qa, qb = a.queue("q"), b.queue("q")
        assert qa is not None and qb is not None
        if a.buckets[0] == b.buckets[0]:  # the same window (no minute boundary in between)
            assert qa.series == qb.series
            # Sums of floats in another order (cached buckets first) differ in the last bits.
            assert qa.run_time.samples == qb.run_time.samples
            assert qa.run_time.p95_seconds == qb.run_time.p95_seconds
            assert qa.run_time.mean_seconds == pytest.approx(qb.run_time.mean_seconds)
    q1, q2 = first.queue("q"), second.queue("q")
    assert q1 is not None and q2 is not None
    assert q2.completed == q1.completed + 1 or second.buckets[0] != first.buckets[0]
    assert q1.completed == 4 and q1.dead_in_window == 4 and q1.failed == 4


def test_a_cache_follows_a_change_of_window(dsn: str, conn: psycopg.Connection[Any]) -> None:
    now = datetime.now(UTC)
    insert_job(conn, queue="q", state="completed", finished_at=now - timedelta(minutes=20))
    cache = WindowCache()
    with Operator(dsn) as op:
        short = stats(op.conn, op.ctx, window=timedelta(minutes=10), cache=cache)
        wide = stats(op.conn, op.ctx, window=timedelta(minutes=30), cache=cache)
    assert short.totals.completed == 0 and wide.totals.completed == 1


def test_queue_states_failing_and_no_worker(dsn: str, conn: psycopg.Connection[Any]) -> None:
    """17.8: a queue where every job dies is failing, not active; work waiting with no live
    worker listening is no_worker at once, not active until the lag passes a minute."""
    now = datetime.now(UTC)
    for i in range(4):
        at = now - timedelta(minutes=i + 1)
        insert_job(conn, queue="doomed", state="dead", errors=[error(at=at)], finished_at=at)
    insert_job(conn, queue="orphan", state="available")  # nobody listens on orphan
    insert_job(conn, queue="flowing", state="available")
    insert_job(conn, queue="flowing", state="completed", finished_at=now)
    register_worker(conn, "w1", ["doomed", "flowing"], slots=4)
    with Operator(dsn) as op:
        s = op.stats()
    states = {q.name: q.state for q in s.queues}
    assert states == {"doomed": "failing", "orphan": "no_worker", "flowing": "active"}
    assert s.to_json()["queues"][0]["state"] == "failing"


def test_counts_agree_within_one_snapshot(dsn: str, conn: psycopg.Connection[Any]) -> None:
    """17.16: in_use is the running jobs live workers hold, read in the same snapshot as the
    running count; a worker's own in_use (as old as its last heartbeat) does not leak in."""
    for _ in range(10):
        insert_job(conn, queue="q", state="running", worker_id="w1")
    register_worker(conn, "w1", ["q"], slots=12, in_use=11)  # its last beat said 11
    with Operator(dsn) as op:
        s = op.stats()
    assert s.totals.counts["running"] == 10
    assert s.totals.in_use == 10 == s.held_by("w1")
    q = s.queue("q")
    assert q is not None and q.free_slots == 2
