"""Cron on a real database: one enqueue per tick, whoever leads and however many try at once;
missed-tick policies; pause, resume and run-now through the operator API."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from apps.basic import running_worker
from helpers import wait_until

from forklift import Forklift, JobContext, ReadOnly
from forklift._features import cron as cron_mod
from forklift.ops import schedules as ops
from forklift.ops.context import OpsContext

OPS = OpsContext(schema="forklift", actor="tester")
T0 = datetime(2024, 1, 1, tzinfo=UTC)


def make_app(dsn: str, cron: str = "*/5 * * * *", **options: Any) -> Forklift:
    app = Forklift(dsn)

    @app.periodic(cron, name="beat", args={"n": 1}, **options)
    @app.job(name="cron.beat", queue="cron")
    async def beat(ctx: JobContext, args: dict[str, int]) -> None:
        return None

    return app


def fire(app: Forklift, dsn: str, now: datetime | None = None) -> int:
    async def go() -> int:
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as c:
            return await cron_mod.tick(c, app=app, schema="forklift", now=now)

    return asyncio.run(go())


def anchor_at(conn: psycopg.Connection[Any], at: datetime | str) -> None:
    """Pretend the schedule was recorded at ``at`` and never fired."""
    conn.execute(
        "UPDATE forklift.schedules SET created_at = %s::timestamptz, last_tick_at = NULL,"
        " resumed_at = NULL WHERE name = 'beat'",
        (at,),
    )


def beats(conn: psycopg.Connection[Any]) -> list[tuple[int, str, str]]:
    return conn.execute(
        "SELECT id, meta->>'tick', state FROM forklift.jobs WHERE kind = 'cron.beat' ORDER BY id"
    ).fetchall()


def ticks(conn: psycopg.Connection[Any]) -> list[tuple[datetime, int | None]]:
    return conn.execute(
        "SELECT tick_at, job_id FROM forklift.schedule_ticks WHERE schedule = 'beat'"
        " AND NOT manual ORDER BY tick_at"
    ).fetchall()


def test_each_due_tick_is_enqueued_once(dsn: str, conn: psycopg.Connection[Any]) -> None:
    app = make_app(dsn)
    assert fire(app, dsn) == 0  # records the definition; nothing is due at creation
    anchor_at(conn, T0)
    assert fire(app, dsn, T0 + timedelta(minutes=12)) == 1  # skip: only the latest, 00:10
    assert fire(app, dsn, T0 + timedelta(minutes=12)) == 0
    assert fire(app, dsn, T0 + timedelta(minutes=14, seconds=59)) == 0
    assert fire(app, dsn, T0 + timedelta(minutes=15)) == 1
    jobs = beats(conn)
    assert [t for _, t, _ in jobs] == ["2024-01-01T00:10:00+00:00", "2024-01-01T00:15:00+00:00"]
    assert [j for _, j in ticks(conn)] == [i for i, _, _ in jobs]
    args = conn.execute("SELECT DISTINCT args FROM forklift.jobs WHERE kind = 'cron.beat'").fetchall()
    assert args == [({"n": 1},)]


def test_catch_up_runs_each_missed_tick_up_to_the_bound(dsn: str, conn: psycopg.Connection[Any]) -> None:
    app = make_app(dsn, policy="catch_up", max_catch_up=3)
    fire(app, dsn)
    anchor_at(conn, T0)
    assert fire(app, dsn, T0 + timedelta(hours=1)) == 3
    assert [t for _, t, _ in beats(conn)] == [
        "2024-01-01T00:50:00+00:00", "2024-01-01T00:55:00+00:00", "2024-01-01T01:00:00+00:00"
    ]
    assert fire(app, dsn, T0 + timedelta(hours=1, minutes=10)) == 2


def test_a_completed_tick_is_never_enqueued_again(dsn: str, conn: psycopg.Connection[Any]) -> None:
    app = make_app(dsn)
    fire(app, dsn)
    anchor_at(conn, T0)
    assert fire(app, dsn, T0 + timedelta(minutes=5)) == 1
    conn.execute("UPDATE forklift.jobs SET state = 'completed', finished_at = now()"
                 " WHERE kind = 'cron.beat'")
    # A leader working from a stale view (the schedule row rolled back to before the tick)
    # still meets the tick's row: the key, not the bookkeeping, is the guarantee.
    anchor_at(conn, T0)
    assert fire(app, dsn, T0 + timedelta(minutes=5)) == 0
    assert len(beats(conn)) == 1


def test_many_leaders_firing_at_once_enqueue_each_tick_once(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    apps = [make_app(dsn, policy="catch_up", max_catch_up=50) for _ in range(6)]
    fire(apps[0], dsn)
    anchor_at(conn, T0)
    now = T0 + timedelta(hours=2)

    async def everyone() -> list[int]:
        conns = [await psycopg.AsyncConnection.connect(dsn, autocommit=True) for _ in apps]
        try:
            return list(await asyncio.gather(*(
                cron_mod.tick(c, app=a, schema="forklift", now=now) for c, a in zip(conns, apps, strict=True)
            )))
        finally:
            for c in conns:
                await c.close()

    counts = asyncio.run(everyone())
    assert sum(counts) == 24  # 2 hours of five-minute ticks, each once
    jobs = beats(conn)
    assert len(jobs) == 24 and len({t for _, t, _ in jobs}) == 24
    assert sorted(j for _, j in ticks(conn)) == sorted(i for i, _, _ in jobs)


def test_pause_holds_and_resume_does_not_catch_up(dsn: str, conn: psycopg.Connection[Any]) -> None:
    app = make_app(dsn, cron="* * * * *", policy="catch_up", max_catch_up=100)
    fire(app, dsn)
    conn.execute("UPDATE forklift.schedules SET created_at = now() - interval '10 minutes'")
    info = ops.pause(conn, OPS, "beat", reason="maintenance window")
    assert info.paused and info.paused_by == "tester" and info.next_at is None
    assert fire(app, dsn) == 0
    assert ops.pause(conn, OPS, "beat").paused  # pausing twice is a no-op, audited as such
    info = ops.resume(conn, OPS, "beat")
    assert not info.paused and info.next_at is not None
    # Fired at instants placed against the resume, never at the wall clock's: "now + 61 s" holds
    # one minute boundary or two depending on the second the test runs in.
    resumed = conn.execute("SELECT resumed_at FROM forklift.schedules").fetchone()[0]  # type: ignore[index]
    boundary = resumed.replace(second=0, microsecond=0) + timedelta(minutes=1)
    assert info.next_at == boundary
    # the ten minutes passed while paused are not run...
    assert fire(app, dsn, boundary - timedelta(milliseconds=1)) == 0
    assert fire(app, dsn, boundary + timedelta(seconds=1)) == 1  # ...the first tick after is
    audit = conn.execute(
        "SELECT action, actor, target->>'schedule', reason, outcome FROM forklift.audit ORDER BY id"
    ).fetchall()
    assert audit == [
        ("schedule.pause", "tester", "beat", "maintenance window", "done"),
        ("schedule.pause", "tester", "beat", None, "noop: already paused"),
        ("schedule.resume", "tester", "beat", None, "done"),
    ]


def test_run_now_list_and_refusals(dsn: str, conn: psycopg.Connection[Any]) -> None:
    app = make_app(dsn, tz="Europe/Berlin")
    fire(app, dsn)
    [listed] = ops.list_schedules(conn, OPS)
    assert (listed.name, listed.kind, listed.cron, listed.tz, listed.queue) == (
        "beat", "cron.beat", "*/5 * * * *", "Europe/Berlin", "cron")
    assert listed.last_outcome is None and listed.next_at is not None
    assert listed.next_at.minute % 5 == 0
    ran = ops.run_now(conn, OPS, "beat", reason="checking")
    job = conn.execute("SELECT kind, queue, args, meta->>'manual' FROM forklift.jobs WHERE id = %s",
                       (ran.job_id,)).fetchone()
    assert job == ("cron.beat", "cron", {"n": 1}, "true")
    info = ops.get_schedule(conn, OPS, "beat")
    assert (info.last_job_id, info.last_manual, info.last_outcome) == (ran.job_id, True, "available")
    assert info.last_tick_at is None  # a manual run is not a tick
    assert ops.list_schedules(conn, OPS)[0].to_json()["last_outcome"] == "available"

    with pytest.raises(ops.ScheduleNotFound, match="known: beat"):
        ops.pause(conn, OPS, "nope")
    with pytest.raises(ReadOnly):
        ops.run_now(conn, OpsContext(schema="forklift", actor="x", read_only=True), "beat")
    outcomes = [r[0] for r in conn.execute("SELECT outcome FROM forklift.audit ORDER BY id")]
    assert outcomes == ["done", "refused: schedule_not_found"]


def test_definitions_follow_the_code(dsn: str, conn: psycopg.Connection[Any]) -> None:
    fire(make_app(dsn), dsn)
    changed = make_app(dsn, cron="0 * * * *", tz="Asia/Tokyo")
    cron_mod._synced.clear()
    fire(changed, dsn)
    assert conn.execute("SELECT cron, tz FROM forklift.schedules").fetchall() == [("0 * * * *", "Asia/Tokyo")]


def test_workers_enqueue_one_job_per_tick_across_a_leader_change(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    app = make_app(dsn, cron="* * * * * *", policy="catch_up", max_catch_up=100)
    options = {"leader_interval": 0.1, "lease": 2.0, "concurrency": 2}
    with contextlib.ExitStack() as stack:
        workers = [stack.enter_context(running_worker(app, **options)) for _ in range(3)]
        first = wait_until(lambda: next((w for w in workers if w.is_leader), None), timeout=20,
                           message="no worker became the leader")
        wait_until(lambda: len(ticks(conn)) >= 3, timeout=20, message="no ticks fired")
        # Hand leadership over: the leader drains and resigns, another takes the row.
        assert first._loop is not None
        first._loop.call_soon_threadsafe(first.drain)
        others = [w for w in workers if w is not first]
        wait_until(lambda: any(w.is_leader for w in others), timeout=20,
                   message="leadership did not move")
        seen = len(ticks(conn))
        wait_until(lambda: len(ticks(conn)) >= seen + 3, timeout=20,
                   message="ticks stopped after the leader change")
    rows = ticks(conn)
    jobs = beats(conn)
    assert len(jobs) == len(rows)
    assert sorted(j for _, j in rows) == sorted(i for i, _, _ in jobs)
    assert len({t for _, t, _ in jobs}) == len(jobs)
    # catch_up: not one second was skipped over the change, not one was doubled.
    seconds = [t for t, _ in rows]
    assert all(b - a == timedelta(seconds=1) for a, b in itertools.pairwise(seconds))
