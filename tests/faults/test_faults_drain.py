"""Drain at shutdown: SIGTERM stops claiming at once, lets short jobs finish, interrupts and
releases long ones at the cutoff, and a second SIGTERM skips the wait. Final writes are bounded:
a database that stops answering cannot hold the worker's exit."""

from __future__ import annotations

import signal
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from apps import faults
from apps.faults import all_in, registered
from helpers import wait_until
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from relay import Relay

from forklift._worker.run import EXIT_UNSETTLED

pytestmark = pytest.mark.slow
db, procs = faults.db, faults.procs  # fixtures


def worker_row(conn: psycopg.Connection[Any], worker_id: str) -> tuple[str, Any] | None:
    row = conn.execute(
        "SELECT state, drain_deadline FROM forklift.workers WHERE id = %s", (worker_id,)
    ).fetchone()
    return (str(row[0]), row[1]) if row else None


def started(conn: psycopg.Connection[Any], ids: list[int]) -> bool:
    return all(any(what == "start" for _, _, what in faults.notes(conn, i)) for i in ids)


def test_sigterm_lets_short_jobs_finish_and_never_claims_again(
    db: psycopg.Connection[Any], procs: faults.Procs
) -> None:
    a = procs.start(concurrency=4, lease=5.0, drain_timeout=60.0)
    a_id = registered(db, a)
    short = [faults.enqueue(db, "faults.hold_sync", {"gate": "finish"}) for _ in range(3)]
    wait_until(lambda: started(db, short), timeout=30, message="jobs did not start")

    a.signal(signal.SIGTERM)
    row = wait_until(lambda: (r := worker_row(db, a_id)) and r[0] == "draining" and r,
                     timeout=30, message="the worker row never said draining")
    assert row[1] is not None  # the drain deadline, for the console's countdown
    # A free slot and fresh work, woken by NOTIFY: a draining worker must not take it.
    later = [faults.enqueue(db, "faults.quick", {}) for _ in range(2)]
    assert a.alive()
    faults.open_gate(db, "finish")
    assert a.popen.wait(30) == 0
    assert all_in(db, short, "completed")
    for i in later:
        j = faults.job(db, i)
        assert (j["state"], j["attempt"], j["attempted_at"]) == ("available", 0, None)
    assert worker_row(db, a_id)[0] == "exited"  # type: ignore[index]  # kept as history
    assert "drain requested" in a.log()


def test_the_cutoff_interrupts_long_jobs_and_releases_them_with_the_attempt_refunded(
    db: psycopg.Connection[Any], procs: faults.Procs
) -> None:
    a = procs.start(concurrency=4, lease=5.0, drain_timeout=1.0)
    a_id = registered(db, a)
    cooperative = [
        faults.enqueue(db, "faults.hold", {}),  # async: cancelled
        faults.enqueue(db, "faults.hold_sync", {"cooperative": True}),  # sync: told, stops
    ]
    stubborn = faults.enqueue(db, "faults.hold_sync", {"cooperative": False})  # ignores it
    ids = [*cooperative, stubborn]
    wait_until(lambda: started(db, ids), timeout=30, message="jobs did not start")

    a.signal(signal.SIGTERM)
    assert a.popen.wait(60) == 0
    for i in ids:
        j = faults.job(db, i)
        assert j["state"] in ("retryable", "available"), j  # the leader may stage it at once
        assert j["attempt"] == 0, "a drain interruption is not the job's fault: refunded"
        assert [(e["code"], e["attempt"], e["worker"]) for e in j["errors"]] == [
            ("interrupted", 1, a_id)
        ]
        assert j["lease_expires_at"] is None
    assert ("cancelled:interrupted" in [w for _, _, w in faults.notes(db, cooperative[0])])
    assert ("saw-cancel:interrupted" in [w for _, _, w in faults.notes(db, cooperative[1])])
    # The abandoned handler's job is held back until its thread is surely gone.
    j = faults.job(db, stubborn)
    assert j["state"] == "retryable" and "abandoned" in j["errors"][0]["message"]
    assert j["run_at"] - j["attempted_at"] >= timedelta(seconds=5)
    assert worker_row(db, a_id)[0] == "exited"  # type: ignore[index]


def test_a_second_sigterm_skips_the_wait(
    db: psycopg.Connection[Any], procs: faults.Procs
) -> None:
    a = procs.start(concurrency=2, lease=5.0, drain_timeout=600.0)
    a_id = registered(db, a)
    job_id = faults.enqueue(db, "faults.hold", {})
    wait_until(lambda: started(db, [job_id]), timeout=30, message="job did not start")
    a.signal(signal.SIGTERM)
    wait_until(lambda: (r := worker_row(db, a_id)) and r[0] == "draining", timeout=30,
               message="not draining")
    a.signal(signal.SIGTERM)
    assert a.popen.wait(60) == 0  # far sooner than the ten-minute cutoff
    j = faults.job(db, job_id)
    assert j["state"] in ("retryable", "available") and j["attempt"] == 0
    assert [e["code"] for e in j["errors"]] == ["interrupted"]
    assert "not waiting for in-flight jobs" in a.log()


def test_a_database_that_stops_answering_cannot_hold_shutdown(
    db: psycopg.Connection[Any], procs: faults.Procs
) -> None:
    a = procs.start(concurrency=2, lease=3.0)
    a_id = registered(db, a)
    first = faults.enqueue(db, "faults.quick", {})
    wait_until(lambda: all_in(db, [first], "completed"), timeout=30, message="not completed")
    second = faults.enqueue(db, "faults.hold_sync", {"gate": "late"})
    wait_until(lambda: started(db, [second]), timeout=30, message="job did not start")
    purposes = faults.LEADER_PURPOSES
    sessions = wait_until(
        lambda: (s := [faults.backends(db, a_id, p) for p in purposes]) and all(s) and s,
        timeout=30, message="the worker's sessions are not all open")
    pids = [pid for group in sessions for pid in group]
    if not all(faults.local_backend(p) for p in pids):
        pytest.skip("the server's backends are not on this machine: cannot SIGSTOP them")
    # Every session the worker has stops answering; the outcome of the job hangs in flight.
    for pid in pids:
        procs.freeze(pid)
    faults.open_gate(db, "late")
    wait_until(lambda: "end" in [w for _, _, w in faults.notes(db, second)], timeout=30,
               message="the handler did not return")
    a.signal(signal.SIGTERM)
    # Bounded either way; the code says whether every final write landed (on a fresh session)
    # or some did not (EXIT_UNSETTLED: those are rescued as their leases expire).
    assert a.popen.wait(60) in (0, EXIT_UNSETTLED)
    # Whatever became of the hung write, the job ends exactly once: written late by the thawed
    # session, by the worker's last try on a fresh one, or rescued and run again.
    procs.thaw()
    b = procs.start(concurrency=2, lease=3.0)
    registered(db, b)
    wait_until(lambda: all_in(db, [second], "completed"), timeout=30,
               message=lambda: f"not completed: {faults.job(db, second)}")


def test_a_drain_whose_final_writes_cannot_land_exits_with_its_own_code(
    db: psycopg.Connection[Any], procs: faults.Procs, dsn: str
) -> None:
    # The worker reaches the database through a relay the test can take away: every connection
    # cut, new ones refused, while a job is in flight. Its drain cannot write the outcome it
    # owes, so it exits EXIT_UNSETTLED, not 0: an orchestrator can tell that from a clean drain.
    params = conninfo_to_dict(dsn)
    unix = f"{params.get('host')}/.s.PGSQL.{params.get('port') or 5432}"
    if not str(params.get("host") or "").startswith("/"):
        pytest.skip("the test server is not on a local Unix socket: nothing to relay")
    relay = Relay(unix, host="127.0.0.1")
    try:
        a = procs.start(dsn=make_conninfo(dsn, host="127.0.0.1", port=relay.port),
                        concurrency=2, lease=3.0, drain_timeout=1.0)
        registered(db, a)
        job = faults.enqueue(db, "faults.hold", {"gate": "never", "hold_attempts": 1})
        wait_until(lambda: started(db, [job]), timeout=30, message="job did not start")
        relay.close()
        a.signal(signal.SIGTERM)
        assert a.popen.wait(60) == EXIT_UNSETTLED
    finally:
        relay.close()
    assert "final outcome writes failed" in a.log() or "did not finish" in a.log()
    # Nothing is lost: the job is rescued once its lease expires, by a worker that can reach it.
    b = procs.start(concurrency=2, lease=3.0)
    registered(db, b)
    wait_until(lambda: all_in(db, [job], "completed"), timeout=60,
               message=lambda: f"not rescued: {faults.job(db, job)}")
