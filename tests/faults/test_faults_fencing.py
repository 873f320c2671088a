"""Fencing and leases: a worker whose lease is gone changes nothing, learns it, and stops its
handler; a worker that cannot renew stops its handlers before anyone else may take the jobs."""

from __future__ import annotations

import asyncio
import signal
from typing import Any

import psycopg
import pytest
from apps import faults
from apps.faults import all_in, registered
from helpers import wait_until

from forklift._db.sqltext import render
from forklift._worker import leases, settle
from forklift._worker.maintenance import rescuer as leader

pytestmark = pytest.mark.slow
db, procs = faults.db, faults.procs  # fixtures


def _async(dsn: str, op: Any) -> Any:
    async def go() -> Any:
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as c:
            return await op(c)

    return asyncio.run(go())


def test_writes_under_a_stale_fence_change_nothing(db: psycopg.Connection[Any], dsn: str) -> None:
    job_id = faults.enqueue(db, "faults.quick", {})
    db.execute(
        "UPDATE forklift.jobs SET state = 'running', attempt = 1, worker_id = 'w-new',"
        " fence = nextval('forklift.fence_seq'), lease_expires_at = now() + interval '1 minute'"
        " WHERE id = %s",
        (job_id,),
    )
    current = faults.job(db, job_id)
    stale = current["fence"] - 1
    assert _async(dsn, lambda c: leases.renew(c, "forklift", {stale: job_id}, 60)) == {}
    assert _async(dsn, lambda c: leases.write_progress(
        c, "forklift", [(job_id, stale, '{"done": 1}', '{"p": 1}')])) == set()
    for nxt in ("completed", "retryable", "dead", "cancelled", "scheduled"):
        refused = _async(dsn, lambda c, n=nxt: settle.write(c, "forklift", [settle.Outcome(
            job_id, stale, n, result='"late"', error={"code": "error"}, progress='{"x": 1}')]))
        assert refused == {}
    assert faults.job(db, job_id) == current
    # The current fence is accepted, and only while the job is running.
    assert _async(dsn, lambda c: leases.renew(c, "forklift", {current["fence"]: job_id}, 60)) == {
        current["fence"]: False
    }


def test_a_sigstopped_worker_resumes_to_find_its_lease_gone_and_changes_nothing(
    db: psycopg.Connection[Any], procs: faults.Procs
) -> None:
    a = procs.start(concurrency=2, lease=2.0)
    a_id = registered(db, a)
    job_id = faults.enqueue(db, "faults.hold",
                            {"gate": "release-a", "hold_attempts": 1, "progress": True})
    wait_until(lambda: (faults.job(db, job_id)["progress"] or {}).get("note", "").startswith(a_id),
               timeout=30, message="A never reported progress")
    fence_a = faults.job(db, job_id)["fence"]
    b = procs.start(concurrency=2, lease=2.0)
    b_id = registered(db, b)

    a.signal(signal.SIGSTOP)
    wait_until(lambda: faults.job(db, job_id)["state"] == "completed", timeout=30,
               message=lambda: f"B did not finish the job: {faults.job(db, job_id)}")
    done = faults.job(db, job_id)
    assert done["result"]["worker"] == b_id and done["fence"] != fence_a
    assert done["progress"]["note"] == f"done by {b_id}"
    assert [e["code"] for e in done["errors"]] == ["lease_expired"]

    # A's handler would now finish too: the gate is open when it wakes up.
    faults.open_gate(db, "release-a")
    a.signal(signal.SIGCONT)
    wait_until(lambda: "lease lost" in a.log() or "refused (fence" in a.log(), timeout=30,
               message="A did not notice that its lease was gone")
    assert a.stop() == 0  # every write A would make has been made (or not) by now
    assert faults.job(db, job_id) == done
    log = a.log()
    if "lease lost" in log:  # A learned it before its handler returned: the handler was told
        assert (fence_a, a_id, "cancelled:lease_lost") in faults.notes(db, job_id)
    assert f"job {job_id}" in log


def test_an_ack_in_flight_when_the_job_is_rescued_is_refused(
    db: psycopg.Connection[Any], dsn: str, procs: faults.Procs
) -> None:
    a = procs.start(concurrency=1, lease=5.0)
    a_id = registered(db, a)
    job_id = faults.enqueue(db, "faults.hold_sync", {"gate": "go", "cooperative": False})
    wait_until(lambda: faults.notes(db, job_id), timeout=30, message="never started")
    fence = faults.job(db, job_id)["fence"]
    with psycopg.connect(dsn, autocommit=False) as rival:
        # Hold the row, then let the handler finish: its outcome waits on our lock.
        rival.execute("SELECT 1 FROM forklift.jobs WHERE id = %s FOR UPDATE", (job_id,))
        faults.open_gate(db, "go")
        wait_until(lambda: db.execute(
            "SELECT 1 FROM pg_stat_activity WHERE application_name = %s AND wait_event_type"
            " = 'Lock'", (f"forklift:{a_id}:complete",)).fetchone(),
            timeout=30, message="the ack never reached the database")
        # Meanwhile the lease runs out and the job is rescued (the real rescue statement).
        rival.execute("UPDATE forklift.jobs SET lease_expires_at = now() - interval '1 second'"
                      " WHERE id = %s", (job_id,))
        rescued = rival.execute(render(leader.RESCUE_SQL, "forklift"),
                                {"batch": 1000, "expiries": 3}).fetchall()
        assert [r[:2] for r in rescued] == [(job_id, "retryable")]
        rival.commit()
    after = faults.job(db, job_id)
    wait_until(lambda: "refused (fence" in a.log(), timeout=30, message="no refusal logged")
    # The late ack changed nothing: the rescue stands (the job may run again from here).
    got = faults.job(db, job_id)
    if got["state"] == "retryable":
        assert got == after
    assert got["fence"] != fence or got == after
    assert [e["code"] for e in got["errors"]][:1] == ["lease_expired"]
    assert f"job {job_id}: outcome completed refused (fence {fence} is stale" in a.log()
    assert a.stop() == 0


def test_a_worker_that_cannot_renew_stops_its_handler_and_writes_nothing(
    db: psycopg.Connection[Any], dsn: str, procs: faults.Procs
) -> None:
    a = procs.start(concurrency=1, lease=2.0)
    a_id = registered(db, a)
    job_id = faults.enqueue(db, "faults.hold", {"hold_attempts": 1})
    wait_until(lambda: faults.notes(db, job_id), timeout=30, message="never started")
    fence = faults.job(db, job_id)["fence"]
    with psycopg.connect(dsn, autocommit=False) as blocker:
        # Every renewal now waits on this lock and times out: the lease cannot be renewed.
        blocker.execute("SELECT 1 FROM forklift.jobs WHERE id = %s FOR UPDATE", (job_id,))
        wait_until(lambda: (fence, a_id, "cancelled:lease_lost") in faults.notes(db, job_id),
                   timeout=30, message=lambda: f"handler not cancelled:\n{a.log()[-3000:]}")
        before = faults.job(db, job_id)
        blocker.rollback()
    assert before["state"] == "running" and before["fence"] == fence
    # Nothing was written for that attempt; the job is rescued and run again (attempt 2).
    wait_until(lambda: all_in(db, [job_id], "completed"), timeout=30,
               message=lambda: f"not finished: {faults.job(db, job_id)}")
    done = faults.job(db, job_id)
    assert done["attempt"] == 2 and done["fence"] != fence
    assert [e["code"] for e in done["errors"]] == ["lease_expired"]
    assert "lease lost, no heartbeat reached the database" in a.log()
    assert a.stop() == 0


def test_a_refused_progress_write_cancels_the_handler(
    db: psycopg.Connection[Any], procs: faults.Procs
) -> None:
    # A long lease: the next heartbeat is far away, so the progress write is what finds out.
    a = procs.start(concurrency=1, lease=30.0)
    a_id = registered(db, a)
    job_id = faults.enqueue(db, "faults.hold", {"progress": True})
    wait_until(lambda: faults.job(db, job_id)["progress"], timeout=30, message="no progress")
    fence = faults.job(db, job_id)["fence"]
    # Someone else takes the job over (what a requeue or a rescue and re-claim do to the fence).
    db.execute("UPDATE forklift.jobs SET fence = nextval('forklift.fence_seq') WHERE id = %s",
               (job_id,))
    taken = faults.job(db, job_id)
    wait_until(lambda: (fence, a_id, "cancelled:lease_lost") in faults.notes(db, job_id),
               timeout=30, message=lambda: f"handler not cancelled:\n{a.log()[-3000:]}")
    assert a.stop() == 0
    assert faults.job(db, job_id) == taken
    assert f"job {job_id} (fence {fence}): lease lost, its progress write was refused" in a.log()
