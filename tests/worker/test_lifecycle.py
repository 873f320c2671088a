"""Observers of a worker's attempts join through forklift._jobs.lifecycle: a registered observer
is told each attempt's start and outcome and gets the leader tasks it asks for, and a worker
nobody observes has nothing registered at any per-attempt point."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from apps import services
from apps.basic import running_worker
from helpers import wait_until

from forklift import Forklift
from forklift._jobs import lifecycle


@contextlib.contextmanager
def bound(dsn: str) -> Iterator[Forklift]:
    services.app.use(dsn)
    try:
        yield services.app
    finally:
        services.app.close()


def _state(conn: psycopg.Connection[Any], job_id: int) -> str | None:
    row = conn.execute("SELECT state FROM forklift.jobs WHERE id = %s", (job_id,)).fetchone()
    return None if row is None else str(row[0])


def test_an_observer_sees_each_attempt_and_runs_its_leader_task(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    seen: list[tuple[Any, ...]] = []
    claimed: list[int] = []
    probes: list[int] = []

    async def probe(c: Any) -> None:
        cur = await c.execute("SELECT count(*) FROM forklift.jobs")
        row = await cur.fetchone()
        probes.append(int(row[0]))

    def observer(life: lifecycle.Lifecycle) -> None:
        if life.worker.app is not services.app:
            return  # another test's worker in this process
        life.on_start.append(lambda a: seen.append(("start", a.job.id, a.job.kind)))
        life.on_settle.append(lambda a, o: seen.append(("settle", a.job.id, o.next)))
        life.on_claim.append(claimed.append)
        life.on_drain.append(lambda: seen.append(("drain",)))
        life.leader_tasks.append(lifecycle.LeaderTask("observed-probe", 0.05, probe))

    lifecycle.observe(observer)
    try:
        with bound(dsn) as app, running_worker(app, lease=3.0, queues=["services"]) as worker:
            job = app.kind("services.quick").enqueue({})
            wait_until(lambda: ("settle", job.id, "completed") in seen, timeout=30,
                       message=lambda: f"seen {seen}")
            assert seen.index(("start", job.id, "services.quick")) < seen.index(
                ("settle", job.id, "completed"))
            assert sum(claimed) >= 1
            # Told as the outcome is queued, before it is written.
            wait_until(lambda: _state(conn, job.id) == "completed", timeout=30,
                       message="the job's outcome was not written")
            wait_until(lambda: probes, timeout=30, message="the leader task never ran")
            assert "observed-probe" in worker.supervisor.tasks
        assert seen.count(("drain",)) == 1  # told as the worker stopped (running_worker drains it)
    finally:
        lifecycle.forget(observer)

    seen.clear()
    with bound(dsn) as app, running_worker(app, lease=3.0, queues=["services"]) as worker:
        job = app.kind("services.quick").enqueue({})
        wait_until(lambda: _state(conn, job.id) == "completed", timeout=30,
                   message="the job did not complete")
        assert seen == []  # forgotten: not attached to a worker started since
        assert "observed-probe" not in worker.supervisor.tasks


def test_a_worker_nobody_observes_registers_nothing_per_attempt(
    dsn: str, conn: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Tracing or metrics another test of this process turned on are off for this worker.
    from forklift import otel

    monkeypatch.setattr(otel, "_tracer", None)
    if "forklift.metrics" in sys.modules:
        monkeypatch.setattr(sys.modules["forklift.metrics"], "_enabled", False)
    with bound(dsn) as app, running_worker(app, lease=3.0, queues=["services"]) as worker:
        life = worker.lifecycle
        job = app.kind("services.quick").enqueue({})
        wait_until(lambda: _state(conn, job.id) == "completed", timeout=30,
                   message="the job did not complete")
        assert (life.on_start, life.on_settle, life.on_lease_lost, life.on_claim,
                life.on_flush, life.on_drain, life.leader_tasks) == ([], [], [], [], [], [], [])
        assert worker.stats.completed >= 1
