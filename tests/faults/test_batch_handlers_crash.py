"""A batch call survives its worker killed with SIGKILL: every job of the call is rescued
after its lease (the attempt counted, an error entry ``lease_expired``) and completed exactly
once by another worker.

Worker A is a real subprocess (``forklift worker --app apps.batch_handlers:app``) killed while
its handler holds the call; worker B finishes the jobs. The handler records each call it gets
and each job it finishes in tables of its own (tests/apps/batch_handlers.py).
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from apps import batch_handlers as bh
from apps import faults
from apps.basic import running_worker
from helpers import wait_until

from forklift import Forklift

LEASE = 2.0

procs = faults.procs  # fixture: worker subprocesses of one test, with their logs


@pytest.fixture
def app(dsn: str, conn: psycopg.Connection[Any]) -> Iterator[Forklift]:
    bh.setup(conn)
    bh.app.use(dsn)
    try:
        yield bh.app
    finally:
        bh.app.close()


def test_a_call_killed_mid_batch_is_rescued_and_each_job_completed_once(
    app: Forklift, conn: psycopg.Connection[Any], procs: faults.Procs
) -> None:
    ids = bh.double.enqueue_many([{"n": n, "hold": "never"} for n in range(3)])
    a = procs.start(concurrency=4, lease=LEASE, poll_interval=0.2, app="apps.batch_handlers:app")
    faults.registered(conn, a)
    # The handler holds the whole call (the gate never opens on a first attempt).
    (first,) = wait_until(lambda: bh.calls(conn, "bh.double"), timeout=30,
                          message=lambda: f"no call started:\n{a.log()[-3000:]}")
    assert sorted(first["jobs"]) == sorted(ids) and first["attempts"] == [1, 1, 1]
    assert faults.all_in(conn, ids, "running")
    a.signal(signal.SIGKILL)
    assert a.popen.wait(10) == -signal.SIGKILL

    with running_worker(app, queues=["default"], concurrency=4, lease=LEASE,
                        poll_interval=0.2, leader_interval=0.1):
        wait_until(lambda: faults.all_in(conn, ids, "completed"), timeout=60,
                   message=lambda: f"not all completed: {faults.states(conn, ids)}")
    for job_id in ids:
        attempt, errors = conn.execute(
            "SELECT attempt, errors FROM forklift.jobs WHERE id = %s", (job_id,)).fetchone()
        assert attempt == 2  # the killed call's attempt counted
        assert [e["code"] for e in errors] == ["lease_expired"]
    # Completed exactly once each, by the second worker's calls.
    assert bh.done_counts(conn) == dict.fromkeys(ids, 1)
    later = bh.calls(conn, "bh.double")[1:]
    assert sorted(j for c in later for j in c["jobs"]) == sorted(ids)
    assert all(c["attempts"] == [2] * len(c["jobs"]) and c["worker"] != first["worker"]
               for c in later)
