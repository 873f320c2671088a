"""Cancelling a running job through the operator API, with a real worker running it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from apps import ops as ops_app
from apps.basic import running_worker
from apps.ops import insert_job, job_state
from helpers import wait_until

from forklift import Forklift
from forklift.ops import Operator


@pytest.fixture
def app(dsn: str) -> Iterator[Forklift]:
    ops_app.app.use(dsn)
    try:
        yield ops_app.app
    finally:
        ops_app.app.close()


def row(conn: psycopg.Connection[Any], job_id: int) -> dict[str, Any]:
    cur = conn.execute("SELECT state, result, errors, cancel_requested_at FROM forklift.jobs"
                       " WHERE id = %s", (job_id,))
    values = cur.fetchone()
    assert values is not None and cur.description is not None
    return {d.name: v for d, v in zip(cur.description, values, strict=True)}


def start_and_wait(kind: Any, conn: psycopg.Connection[Any]) -> int:
    job_id = int(kind.enqueue({}).id)
    wait_until(lambda: ops_app.started(job_id).is_set() and job_state(conn, job_id) == "running",
               timeout=30, message=lambda: f"job {job_id} started: {job_state(conn, job_id)}")
    return job_id


def test_a_running_job_ends_cancelled(app: Forklift, dsn: str, conn: psycopg.Connection[Any]) -> None:
    with running_worker(app, queues=["ops"], concurrency=2, lease=30), Operator(dsn) as op:
        job = start_and_wait(ops_app.wait_for_cancel, conn)
        r = op.cancel(job, reason="stop it")
        assert (r.outcome, r.state) == ("cancel_requested", "running")
        # lease=30 heartbeats every 10 s: ending well before that shows the NOTIFY did it
        wait_until(lambda: job_state(conn, job) == "cancelled", timeout=8,
                   message=lambda: f"job {job} is {job_state(conn, job)}")
    after = row(conn, job)
    assert after["errors"][-1]["code"] == "cancelled"
    assert after["cancel_requested_at"] is not None
    assert op.explain(job).codes == ["cancelled"]


def test_a_handler_that_returns_after_the_cancel_ends_cancelled_its_value_kept(
    app: Forklift, dsn: str, conn: psycopg.Connection[Any]
) -> None:
    with running_worker(app, queues=["ops"], lease=30), Operator(dsn) as op:
        job = start_and_wait(ops_app.finish_anyway, conn)
        assert op.cancel(job).outcome == "cancel_requested"
        wait_until(lambda: job_state(conn, job) not in ("running", None), timeout=15,
                   message=lambda: f"job {job} is {job_state(conn, job)}")
    # Once the worker signalled the attempt, the signal decides: the handler's return is not a
    # success, and what it returned is kept as the partial result.
    after = row(conn, job)
    assert after["state"] == "cancelled" and after["result"] is None
    assert after["errors"][-1]["code"] == "cancelled"
    partial = conn.execute("SELECT partial FROM forklift.jobs WHERE id = %s", (job,)).fetchone()
    assert partial == ({"finished": "after the cancel request"},)


def test_the_heartbeat_carries_a_cancel_whose_notify_was_missed(
    app: Forklift, dsn: str, conn: psycopg.Connection[Any]
) -> None:
    with running_worker(app, queues=["ops"], lease=3):
        job = start_and_wait(ops_app.wait_for_cancel, conn)
        conn.execute("UPDATE forklift.jobs SET cancel_requested_at = now() WHERE id = %s", (job,))
        wait_until(lambda: job_state(conn, job) == "cancelled", timeout=15,
                   message=lambda: f"job {job} is {job_state(conn, job)}")


def test_cancel_beats_rescue(app: Forklift, dsn: str, conn: psycopg.Connection[Any]) -> None:
    orphan = insert_job(conn, state="running", queue="ops", worker_id="crashed")
    with Operator(dsn) as op:
        assert op.cancel(orphan).outcome == "cancel_requested"
    conn.execute("UPDATE forklift.jobs SET lease_expires_at = now() - interval '1 second'")
    with running_worker(app, queues=["ops"], lease=3):
        wait_until(lambda: job_state(conn, orphan) == "cancelled", timeout=20,
                   message=lambda: f"job {orphan} is {job_state(conn, orphan)}")
