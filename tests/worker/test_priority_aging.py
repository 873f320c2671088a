"""Priority aging at work: without it a low-priority job starves behind a steady stream of
high-priority ones; with it the low job rises to the top and runs while the stream goes on.
The leader's aging touches only queues that have it, never raises past the queue's top, and is
counted in metrics."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from apps.basic import running_worker
from helpers import wait_until
from typer.testing import CliRunner

from forklift import Forklift, JobContext, metrics
from forklift._worker.maintenance.ager import age, aging_queues
from forklift.cli.main import app as cli
from forklift.ops import InvalidFilter, Operator

app = Forklift()
#: Set to end the stream: a high job enqueues its successor only while this is clear.
STOP = threading.Event()
#: High-priority jobs waiting at every claim: the stream never runs dry, and the worker's
#: buffer (at most PREFETCH claimed ahead of their start) never holds all of it.
STREAM = 200
PREFETCH = 50


@app.job(name="aging.high", queue="aging", priority=0)
def high(ctx: JobContext, payload: dict[str, Any]) -> None:
    """One job of a steady stream: it puts its successor in the queue before it ends, so the
    queue always holds STREAM high-priority jobs."""
    if not STOP.is_set():
        high.enqueue({})


@app.job(name="aging.low", queue="aging", priority=2)
def low(ctx: JobContext, payload: dict[str, Any]) -> None:
    pass


@pytest.fixture
def bound(dsn: str) -> Iterator[Forklift]:
    STOP.clear()
    app.use(dsn)
    try:
        yield app
    finally:
        STOP.set()
        app.close()


def one(conn: psycopg.Connection[Any], sql: str, *params: Any) -> Any:
    got = conn.execute(sql, params).fetchone()
    assert got is not None
    return got[0] if len(got) == 1 else got


def completed_high(conn: psycopg.Connection[Any], after: Any = None) -> int:
    return int(one(conn, "SELECT count(*) FROM forklift.jobs WHERE kind = 'aging.high'"
                   " AND state = 'completed' AND (%s::timestamptz IS NULL OR finished_at > %s)",
                   after, after))


def start_stream() -> None:
    app.enqueue_many([("aging.high", {})] * STREAM)


def test_without_aging_a_low_priority_job_starves_behind_a_steady_stream(
    bound: Forklift, conn: psycopg.Connection[Any]
) -> None:
    job = low.enqueue({})
    start_stream()
    with running_worker(app, concurrency=1, queues=["aging"], prefetch_max=PREFETCH):
        wait_until(lambda: completed_high(conn) >= 200, timeout=60,
                   message=lambda: f"200 high jobs ran ({completed_high(conn)} did)")
        assert one(conn, "SELECT state FROM forklift.jobs WHERE id = %s", job.id) == "available"
        STOP.set()
    assert one(conn, "SELECT priority, priority_base FROM forklift.jobs WHERE id = %s",
               job.id) == (2, None)


def test_with_aging_the_low_priority_job_runs_while_the_stream_goes_on(
    bound: Forklift, conn: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(metrics, "_enabled", True)
    before = metrics.registry.get_sample_value("forklift_jobs_aged_total", {"queue": "aging"})
    job = low.enqueue({})
    start_stream()
    with Operator(conn.info.dsn, actor="ops") as op:
        info = op.queues.set_aging("aging", "1s", reason="low starves")
    assert (info.priority_aging, info.aging_top) == (1.0, 0)
    with running_worker(app, concurrency=1, queues=["aging"], prefetch_max=PREFETCH) as worker:
        wait_until(lambda: one(conn, "SELECT state FROM forklift.jobs WHERE id = %s",
                               job.id) == "completed",
                   timeout=60, message="the aged low job ran")
        finished = one(conn, "SELECT finished_at FROM forklift.jobs WHERE id = %s", job.id)
        # The stream went on past it: it ran amid the high jobs, not after they ended.
        wait_until(lambda: completed_high(conn, finished) >= 20, timeout=60,
                   message="high jobs kept running after the low one")
        assert not STOP.is_set()
        STOP.set()
    # 2 -> 0, the queue's top: in one raise or two, as the leader's passes fell
    assert worker.stats.aged in (1, 2)
    assert one(conn, "SELECT priority, priority_base FROM forklift.jobs WHERE id = %s",
               job.id) == (0, 2)
    got = metrics.registry.get_sample_value("forklift_jobs_aged_total", {"queue": "aging"})
    assert got == (before or 0.0) + worker.stats.aged
    audit = one(conn, "SELECT action, target->>'every_seconds', reason FROM forklift.audit"
                " ORDER BY id DESC LIMIT 1")
    assert audit == ("queue_aging", "1.0", "low starves")


def run_age(dsn: str, queue: str, every: float, top: int, batch: int = 1000) -> int:
    async def go() -> int:
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as aconn:
            return await age(aconn, "forklift", queue, every, top, batch=batch)

    return asyncio.run(go())


def listed(dsn: str) -> list[tuple[str, float, int]]:
    async def go() -> list[tuple[str, float, int]]:
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as aconn:
            return await aging_queues(aconn, "forklift")

    return asyncio.run(go())


def waiting(conn: psycopg.Connection[Any], queue: str, priority: int, ago: str = "1 hour",
            state: str = "available") -> int:
    return int(one(conn, "INSERT INTO forklift.jobs (queue, kind, priority, run_at, state)"
                   " VALUES (%s, 'aging.low', %s, now() - %s::interval, %s) RETURNING id",
                   queue, priority, ago, state))


def prio(conn: psycopg.Connection[Any], job_id: int) -> tuple[int, int | None]:
    got = one(conn, "SELECT priority, priority_base FROM forklift.jobs WHERE id = %s", job_id)
    return int(got[0]), got[1]


def test_aging_touches_only_its_queues_and_never_raises_past_the_top(
    bound: Forklift, conn: psycopg.Connection[Any], dsn: str
) -> None:
    far = waiting(conn, "aged", 20)  # an hour at 60s a step: 60 steps, stopped at the top
    near = waiting(conn, "aged", 3, ago="150 seconds")  # two steps
    fresh = waiting(conn, "aged", 3, ago="10 seconds")  # not one interval yet
    above = waiting(conn, "aged", -5)  # above the top already: never touched
    later = waiting(conn, "aged", 9, state="scheduled")  # not waiting for a worker yet
    plain = waiting(conn, "plain", 500)  # a queue without aging
    with Operator(dsn, actor="ops") as op:
        op.queues.set_aging("aged", 60, top=-2, create=True)
        op.queues.set_concurrency("plain", 5, create=True)  # a row, without aging
        with pytest.raises(InvalidFilter, match="every"):
            op.queues.set_aging("aged", "0.5s")
        with pytest.raises(InvalidFilter, match="top"):
            op.queues.set_aging("aged", "30s", top=40_000)
    assert listed(dsn) == [("aged", 60.0, -2)]  # the chore reads no other queue's jobs
    assert run_age(dsn, "aged", 60, -2) == 2
    assert prio(conn, far) == (-2, 20)
    assert prio(conn, near) == (1, 3)
    assert prio(conn, fresh) == (3, None)
    assert prio(conn, above) == (-5, None)
    assert prio(conn, later) == (9, None)
    assert prio(conn, plain) == (500, None)
    assert run_age(dsn, "aged", 60, -2) == 0  # nothing new: nothing written
    with Operator(dsn) as op:  # shown with the priority it was given
        shown = op.jobs.show(far).job
    assert (shown.priority, shown.priority_base) == (-2, 20)
    text = CliRunner().invoke(cli, ["jobs", "show", str(far)], env={"FORKLIFT_DSN": dsn})
    assert "priority -2 (given 20, raised by aging)" in text.stdout, text.output
    # The kept priority is the one it was given, however many passes raise it.
    conn.execute("UPDATE forklift.jobs SET run_at = now() - interval '250 seconds'"
                 " WHERE id = %s", (near,))
    assert run_age(dsn, "aged", 60, -2) == 1
    assert prio(conn, near) == (-1, 3)


def test_one_statement_raises_at_most_a_batch_and_skips_locked_jobs(
    bound: Forklift, conn: psycopg.Connection[Any], dsn: str
) -> None:
    ids = [waiting(conn, "batched", 5) for _ in range(3)]
    with psycopg.connect(dsn) as claimer:  # a claim holding one row
        claimer.execute("SELECT 1 FROM forklift.jobs WHERE id = %s FOR UPDATE", (ids[0],))
        assert run_age(dsn, "batched", 60, 0, batch=1) == 1
        assert run_age(dsn, "batched", 60, 0) == 1  # the locked one is skipped, not waited on
        assert prio(conn, ids[0]) == (5, None)
    assert run_age(dsn, "batched", 60, 0) == 1
    assert {prio(conn, i) for i in ids} == {(0, 5)}


def test_aging_is_turned_off_with_none_and_the_cli(
    bound: Forklift, conn: psycopg.Connection[Any], dsn: str
) -> None:
    def run(*args: str) -> Any:
        return CliRunner().invoke(cli, list(args), env={"FORKLIFT_DSN": dsn})

    got = run("queues", "aging", "mail", "30s", "--top", "1", "--create")
    assert got.exit_code == 0, got.output
    assert "one step every 30s, up to priority 1" in got.stdout
    assert listed(dsn) == [("mail", 30.0, 1)]
    bad = run("queues", "aging", "mail", "soon")
    assert bad.exit_code == 2 and "soon" in bad.stderr
    off = run("queues", "aging", "mail", "off", "--json")
    assert off.exit_code == 0 and '"priority_aging": null' in off.stdout
    assert listed(dsn) == []


def test_the_aging_statement_reads_its_queue_from_the_claim_index(
    bound: Forklift, conn: psycopg.Connection[Any]
) -> None:
    from forklift._worker.maintenance.ager import AGE_SQL

    # 100k waiting jobs in a queue without aging and 10k, fresh, in one with it.
    conn.execute("""
        INSERT INTO forklift.jobs (queue, kind, priority, state, run_at)
        SELECT CASE WHEN i % 11 = 0 THEN 'aged' ELSE 'plain' END, 'k' || (i % 5), i % 7,
               'available', now() - make_interval(secs => i % 20)
        FROM generate_series(1, 110000) i""")
    conn.execute("ANALYZE forklift.jobs")
    got = conn.execute("EXPLAIN (FORMAT JSON) " + AGE_SQL.replace("{s}", "forklift"),
                       {"q": "aged", "every": 60.0, "top": 0, "batch": 1000}).fetchone()
    assert got is not None

    def nodes(plan: dict[str, Any]) -> list[dict[str, Any]]:
        return [plan, *(n for child in plan.get("Plans", []) for n in nodes(child))]

    scans = nodes(got[0][0]["Plan"])
    assert not [n for n in scans if n["Node Type"] == "Seq Scan"], scans
    assert "jobs_claim_idx" in {n.get("Index Name") for n in scans}


def test_an_enqueue_that_replaces_an_aged_job_gives_it_its_new_priority(
    bound: Forklift, conn: psycopg.Connection[Any], dsn: str
) -> None:
    job = low.enqueue({}, queue="replaced", unique_key="report-1")
    conn.execute("UPDATE forklift.jobs SET run_at = now() - interval '1 hour' WHERE id = %s",
                 (job.id,))
    assert run_age(dsn, "replaced", 60, 0) == 1
    assert prio(conn, job.id) == (0, 2)
    again = low.enqueue({}, queue="replaced", unique_key="report-1", on_conflict="replace",
                        priority=7)
    assert again.id == job.id and (again.priority, again.priority_base) == (7, None)
    assert prio(conn, job.id) == (7, None)
