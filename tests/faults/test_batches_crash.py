"""Batches survive a worker killed with SIGKILL: the in-flight target is rescued like any job,
a serial batch resumes at the next target, and the batch settles (and enqueues its callbacks)
exactly once.

Worker A is a real subprocess (``forklift worker --app apps.batches:app``) killed mid-target;
worker B finishes the batch.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from apps import batches as bapp
from apps import faults
from apps.basic import running_worker
from helpers import wait_until

from forklift import Forklift

LEASE = 2.0


@pytest.fixture
def app(dsn: str, conn: psycopg.Connection[Any]) -> Iterator[Forklift]:
    with bapp.bound(dsn, conn) as bound_app:
        yield bound_app


procs = faults.procs  # fixture: worker subprocesses of one test, with their logs


def start_a(procs: faults.Procs, conn: psycopg.Connection[Any]) -> faults.WorkerProc:
    # The fault tests' subprocess harness, running this module's app (the last --app wins).
    a = procs.start(concurrency=4, lease=LEASE, poll_interval=0.2,
                    extra=["--app", "apps.batches:app"])
    faults.registered(conn, a)
    return a


def kill(a: faults.WorkerProc) -> None:
    a.signal(signal.SIGKILL)
    assert a.popen.wait(10) == -signal.SIGKILL


def starts(conn: psycopg.Connection[Any], batch_id: int) -> list[tuple[int, int]]:
    return [(r["idx"], r["attempt"]) for r in bapp.ledger(conn, batch_id, "start")]


def running_index(conn: psycopg.Connection[Any], batch_id: int, index: int) -> bool:
    return bapp.target_states(conn, batch_id)[index] == "running" and any(
        r["idx"] == index for r in bapp.ledger(conn, batch_id, "start"))


def wait_done(conn: psycopg.Connection[Any], batch_id: int) -> str:
    return wait_until(
        lambda: bapp.finished(conn, batch_id), timeout=60,
        message=lambda: f"batch did not finish: {bapp.batch_row(conn, batch_id)}"
        f" {bapp.target_states(conn, batch_id)}",
    )


def test_callbacks_are_enqueued_once_when_the_settling_worker_is_killed(
    app: Forklift, conn: psycopg.Connection[Any], procs: faults.Procs
) -> None:
    a = start_a(procs, conn)
    targets = [{"n": 0}, {"n": 1}, {"n": 2, "hold": "never", "hold_attempts": 1}]
    batch, _ = app.batch("batch.step", targets, caller="crash", on_complete="batch.notify",
                         on_success="batch.notify")
    wait_until(lambda: bapp.target_states(conn, batch.id) == ["completed", "completed", "running"]
               and running_index(conn, batch.id, 2), timeout=30)
    kill(a)  # while the last target runs: nothing about the batch was settled yet
    assert bapp.batch_row(conn, batch.id)["state"] == "running"

    with running_worker(app, concurrency=4, lease=LEASE, poll_interval=0.2, leader_interval=0.1):
        assert wait_done(conn, batch.id) == "done"
        wait_until(lambda: len(bapp.ledger(conn, batch.id, "callback")) == 2, timeout=30)
    row = bapp.batch_row(conn, batch.id)
    assert row["settlements"] == 1 and row["completed"] == 3
    callbacks = conn.execute(
        "SELECT count(*) FROM forklift.jobs WHERE kind = 'batch.notify'"
        " AND (meta -> 'batch' ->> 'batch_id')::bigint = %s", (batch.id,)).fetchone()
    assert callbacks == (2,)  # on_complete once, on_success once
    last = conn.execute("SELECT attempt, errors FROM forklift.jobs WHERE batch_id = %s"
                        " AND batch_index = 2", (batch.id,)).fetchone()
    assert last[0] == 2 and [e["code"] for e in last[1]] == ["lease_expired"]


def test_a_serial_batch_resumes_at_the_next_target_after_kill_9(
    app: Forklift, conn: psycopg.Connection[Any], procs: faults.Procs
) -> None:
    a = start_a(procs, conn)
    targets = [{"n": i} for i in range(5)]
    targets[2] = {"n": 2, "hold": "never", "hold_attempts": 1}
    batch, _ = app.batch("batch.step", targets, caller="crash", mode="serial")
    wait_until(lambda: running_index(conn, batch.id, 2), timeout=30)
    assert bapp.target_states(conn, batch.id) == ["completed", "completed", "running",
                                                  "waiting", "waiting"]
    kill(a)

    with running_worker(app, concurrency=4, lease=LEASE, poll_interval=0.2, leader_interval=0.1):
        assert wait_done(conn, batch.id) == "done"
    # Target 2 ran again (rescued, attempt 2), then 3 and 4: in order, never two at once.
    assert starts(conn, batch.id) == [(0, 1), (1, 1), (2, 1), (2, 2), (3, 1), (4, 1)]
    ledger = [r for r in bapp.ledger(conn, batch.id) if r["what"] in ("start", "end")]
    ends = {(r["idx"], r["attempt"]): r["at"] for r in ledger if r["what"] == "end"}
    begins = {(r["idx"], r["attempt"]): r["at"] for r in ledger if r["what"] == "start"}
    for i in range(4):
        last = max(at for (idx, _), at in ends.items() if idx == i)
        assert last <= begins[(i + 1, 1)], f"target {i + 1} started before target {i} ended"
    row = bapp.batch_row(conn, batch.id)
    assert (row["completed"], row["in_flight"], row["settlements"]) == (5, 0, 1)


def test_a_parallel_batch_carries_on_after_kill_9(
    app: Forklift, conn: psycopg.Connection[Any], procs: faults.Procs
) -> None:
    a = start_a(procs, conn)
    targets = [{"n": i} for i in range(6)]
    for i in (1, 2):
        targets[i] = {"n": i, "hold": "never", "hold_attempts": 1}
    batch, _ = app.batch("batch.step", targets, caller="crash", max_parallel=2)
    wait_until(lambda: running_index(conn, batch.id, 1) and running_index(conn, batch.id, 2),
               timeout=30)
    assert bapp.target_states(conn, batch.id)[3:] == ["waiting"] * 3
    kill(a)

    with running_worker(app, concurrency=4, lease=LEASE, poll_interval=0.2, leader_interval=0.1):
        assert wait_done(conn, batch.id) == "done"
    attempts = conn.execute("SELECT batch_index, attempt FROM forklift.jobs WHERE batch_id = %s"
                            " ORDER BY batch_index", (batch.id,)).fetchall()
    assert attempts == [(0, 1), (1, 2), (2, 2), (3, 1), (4, 1), (5, 1)]
    row = bapp.batch_row(conn, batch.id)
    assert (row["completed"], row["in_flight"], row["settlements"]) == (6, 0, 1)
