"""Connection faults: every backend of a worker terminated mid-run, a listening session that
goes silent, and the whole server restarted under running workers. Work resumes; nothing is
lost; no job runs twice at once."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import psycopg
import pytest
from apps import faults
from apps.faults import all_in, registered
from helpers import wait_until

from forklift import embedded
from forklift._db.migrate import migrate
from forklift._worker.run import EXIT_UNSETTLED

pytestmark = pytest.mark.slow
db, procs = faults.db, faults.procs  # fixtures


def completed(conn: psycopg.Connection[Any], ids: list[int]) -> int:
    row = conn.execute(
        "SELECT count(*) FROM forklift.jobs WHERE id = ANY(%s) AND state = 'completed'", (ids,)
    ).fetchone()
    return int(row[0]) if row else 0


def enqueue_work(conn: psycopg.Connection[Any], n: int, work_ms: int = 5) -> list[int]:
    return faults.app.kind("faults.soak").enqueue_many(
        [{"seed": i, "fail": 0.0, "fatal": 0.0, "work_ms": work_ms} for i in range(n)], conn=conn
    )


def test_terminating_every_backend_of_a_worker_mid_run(
    db: psycopg.Connection[Any], procs: faults.Procs
) -> None:
    a = procs.start(concurrency=4, lease=3.0)
    a_id = registered(db, a)
    ids = enqueue_work(db, 300, work_ms=20)
    for round_ in range(3):
        floor = completed(db, ids)
        if len(ids) - floor < 100:
            ids.extend(enqueue_work(db, 200, work_ms=20))  # every round meets work in flight
        wait_until(lambda f=floor: completed(db, ids) > f + 10, timeout=30,  # type: ignore[misc]
                   message=f"no progress before round {round_}")
        # Every session the worker has (it reopens them as it needs them), all at once.
        wait_until(lambda: set(faults.LEADER_PURPOSES) <= set(faults.purposes(db, a_id)),
                   timeout=30,
                   message=lambda: f"sessions not all back: {faults.purposes(db, a_id)}")
        killed = db.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE application_name LIKE %s AND datname = current_database()",
            (f"forklift:{a_id}:%",),
        ).fetchone()
        assert killed and killed[0] >= len(faults.LEADER_PURPOSES)
    wait_until(lambda: all_in(db, ids, "completed"), timeout=60,
               message=lambda: f"stuck: {faults.states(db, ids)}")
    assert a.alive()
    assert "listener re-established" in a.log()
    faults.assert_ledger_sound(db)
    assert a.stop() == 0


def test_a_silently_lost_listener_is_detected_and_followed_by_a_claim_pass(
    db: psycopg.Connection[Any], procs: faults.Procs
) -> None:
    # The poll backstop is an hour away: only LISTEN (or the claim pass after re-listening)
    # can start these jobs within the test's deadlines.
    a = procs.start(concurrency=2, lease=5.0, poll_interval=3600.0)
    a_id = registered(db, a)
    listen = wait_until(lambda: faults.backends(db, a_id, "listen"), timeout=30,
                        message="no listening session")
    if not faults.local_backend(listen[0]):
        pytest.skip("the server's backends are not on this machine: cannot SIGSTOP them")
    probe = faults.enqueue(db, "faults.quick", {})
    wait_until(lambda: all_in(db, [probe], "completed"), timeout=30, message="LISTEN not working")

    procs.freeze(listen[0])  # no RST, no error: the session just stops answering
    missed = faults.enqueue(db, "faults.quick", {})  # its NOTIFY goes to the frozen session
    wait_until(lambda: "listener re-established" in a.log(), timeout=40,
               message=lambda: f"loss not detected:\n{a.log()[-3000:]}")
    wait_until(lambda: all_in(db, [missed], "completed"), timeout=30,
               message="no claim pass after re-listening")
    assert faults.backends(db, a_id, "listen") != listen
    woken = faults.enqueue(db, "faults.quick", {})
    wait_until(lambda: all_in(db, [woken], "completed"), timeout=30,
               message="the new listening session is not listening")
    assert a.stop() == 0


# -- a server of our own, to restart and to freeze --------------------------------------------------
@pytest.fixture(scope="module")
def own_server(scratch_home: Path) -> str:
    if os.environ.get("FORKLIFT_TEST_DSN"):
        pytest.skip("FORKLIFT_TEST_DSN points at an external server; restarting the server needs"
                    " a private embedded one, and the suite was told not to start servers")
    conninfo = embedded.ensure_server(scratch_home)
    migrate(conninfo, "forklift")
    return conninfo


@pytest.fixture
def own(own_server: str, tmp_path: Path) -> Any:
    with psycopg.connect(own_server, autocommit=True) as conn:
        conn.execute("TRUNCATE forklift.jobs, forklift.workers, forklift.leader")
        conn.execute("DROP TABLE IF EXISTS public.gates, public.notes, public.ledger")
        faults.setup(conn)
    p = faults.Procs(own_server, tmp_path)
    try:
        yield p
    finally:
        p.close()
        print(p.logs())


def _connect(dsn: str) -> psycopg.Connection[Any]:
    return wait_until(lambda: _try_connect(dsn), timeout=60, interval=0.1,
                      message="the server did not come back")


def _try_connect(dsn: str) -> psycopg.Connection[Any] | None:
    try:
        return psycopg.connect(dsn, autocommit=True, connect_timeout=5)
    except psycopg.OperationalError:
        return None


def test_the_server_restarted_mid_run(scratch_home: Path, own: faults.Procs) -> None:
    workers = [own.start(concurrency=4, lease=3.0) for _ in range(2)]
    with _connect(own.dsn) as conn:
        for w in workers:
            registered(conn, w)
        ids = enqueue_work(conn, 400, work_ms=10)
        wait_until(lambda: completed(conn, ids) > 50, timeout=30, message="no progress")
    embedded.stop_server(scratch_home)  # fast shutdown: every session is cut
    embedded.ensure_server(scratch_home)
    with _connect(own.dsn) as conn:
        wait_until(lambda: all_in(conn, ids, "completed"), timeout=90,
                   message=lambda: f"stuck after the restart: {faults.states(conn, ids)}")
        assert all(w.alive() for w in workers)
        faults.assert_ledger_sound(conn)
    for w in workers:
        assert w.stop() == 0


def test_a_frozen_server_cannot_hold_a_workers_shutdown(
    scratch_home: Path, own: faults.Procs
) -> None:
    a = own.start(concurrency=2, lease=3.0)
    with _connect(own.dsn) as conn:
        a_id = registered(conn, a)
        job_id = faults.enqueue(conn, "faults.sleepy", {"sleep_in": a_id})
        wait_until(lambda: faults.job(conn, job_id)["state"] == "running", timeout=30,
                   message="did not start")
    info = embedded.server_status(scratch_home)
    postmaster = int(info["pid"])
    # Everything stops answering: the postmaster (no new connections) and every backend.
    import psutil

    own.freeze(postmaster)  # first: it starts no process after this
    for child in psutil.Process(postmaster).children():
        own.freeze(child.pid, gone_ok=True)
    a.signal(signal.SIGTERM)
    wait_until(lambda: "drain requested" in a.log(), timeout=30, message="no drain")
    a.signal(signal.SIGTERM)  # and do not wait for the job
    # It exits within its bound, saying its final writes did not land (nothing answered).
    assert a.popen.wait(90) == EXIT_UNSETTLED
    own.thaw()
    # The job runs again, in B: rescued when its lease expires, or released by A after all.
    b = own.start(concurrency=2, lease=3.0)
    with _connect(own.dsn) as conn:
        registered(conn, b)
        wait_until(lambda: all_in(conn, [job_id], "completed"), timeout=60,
                   message=lambda: f"not rescued: {faults.job(conn, job_id)}")
        # Rescued at lease expiry, or released by A's drain (its statement reached the server
        # when the server woke up), with or without an error entry: a release of an attempt
        # whose start the frozen server never recorded is refunded without one.
        assert [e["code"] for e in faults.job(conn, job_id)["errors"]] in (
            ["lease_expired"], ["interrupted"], [])
