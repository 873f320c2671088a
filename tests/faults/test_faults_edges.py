"""The worker's edges, with real worker subprocesses and real signals: poison jobs,
attempts charged only for runs, handlers that stop when told, and handlers that will not stop."""

from __future__ import annotations

import signal
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from apps import faults
from apps.faults import all_in, registered
from helpers import wait_until

pytestmark = pytest.mark.slow
db, procs = faults.db, faults.procs  # fixtures

# A worker with a local buffer from the first claim on: it learns a completion rate from
# quick jobs, and with this horizon keeps up to PREFETCH jobs claimed beyond its free slots.
PREFETCH = {"prefetch_horizon": 1000.0, "prefetch_max": 20}


def _leader(procs: faults.Procs, db: psycopg.Connection[Any]) -> faults.WorkerProc:
    """A worker that leads (rescues) but serves another queue: it never runs the test's jobs."""
    lead = procs.start(concurrency=1, lease=2.0, queues="elsewhere")
    lead_id = registered(db, lead)
    wait_until(lambda: db.execute("SELECT worker_id FROM forklift.leader WHERE expires_at > now()"
                                  ).fetchone() == (lead_id,), timeout=30, message="no leader")
    return lead


def _warm(db: psycopg.Connection[Any], n: int = 30) -> None:
    ids = [faults.enqueue(db, "faults.quick", {}) for _ in range(n)]
    wait_until(lambda: all_in(db, ids, "completed"), timeout=30, message="quick jobs stuck")


def _buffering(procs: faults.Procs, db: psycopg.Connection[Any]) -> faults.WorkerProc:
    """A leader elsewhere, and a one-slot worker with a local buffer (warmed up)."""
    _leader(procs, db)
    w = procs.start(concurrency=1, lease=2.0, options=PREFETCH)
    registered(db, w)
    _warm(db)
    return w


def _running_unstarted(db: psycopg.Connection[Any], ids: list[int]) -> list[int]:
    rows = db.execute("SELECT id FROM forklift.jobs WHERE id = ANY(%s) AND state = 'running'"
                      " AND attempted_at IS NULL", (ids,)).fetchall()
    return [r[0] for r in rows]


# -- a poison job ---------------------------------------------------------------------------------
def test_a_job_that_kills_its_process_backs_off_and_goes_dead_worker_lost_after_three(
    db: psycopg.Connection[Any], procs: faults.Procs
) -> None:
    _leader(procs, db)
    poison = faults.enqueue(db, "faults.crash", {})
    for run in range(1, 4):
        w = procs.start(concurrency=1, lease=2.0)
        wait_until(lambda r=run: len(faults.notes(db, poison)) == r,  # type: ignore[misc]
                   timeout=30, message=f"run {run} did not start")
        assert w.popen.wait(30) == 17
        wait_until(lambda: faults.job(db, poison)["state"] != "running", timeout=30,
                   message="not rescued")
        job = faults.job(db, poison)
        assert job["attempt"] == run  # every run charged, though its worker never settled it
        last = job["errors"][-1]
        if run < 3:
            assert (job["state"], last["code"]) == ("retryable", "lease_expired"), job
            # The kind's backoff (fixed 1 s, no jitter) from the rescue, not run_at = now().
            assert job["run_at"] - _at(last) == timedelta(seconds=1), job
    assert (job["state"], last["code"]) == ("dead", "worker_lost"), job
    assert "3 attempts in a row" in last["message"]
    assert job["lost"] == 3 and job["max_attempts"] == 10


def test_a_kinds_own_lease_expiries_decides_when_it_is_worker_lost(
    db: psycopg.Connection[Any], procs: faults.Procs
) -> None:
    _leader(procs, db)
    poison = faults.enqueue(db, "faults.crash_fragile", {})
    w = procs.start(concurrency=1, lease=2.0)
    wait_until(lambda: len(faults.notes(db, poison)) == 1, timeout=30, message="did not start")
    assert w.popen.wait(30) == 17
    wait_until(lambda: faults.job(db, poison)["state"] != "running", timeout=30,
               message="not rescued")
    job = faults.job(db, poison)
    last = job["errors"][-1]
    assert (job["state"], last["code"], job["attempt"]) == ("dead", "worker_lost", 1), job


def test_lease_expiries_must_be_a_whole_number_of_at_least_one() -> None:
    from forklift import ConfigError, Forklift, JobContext

    app = Forklift("dbname=unused")
    for bad in (0, -1, 1.5, True, "3"):
        with pytest.raises(ConfigError, match="lease_expiries"):
            @app.job(name=f"bad.{bad!r}", lease_expiries=bad)  # type: ignore[arg-type]
            def handler(ctx: JobContext, args: dict[str, Any]) -> None: ...
    assert app.job(name="good", lease_expiries=5)(
        lambda ctx, args: None).lease_expiries == 5  # type: ignore[arg-type,return-value]


def _at(entry: dict[str, Any]) -> Any:
    from datetime import datetime

    return datetime.fromisoformat(entry["at"])


# -- an attempt is charged only when its handler starts -------------------------------------------
def test_buffered_jobs_of_a_killed_worker_get_their_attempt_back_and_run_at_once(
    db: psycopg.Connection[Any], procs: faults.Procs
) -> None:
    w = _buffering(procs, db)
    with db.transaction():  # one claim takes them all: the hold runs, the rest wait buffered
        held = faults.enqueue(db, "faults.hold", {"gate": "never"}, priority=0)
        waiting = [faults.enqueue(db, "faults.quick", {}, priority=1) for _ in range(5)]
    wait_until(lambda: _running_unstarted(db, waiting) == sorted(waiting), timeout=30,
               message=lambda: f"not buffered: {faults.states(db, waiting)}")
    assert db.execute("SELECT attempted_at IS NOT NULL FROM forklift.jobs WHERE id = %s",
                      (held,)).fetchone() == (True,)
    w.signal(signal.SIGKILL)
    wait_until(lambda: all(faults.job(db, i)["state"] != "running" for i in waiting),
               timeout=30, message="not all rescued")
    for i in waiting:
        job = faults.job(db, i)
        assert job["attempt"] == 0, job  # never ran: not charged
        assert job["run_at"] <= _at(job["errors"][-1]), job  # and no backoff
        assert "had not started" in job["errors"][-1]["message"]
    assert faults.job(db, held)["attempt"] == 1  # it ran: charged
    after = procs.start(concurrency=2, lease=2.0)
    registered(db, after)
    wait_until(lambda: all_in(db, waiting, "completed"), timeout=30, message="not re-run")
    assert all(faults.job(db, i)["attempt"] == 1 for i in waiting)


def test_a_buffered_job_that_started_is_charged_when_its_worker_is_killed(
    db: psycopg.Connection[Any], procs: faults.Procs
) -> None:
    w = _buffering(procs, db)
    with db.transaction():
        first = faults.enqueue(db, "faults.hold", {"gate": "first"}, priority=0)
        second = faults.enqueue(db, "faults.hold", {"gate": "never"}, priority=1)
    wait_until(lambda: _running_unstarted(db, [second]) == [second], timeout=30,
               message="second not buffered")
    faults.open_gate(db, "first")
    wait_until(lambda: len(faults.notes(db, second)) == 1, timeout=30, message="not started")
    # The worker records buffered starts in one statement a few times a second.
    wait_until(lambda: _running_unstarted(db, [second]) == [], timeout=30,
               message="the start was not recorded")
    w.signal(signal.SIGKILL)
    wait_until(lambda: faults.job(db, second)["state"] != "running", timeout=30,
               message="not rescued")
    job = faults.job(db, second)
    assert (job["attempt"], job["lost"], job["errors"][-1]["code"]) == (1, 1, "lease_expired")
    assert faults.job(db, first)["state"] == "completed"


# -- a handler that stops when told ---------------------------------------------------------------
@pytest.mark.parametrize("how", ["return", "raise"])
def test_a_handler_stopped_by_the_drain_is_released_not_completed(
    db: psycopg.Connection[Any], procs: faults.Procs, how: str
) -> None:
    w = procs.start(concurrency=1, lease=5.0, drain_timeout=0.5)
    registered(db, w)
    job_id = faults.enqueue(db, "faults.coop", {"gate": "never", "how": how})
    wait_until(lambda: len(faults.notes(db, job_id)) == 1, timeout=30, message="not started")
    w.signal(signal.SIGTERM)
    assert w.popen.wait(30) == 0
    job = faults.job(db, job_id)
    assert (job["state"], job["attempt"]) == ("retryable", 0), job
    assert [e["code"] for e in job["errors"]] == ["interrupted"]
    assert job["result"] is None
    if how == "return":
        assert job["partial"]["stopped"] is True  # what it returned: its partial result


# -- async handlers that ignore their cancellation ------------------------------------------------
def test_a_worker_whose_async_handlers_ignore_cancellation_exits_and_nobody_runs_them_meanwhile(
    db: psycopg.Connection[Any], procs: faults.Procs
) -> None:
    a = procs.start(concurrency=2, lease=2.0, drain_timeout=1.0)
    a_id = registered(db, a)
    ids = [faults.enqueue(db, "faults.stubborn", {"gate": f"g{i}"}) for i in range(2)]
    wait_until(lambda: all(len(faults.notes(db, i)) >= 2 for i in ids), timeout=30,
               message="not ticking")
    b = procs.start(concurrency=2, lease=2.0)
    b_id = registered(db, b)
    a.signal(signal.SIGTERM)
    # The handlers would tick for ever; the worker exits within its bound anyway.
    assert a.popen.wait(60) == 0
    exited = db.execute("SELECT clock_timestamp()").fetchone()[0]  # type: ignore[index]
    last_a = db.execute("SELECT max(at) FROM public.notes WHERE worker = %s",
                        (a_id,)).fetchone()[0]  # type: ignore[index]
    assert last_a < exited
    for gate in range(len(ids)):
        faults.open_gate(db, f"g{gate}")
    wait_until(lambda: all_in(db, ids, "completed"), timeout=60,
               message=lambda: f"not finished by B: {faults.states(db, ids)}")
    for i in ids:
        starts_b = db.execute(
            "SELECT min(at) FROM public.notes WHERE job_id = %s AND worker = %s AND what = 'start'",
            (i, b_id)).fetchone()[0]  # type: ignore[index]
        # Never two holders: B started it only after A's last tick (A's handler was gone).
        assert starts_b is not None and starts_b > last_a, (i, starts_b, last_a)
        assert faults.job(db, i)["errors"][-1]["code"] == "interrupted"
