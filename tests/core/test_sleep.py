"""Sleep: ctx.sleep parks the job (slot and lease given back at once, the attempt refunded, no
error entry) and it resumes after the duration with finished steps skipped. Real worker
processes: a concurrency-1 worker runs other work while a job sleeps; parked jobs hold no
connection; a worker killed while its jobs sleep loses nothing."""

from __future__ import annotations

import signal
from typing import Any

import psycopg
import wf_common
from apps import faults
from apps.basic import running_worker
from helpers import wait_until
from wf_common import FAST, job, parked_until_past, stage_once

from forklift import Forklift

app = wf_common.app
procs = wf_common.procs


def step(conn: psycopg.Connection[Any], job_id: int, name: str) -> tuple[Any, ...] | None:
    return conn.execute("SELECT state, wake_at FROM forklift.job_steps WHERE job_id = %s"
                        " AND name = %s", (job_id, name)).fetchone()


def sleeping(conn: psycopg.Connection[Any], job_id: int) -> bool:
    s = step(conn, job_id, "cool-down")
    return job(conn, job_id)["state"] == "scheduled" and s is not None and s[0] == "sleeping"


def runs(conn: psycopg.Connection[Any], what: str) -> int:
    row = conn.execute("SELECT count(*) FROM public.wf_seen WHERE what = 'step'"
                       " AND detail ->> 'step' = %s", (what,)).fetchone()
    return int(row[0]) if row else 0


def start(procs: faults.Procs, conn: psycopg.Connection[Any], concurrency: int = 1
          ) -> faults.WorkerProc:
    w = procs.start(concurrency=concurrency, lease=2.0, poll_interval=0.2,
                    extra=["--app", "apps.workflows:app"])
    faults.registered(conn, w)
    return w


def test_a_sleeping_job_holds_no_slot_and_resumes_with_finished_steps_skipped(
    app: Forklift, conn: psycopg.Connection[Any], procs: faults.Procs
) -> None:
    start(procs, conn, concurrency=1)
    s = app.kind("wf.sleeper").enqueue({"secs": 4})
    wait_until(lambda: sleeping(conn, s.id), timeout=30, message=lambda: procs.logs())
    row = job(conn, s.id)
    wake = step(conn, s.id, "cool-down")
    assert wake is not None and row["run_at"] == wake[1]  # due at the wake time, by one clock
    assert row["attempt"] == 0 and row["errors"] == [] and row["lease_expires_at"] is None
    # The one slot is free: other work runs while the job sleeps.
    t = app.kind("wf.task").enqueue({"n": 1})
    wait_until(lambda: job(conn, t.id)["state"] == "completed", timeout=30)
    assert sleeping(conn, s.id)
    wait_until(lambda: job(conn, s.id)["state"] == "completed", timeout=30,
               message=lambda: f"{job(conn, s.id)}")
    row = job(conn, s.id)
    assert row["result"] == {"woke": 1} and row["attempt"] == 1 and row["errors"] == []
    assert runs(conn, "before") == 1 and runs(conn, "after") == 1
    assert step(conn, s.id, "cool-down")[0] == "completed"  # type: ignore[index]


def test_many_parked_jobs_hold_no_connection(app: Forklift, conn: psycopg.Connection[Any],
                                             procs: faults.Procs) -> None:
    w = start(procs, conn, concurrency=4)
    worker_id = faults.registered(conn, w)
    ids = app.kind("wf.sleeper").enqueue_many([{"secs": 3600}] * 200)
    wait_until(lambda: conn.execute(
        "SELECT count(*) FROM forklift.jobs WHERE id = ANY(%s) AND state = 'scheduled'",
        (ids,)).fetchone() == (200,), timeout=60, message=lambda: procs.logs())
    # One session per purpose of the worker's own (claim, complete, the leader's chores...),
    # none per parked job: no purpose holds two, and 200 parked jobs did not add any.
    names = faults.purposes(conn, worker_id)
    assert len(names) == len(set(names)) and len(names) <= 17, names
    assert conn.execute("SELECT count(*) FROM forklift.jobs WHERE state = 'running'"
                        ).fetchone() == (0,)


def test_the_sync_form_parks_and_resumes(app: Forklift, conn: psycopg.Connection[Any]) -> None:
    s = app.kind("wf.sleeper_sync").enqueue({"secs": 0.5})
    with running_worker(app, **FAST):
        wait_until(lambda: job(conn, s.id)["state"] == "completed", timeout=30)
    assert runs(conn, "before") == 1 and runs(conn, "after") == 1
    assert job(conn, s.id)["attempt"] == 1


def test_a_worker_killed_while_its_job_sleeps_loses_nothing(
    app: Forklift, conn: psycopg.Connection[Any], procs: faults.Procs
) -> None:
    w = start(procs, conn)
    s = app.kind("wf.sleeper").enqueue({"secs": 2})
    wait_until(lambda: sleeping(conn, s.id), timeout=30, message=lambda: procs.logs())
    w.signal(signal.SIGKILL)
    assert w.popen.wait(10) == -signal.SIGKILL
    with running_worker(app, **FAST):
        wait_until(lambda: job(conn, s.id)["state"] == "completed", timeout=30)
    row = job(conn, s.id)
    assert row["errors"] == [] and row["attempt"] == 1  # not rescued: it held no lease
    assert runs(conn, "before") == 1


def test_cancelling_a_sleeping_job(app: Forklift, dsn: str, conn: psycopg.Connection[Any]) -> None:
    from forklift.ops import Operator

    s = app.kind("wf.sleeper").enqueue({"secs": 3600})
    with running_worker(app, **FAST):
        wait_until(lambda: sleeping(conn, s.id), timeout=30)
        with Operator(dsn, actor="test") as op:
            op.cancel(s.id)
        assert job(conn, s.id)["state"] == "cancelled"


def test_a_bad_duration_fails_the_job_for_good(app: Forklift, conn: psycopg.Connection[Any]
                                               ) -> None:
    s = app.kind("wf.sleeper").enqueue({"secs": -1})
    with running_worker(app, **FAST):
        wait_until(lambda: job(conn, s.id)["state"] == "dead", timeout=30)
    assert [e["code"] for e in job(conn, s.id)["errors"]] == ["invalid_option"]


def test_one_stager_pass_ends_a_batch_of_sleeps_and_resumes_write_nothing_for_them(
    app: Forklift, dsn: str, conn: psycopg.Connection[Any]
) -> None:
    """Waking parked jobs is one statement per batch: the stager's pass that makes them
    available ends their sleeps too, so a resumed attempt finds its sleep over and writes
    only its own steps (here "after"), never a statement per job to end the sleep."""
    from forklift._features.durable.runtime import _RUNTIMES

    n = 60
    ids = app.kind("wf.sleeper").enqueue_many([{"secs": 1}] * n)
    with running_worker(app, **{**FAST, "concurrency": 20, "lead": False}):
        wait_until(lambda: all(sleeping(conn, j) for j in ids), timeout=60)
    wait_until(lambda: parked_until_past(conn, ids), timeout=30)
    assert stage_once(dsn) == n  # one pass: every due parked job, and its sleep
    assert conn.execute("SELECT count(*) FROM forklift.job_steps WHERE job_id = ANY(%s)"
                        " AND name = 'cool-down' AND state = 'completed'", (ids,)).fetchone() == (n,)
    assert conn.execute("SELECT count(*) FROM forklift.jobs WHERE id = ANY(%s)"
                        " AND state = 'available'", (ids,)).fetchone() == (n,)
    with running_worker(app, **{**FAST, "concurrency": 20}) as w:
        runtime = _RUNTIMES[w.id]
        wait_until(lambda: all(job(conn, j)["state"] == "completed" for j in ids), timeout=60)
        writes = runtime.statements - runtime.load_statements
    assert writes == n  # the "after" steps; nothing for the sleeps
    assert runs(conn, "before") == n and runs(conn, "after") == n
    assert {job(conn, j)["attempt"] for j in ids} == {1}


def test_staging_a_job_that_never_slept_touches_no_step(
    app: Forklift, dsn: str, conn: psycopg.Connection[Any]
) -> None:
    """Only the parked steps of the jobs moved end: a plain scheduled job's staging changes no
    step, and a sleep not yet due stays a sleep."""
    plain = app.kind("wf.task").enqueue({"n": 1}, delay=0.01)
    s = app.kind("wf.sleeper").enqueue({"secs": 3600})
    with running_worker(app, **{**FAST, "lead": False}):
        wait_until(lambda: sleeping(conn, s.id), timeout=30)
    wait_until(lambda: parked_until_past(conn, [plain.id]), timeout=30)
    assert stage_once(dsn) == 1
    assert job(conn, plain.id)["state"] == "available" and sleeping(conn, s.id)


def test_the_stager_notifies_only_when_a_worker_is_idle_on_the_queue(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    """A sleep's wake-up (the stager making due jobs available) follows the rule of plain
    enqueues (tests/core/test_wake.py): no NOTIFY while no worker is idle."""
    from test_wake import _listener, _mark, _marks, _notes

    due = ("INSERT INTO forklift.jobs (queue, kind, state, run_at)"
           " VALUES (%s, 'wf.task', 'scheduled', now() - interval '1 second')")
    conn.execute(due, ("default",))
    with _listener(dsn) as listen:
        assert stage_once(dsn) == 1  # nobody idle: no NOTIFY
        assert _mark(conn, "w1", ["default", "other"])
        conn.execute(due, ("default",))
        assert stage_once(dsn) == 1  # consumes the mark on 'default', one NOTIFY
        assert _marks(conn) == [("other", "w1")]
        conn.execute("INSERT INTO forklift.jobs (queue, kind) VALUES ('other', 'wf.task')")
        assert _notes(listen, 2) == ["default", "other"]


def test_a_stager_pass_in_flight_holds_off_a_workers_idle_mark(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    from test_wake import _mark

    from forklift._db.sqltext import render
    from forklift._worker.maintenance.stager import STAGE_SQL

    conn.execute("INSERT INTO forklift.jobs (queue, kind, state, run_at)"
                 " VALUES ('default', 'wf.task', 'scheduled', now() - interval '1 second')")
    with psycopg.connect(dsn) as leader:
        leader.execute(render(STAGE_SQL, "forklift"), (100,))
        assert not _mark(conn, "w1", ["default"])
        leader.commit()
    assert _mark(conn, "w1", ["default"])
