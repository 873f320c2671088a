"""The worker as supervised services: a dying service is restarted and counted, and the
leader's chores run independently of each other and of the election."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import psycopg
from apps import services
from apps.basic import running_worker
from helpers import wait_until

from forklift import Forklift, Worker
from forklift.ops import Operator

GHOST_SQL = """
INSERT INTO forklift.jobs (queue, kind, state, attempt, worker_id, fence, lease_expires_at,
                           attempted_at)
VALUES ('services', 'services.quick', 'running', 1, 'ghost:1:dead', nextval('forklift.fence_seq'),
        now() - interval '1 second', now() - interval '1 minute')
RETURNING id
"""


@contextlib.contextmanager
def bound(dsn: str) -> Iterator[Forklift]:
    services.app.use(dsn)
    try:
        yield services.app
    finally:
        services.app.close()


class Flaky:
    """A service whose loop dies ``deaths`` times, then runs until the worker stops."""

    name = "flaky"

    def __init__(self, deaths: int) -> None:
        self.deaths = deaths
        self.runs = 0

    async def run(self) -> None:
        self.runs += 1
        if self.runs <= self.deaths:
            raise RuntimeError(f"flaky death {self.runs}")
        await asyncio.Event().wait()


def test_a_service_whose_loop_dies_is_restarted_counted_and_listed(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    flaky = Flaky(deaths=3)
    with bound(dsn) as app:
        worker = Worker(app, lease=3.0, queues=["services"])
        worker.add_service(flaky)
        thread = threading.Thread(target=lambda: asyncio.run(worker.run()), daemon=True)
        thread.start()
        try:
            wait_until(lambda: flaky.runs == 4, timeout=30, message=lambda: f"runs {flaky.runs}")
            job = app.kind("services.quick").enqueue({})
            wait_until(lambda: conn.execute("SELECT state FROM forklift.jobs WHERE id = %s",
                                            (job.id,)).fetchone() == ("completed",),
                       timeout=30, message="the worker stopped working")
            assert worker.supervisor.restarts == {"flaky": 3}
            with Operator(dsn) as op:
                listed = wait_until(
                    lambda: [w for w in op.workers() if w.restarts.get("flaky") == 3],
                    timeout=30, message=lambda: f"workers: {op.workers()}")
            assert listed[0].id == worker.id
            assert listed[0].to_json()["restarts"] == {"flaky": 3}
        finally:
            loop = worker._loop
            if loop is not None:
                loop.call_soon_threadsafe(worker.drain)
            thread.join(30)
    assert not thread.is_alive()


def test_a_chore_stuck_on_a_lock_stops_neither_rescue_nor_the_election(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    # The cron chore's table is locked: every cron pass waits out its lock timeout and fails.
    # Meanwhile the rescuer must rescue, and the elector must keep leadership renewed.
    with bound(dsn) as app, running_worker(app, lease=2.0, queues=["services"]) as worker:
        cron = next(s for s in _chores(worker) if s.name == "cron")
        wait_until(lambda: worker.is_leader, timeout=30, message="never became the leader")
        wait_until(lambda: conn.execute("SELECT count(*) FROM forklift.schedules").fetchone()
                   == (1,), timeout=30, message="the schedule was not synced")
        with psycopg.Connection.connect(dsn) as locker:
            locker.execute("LOCK TABLE forklift.schedules IN ACCESS EXCLUSIVE MODE")
            elected = _leader(conn)
            failures = cron.failures
            ghost = conn.execute(GHOST_SQL).fetchone()[0]  # type: ignore[index]
            lapses: list[Any] = []

            def watch() -> bool:
                row = _leader(conn)
                if row is None or row[0] != elected[0] or not row[2]:
                    lapses.append(row)
                return cron.failures >= failures + 2

            # Two cron passes fail on the lock (5 s lock timeout each, more than two leases).
            wait_until(watch, timeout=60, interval=0.05, message="cron did not fail twice")
            state = conn.execute("SELECT state, errors FROM forklift.jobs WHERE id = %s",
                                 (ghost,)).fetchone()
            locker.rollback()
        assert not lapses, f"leadership lapsed while a chore was stuck: {lapses}"
        assert state is not None and state[0] in ("available", "retryable", "running", "completed")
        assert [e["code"] for e in state[1]] == ["lease_expired"], state
        assert worker.is_leader


def _leader(conn: psycopg.Connection[Any]) -> tuple[Any, ...] | None:
    return conn.execute("SELECT worker_id, elected_at, expires_at > now() FROM forklift.leader"
                        " WHERE name = 'leader'").fetchone()


def _chores(worker: Any) -> list[Any]:
    tasks = worker.supervisor.tasks
    assert "cron" in tasks and "rescue" in tasks
    return list(worker.chores)
