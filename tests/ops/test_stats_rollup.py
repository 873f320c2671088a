"""The stats rollup: closed minutes written once by the leader, read instead of the jobs.

A stats call over rolled-up minutes must give what the raw scan of the jobs gives on the same
data (tail included: jobs that finish into a minute not yet rolled up, late ones too), fall back
to the raw scan where the rollup does not reach, and the chore must catch up by bounded steps.
"""

from __future__ import annotations

import asyncio
import math
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from apps import basic
from apps.ops import insert_job
from helpers import wait_until

from forklift.ops import Operator
from forklift.ops.stats import SETTLE_MARGIN, Stats, WindowCache, stats
from forklift.ops.stats_rollup import CHUNK, covered, plan, rollup

# Outcomes over the last 40 minutes in three queues: completions with run times from 1 ms to
# an hour, deaths, retried completions, failures of jobs still retrying or running again, with
# error times in the worker's form and in others (an offset, a bad string).
LOAD = """
INSERT INTO forklift.jobs (queue, kind, state, attempt, run_at, attempted_at, finished_at,
                           errors, worker_id, fence, lease_expires_at)
SELECT 'q' || (i % 3), 'k', st,
       CASE WHEN st <> 'completed' OR i % 7 = 0 THEN 2 ELSE 1 END,
       now() + interval '1 hour', f - make_interval(secs => (i % 40) ^ 2.2 / 10.0), fin,
       CASE WHEN st <> 'completed' OR i % 7 = 0 THEN jsonb_build_array(jsonb_build_object(
           'code', CASE WHEN i % 11 = 0 THEN 'interrupted' ELSE 'error' END,
           'at', CASE WHEN i % 13 = 0 THEN to_char(f AT TIME ZONE 'Europe/Paris',
                                                   'YYYY-MM-DD"T"HH24:MI:SS.US"+01:00"')
                      WHEN i % 17 = 0 THEN 'not a time'
                      ELSE to_char(f AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"+00:00"')
                 END))
            ELSE '[]'::jsonb END,
       CASE WHEN st = 'running' THEN 'w' END, CASE WHEN st = 'running' THEN i END,
       CASE WHEN st = 'running' THEN now() + interval '1 hour' END
FROM (SELECT i, now() - (i * interval '1 second') AS f,
             CASE WHEN i % 19 = 0 THEN 'retryable' WHEN i % 23 = 0 THEN 'running'
                  WHEN i % 5 = 0 THEN 'dead' ELSE 'completed' END AS st
      FROM generate_series(1, 2400) i) s,
     LATERAL (SELECT CASE WHEN st IN ('completed', 'dead') THEN f END AS fin) x
"""


def roll(dsn: str, **kw: Any) -> list[int]:
    """Rollup passes until nothing is due; the minutes each wrote."""

    async def run() -> list[int]:
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
            done = []
            while n := await rollup(conn, "forklift", **kw):
                done.append(n)
            return done

    return asyncio.run(run())


def covered_minutes(conn: psycopg.Connection[Any]) -> tuple[int | None, int | None]:
    row = conn.execute("SELECT lo, hi FROM forklift.stats_rollup").fetchone()
    assert row is not None
    return row[0], row[1]


def both(op: Operator, conn: psycopg.Connection[Any], **kw: Any) -> tuple[Stats, Stats]:
    """The same window read through the rollup and by the raw scan (the rollup's range set
    aside for the second read, then put back)."""
    for _ in range(5):
        lo, hi = covered_minutes(conn)
        rolled = stats(op.conn, op.ctx, **kw)
        conn.execute("UPDATE forklift.stats_rollup SET lo = NULL, hi = NULL")
        try:
            raw = stats(op.conn, op.ctx, **kw)
        finally:
            conn.execute("UPDATE forklift.stats_rollup SET lo = %s, hi = %s", (lo, hi))
        if rolled.buckets == raw.buckets:  # no bucket boundary in between
            return rolled, raw
    raise AssertionError("no two reads of the same window")


def assert_same(a: Stats, b: Stats) -> None:
    assert [q.name for q in a.queues] == [q.name for q in b.queues]
    for qa, qb in [*zip(a.queues, b.queues, strict=True), (a.totals, b.totals)]:
        assert qa.series == qb.series, getattr(qa, "name", "totals")
        assert qa.counts == qb.counts
        assert (qa.completed, qa.failed, qa.dead_in_window) == (qb.completed, qb.failed,
                                                                qb.dead_in_window)
        ra, rb = qa.run_time, qb.run_time
        assert (ra.samples, ra.p95_seconds) == (rb.samples, rb.p95_seconds)
        # Sums of floats in another order differ in the last bits.
        assert ra.mean_seconds == pytest.approx(rb.mean_seconds)


def test_the_rollup_agrees_with_the_raw_scan(dsn: str, conn: psycopg.Connection[Any]) -> None:
    conn.execute(LOAD)
    passes = roll(dsn)  # the newest hour (and any minute closed since)
    assert passes[0] == CHUNK and sum(passes) <= CHUNK + 2
    lo, hi = covered_minutes(conn)
    assert lo is not None and hi is not None and hi - lo == sum(passes)
    epoch = conn.execute("SELECT date_part('epoch', now())").fetchone()[0]  # type: ignore[index]
    # Only settled minutes: the minute that closed less than SETTLE_MARGIN ago waits.
    assert math.floor((epoch - SETTLE_MARGIN) / 60) - 1 <= hi <= math.floor(
        (epoch - SETTLE_MARGIN) / 60)
    with Operator(dsn) as op:
        rolled, raw = both(op, conn)
        assert raw.totals.completed > 1000 and raw.totals.failed > 50
        assert raw.totals.dead_in_window > 100 and raw.totals.run_time.samples > 1000
        assert_same(rolled, raw)
        # A wider bucket of whole minutes, and a window reaching past the rollup (read raw).
        assert_same(*both(op, conn, window=timedelta(minutes=40), bucket=timedelta(minutes=2)))
        assert_same(*both(op, conn, window=timedelta(days=2), bucket=timedelta(hours=1)))

        # Late: jobs finishing into the first minute not rolled up (it may have closed already,
        # inside SETTLE_MARGIN), and into the open one, after the pass.
        for at in ("to_timestamp(%s * 60.0)", "now()"):
            conn.execute(
                "INSERT INTO forklift.jobs (queue, kind, state, attempt, attempted_at,"
                f" finished_at) VALUES ('q1', 'k', 'completed', 1, {at} - interval '3 seconds',"
                f" {at})", (hi, hi) if "%s" in at else None)
        late_rolled, late_raw = both(op, conn)
        assert late_raw.totals.completed == raw.totals.completed + 2 or (
            late_raw.buckets != raw.buckets)
        assert_same(late_rolled, late_raw)
        # Nothing rolled up twice: a second round writes at most the minutes that closed since.
        roll(dsn)
        assert_same(*both(op, conn))


def test_covered_minutes_are_read_from_the_rollup(dsn: str, conn: psycopg.Connection[Any]
                                                  ) -> None:
    conn.execute(LOAD)
    roll(dsn)
    _, hi = covered_minutes(conn)
    # Prune what finished before the rollup's end: the rollup keeps those minutes (as a cache
    # of closed buckets keeps them), the raw scan no longer sees them.
    conn.execute("DELETE FROM forklift.jobs WHERE finished_at < to_timestamp(%s * 60.0)", (hi,))
    with Operator(dsn) as op:
        rolled, raw = both(op, conn)
        assert rolled.totals.completed > 1000 and raw.totals.completed < rolled.totals.completed
        # A bucket of other than whole minutes cannot use minutes: it reads the jobs.
        odd = stats(op.conn, op.ctx, window=timedelta(minutes=30), bucket=timedelta(seconds=90))
        assert odd.totals.completed == raw.totals.completed


def test_a_cache_over_the_rollup_agrees_with_a_one_shot_read(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    conn.execute(LOAD)
    roll(dsn)
    cache = WindowCache()
    with Operator(dsn) as op:
        for _ in range(5):
            first = stats(op.conn, op.ctx, cache=cache)
            insert_job(conn, queue="q2", state="completed")  # lands in the open bucket
            again = stats(op.conn, op.ctx, cache=cache)
            one_shot = stats(op.conn, op.ctx)
            if first.buckets == again.buckets == one_shot.buckets:
                break
        assert_same(again, one_shot)
        assert again.totals.completed == first.totals.completed + 1


def test_a_pass_prunes_minutes_past_keep(dsn: str, conn: psycopg.Connection[Any]) -> None:
    conn.execute(LOAD)
    roll(dsn, keep=timedelta(minutes=20), chunk=7)
    lo, hi = covered_minutes(conn)
    assert lo is not None and hi is not None and 7 <= hi - lo <= 9
    roll(dsn, keep=timedelta(minutes=5))
    lo, hi = covered_minutes(conn)
    assert lo is not None and hi is not None and hi - lo == 5
    assert conn.execute("SELECT count(*) FROM forklift.stats_minutes WHERE minute < %s",
                        (lo,)).fetchone() == (0,)
    assert conn.execute("SELECT count(*) FROM forklift.stats_minutes").fetchone() != (0,)


def test_the_plan_of_a_pass() -> None:
    keep = 100
    assert plan(None, None, 1000, keep, 60) == (940, 1000, 940, 1000)  # the newest minutes
    assert plan(940, 1000, 1000, keep, 60) is None  # nothing due (older ones never filled in)
    assert plan(940, 1000, 1003, keep, 60) == (1000, 1003, 940, 1003)  # the minutes closed since
    assert plan(940, 1050, 1050, keep, 60) == (1050, 1050, 950, 1050)  # a prune alone
    assert plan(950, 1050, 1050, keep, 60) is None
    assert plan(940, 1000, 1061, keep, 60) == (1001, 1061, 1001, 1061)  # a pause: start over
    assert plan(None, None, 1000, 30, 60) == (970, 1000, 970, 1000)  # never past keep


def test_what_a_read_can_take_from_the_rollup() -> None:
    assert covered(60.0, 600.0 * 60, 500, 700) == (600, 700)
    assert covered(120.0, 600.0 * 60, 500, 700) == (600, 700)
    assert covered(90.0, 600.0 * 60, 500, 700) is None  # not whole minutes
    assert covered(60.0, 400.0 * 60, 500, 700) is None  # the rollup does not reach back
    assert covered(60.0, 700.0 * 60, 500, 700) is None  # nothing rolled up in the window
    assert covered(60.0, 600.0 * 60, None, None) is None


def test_the_rollup_reads_partitioned_history(dsn: str, conn: psycopg.Connection[Any]) -> None:
    from forklift._features import history
    from forklift._worker.maintenance import history as upkeep

    history.enable(conn, "forklift")
    # LOAD's jobs finished within the last 40 minutes: shortly after midnight (UTC) some of them
    # finished yesterday, and the upkeep makes partitions from today on only, as for a history
    # switched on today. Yesterday's upkeep made them for a history switched on earlier.
    yesterday = datetime.now(UTC).date() - timedelta(days=1)
    for ddl in history.upkeep_ddl("forklift", set(), yesterday, {}):
        conn.execute(ddl)
    conn.execute("INSERT INTO forklift.settings (name, value) VALUES ('history.move_after', 0),"
                 " ('history.partitioned_since', 0) ON CONFLICT (name) DO UPDATE"
                 " SET value = excluded.value")
    conn.execute(LOAD)

    async def move() -> int:
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as a:
            return await upkeep.upkeep(a, "forklift")

    assert asyncio.run(move()) > 1000  # the finished jobs are in jobs_history now
    roll(dsn, keep=timedelta(hours=1))
    with Operator(dsn) as op:
        rolled, raw = both(op, conn)
    assert rolled.totals.completed > 1000 and rolled.totals.failed > 50
    assert_same(rolled, raw)


def test_a_leading_worker_keeps_the_rollup(dsn: str, conn: psycopg.Connection[Any]) -> None:
    # (Retries and leases are due in an hour: a job the stager or the rescuer moved back to the
    # available backlog would take its failed attempt out of the raw read, not the rollup.)
    conn.execute(LOAD)
    with basic.bound(dsn) as app, basic.running_worker(app) as worker:
        wait_until(lambda: worker.is_leader, message="the worker did not become the leader")
        wait_until(lambda: covered_minutes(conn)[0] is not None, timeout=30,
                   message="the leader wrote no minute")
    lo, hi = covered_minutes(conn)
    assert lo is not None and hi is not None and hi - lo >= CHUNK
    with Operator(dsn) as op:
        assert_same(*both(op, conn))
