"""Start-by deadlines at work: a job not started by its deadline never runs its handler. The
leader's sweep ends the ones that wait; a worker that claims one past its deadline ends it
without starting it. Either way it is a dead letter with the code ``expired``, its attempt count
what it was before, counted in metrics, and requeueable (without the deadline it had)."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from apps.basic import running_worker
from helpers import wait_until

from forklift import Forklift, InvalidOption, JobContext, metrics
from forklift._worker.maintenance.expirer import expire
from forklift.ops import Operator

app = Forklift()
#: Ids of the jobs whose handler ran (in-process workers only).
RAN: set[int] = set()
GATES: dict[str, threading.Event] = {}


@app.job(name="expires.work", queue="exp")
def work(ctx: JobContext, payload: dict[str, Any]) -> dict[str, bool]:
    RAN.add(ctx.job_id)
    return {"ran": True}


@app.job(name="expires.slot", queue="exp", timeout=60)
def slot(ctx: JobContext, payload: dict[str, str]) -> None:
    """Holds the worker's one slot until the test opens its gate."""
    GATES.setdefault(payload["gate"], threading.Event()).wait(30)


@app.job(name="expires.flaky", queue="exp", max_attempts=5)
def flaky(ctx: JobContext, payload: dict[str, Any]) -> None:
    RAN.add(ctx.job_id)
    raise RuntimeError("not yet")


@pytest.fixture
def bound(dsn: str) -> Iterator[Forklift]:
    RAN.clear()  # ids of another test's database mean nothing here
    app.use(dsn)
    try:
        yield app
    finally:
        app.close()
        for g in GATES.values():
            g.set()


def row(conn: psycopg.Connection[Any], job_id: int) -> dict[str, Any]:
    cur = conn.execute("SELECT * FROM forklift.jobs WHERE id = %s", (job_id,))
    values = cur.fetchone()
    assert values is not None and cur.description is not None
    return {d.name: v for d, v in zip(cur.description, values, strict=True)}


def past_deadline(conn: psycopg.Connection[Any], job_id: int) -> None:
    """Wait (by the server's clock) until the job's deadline has passed."""
    wait_until(lambda: conn.execute("SELECT now() > expires_at FROM forklift.jobs WHERE id = %s",
                                    (job_id,)).fetchone() == (True,),
               timeout=30, message=f"the deadline of job {job_id} passed")


def state_of(conn: psycopg.Connection[Any], job_id: int) -> str:
    got = conn.execute("SELECT state FROM forklift.jobs WHERE id = %s", (job_id,)).fetchone()
    assert got is not None
    return str(got[0])


def sweep(dsn: str) -> list[Any]:
    async def go() -> list[Any]:
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as aconn:
            return await expire(aconn, "forklift")

    return asyncio.run(go())


def assert_expired(conn: psycopg.Connection[Any], job_id: int, attempt: int = 0) -> None:
    got = row(conn, job_id)
    assert got["state"] == "dead" and got["finished_at"] is not None
    assert got["attempt"] == attempt  # no attempt spent
    assert got["errors"][-1]["code"] == "expired"
    assert got["errors"][-1]["attempt"] == attempt
    assert got["result"] is None and job_id not in RAN  # the handler never ran


def test_the_sweep_ends_waiting_jobs_past_their_deadline_with_no_worker_of_their_queue(
    bound: Forklift, conn: psycopg.Connection[Any], dsn: str
) -> None:
    gone = work.enqueue({}, expires=timedelta(seconds=1))
    scheduled = work.enqueue({}, delay=timedelta(seconds=0.5), expires=timedelta(seconds=0.5))
    later = work.enqueue({}, expires=timedelta(hours=1))
    plain = work.enqueue({})
    past_deadline(conn, gone.id)
    past_deadline(conn, scheduled.id)
    # A worker of another queue: only its leader's sweep can end them.
    with running_worker(app, queues=["exp-elsewhere"]) as worker:
        wait_until(lambda: state_of(conn, gone.id) == state_of(conn, scheduled.id) == "dead",
                   timeout=30, message="the leader swept the expired jobs")
    assert worker.stats.expired == 2  # counted once the sweep's statement returned
    assert_expired(conn, gone.id)
    assert_expired(conn, scheduled.id)
    assert row(conn, gone.id)["errors"][-1]["worker"] == worker.id
    assert state_of(conn, later.id) == state_of(conn, plain.id) == "available"
    with Operator(conn.info.dsn) as op:
        (group,) = [g for g in op.dead.groups().groups if g.code == "expired"]
    assert (group.kind, group.count) == ("expires.work", 2)


def test_a_job_claimed_after_its_deadline_behind_a_busy_worker_never_runs(
    bound: Forklift, conn: psycopg.Connection[Any]
) -> None:
    gate = f"busy-{os.getpid()}-{id(conn)}"
    busy = slot.enqueue({"gate": gate})
    # No leader here: no sweep, so the worker itself must find the deadline passed.
    with running_worker(app, concurrency=1, lead=False) as worker:
        wait_until(lambda: state_of(conn, busy.id) == "running", timeout=30,
                   message="the slot job started")
        late = work.enqueue({}, expires=timedelta(seconds=1))
        on_time = work.enqueue({})
        past_deadline(conn, late.id)
        GATES.setdefault(gate, threading.Event()).set()
        wait_until(lambda: state_of(conn, late.id) == "dead"
                   and state_of(conn, on_time.id) == "completed",
                   timeout=30, message="the worker took both jobs")
        assert worker.stats.expired == 1
    assert_expired(conn, late.id)
    assert row(conn, late.id)["errors"][-1]["worker"] == worker.id
    assert on_time.id in RAN


def test_a_job_started_before_its_deadline_is_unaffected(
    bound: Forklift, conn: psycopg.Connection[Any]
) -> None:
    job = work.enqueue({}, expires=timedelta(minutes=5))
    with running_worker(app) as worker:
        wait_until(lambda: state_of(conn, job.id) == "completed", timeout=30,
                   message="the job completed")
        assert worker.stats.expired == 0
    got = row(conn, job.id)
    assert (got["attempt"], got["errors"], got["result"]) == (1, [], {"ran": True})
    assert job.id in RAN


def test_a_retry_waiting_past_the_deadline_expires_with_its_spent_attempts_kept(
    bound: Forklift, conn: psycopg.Connection[Any], dsn: str
) -> None:
    job = flaky.enqueue({}, expires=timedelta(seconds=1), retry=None)
    with running_worker(app, lead=False):
        wait_until(lambda: state_of(conn, job.id) == "retryable", timeout=30,
                   message="the first attempt failed")
    RAN.discard(job.id)
    past_deadline(conn, job.id)
    assert [r.id for r in sweep(dsn)] == [job.id]
    assert_expired(conn, job.id, attempt=1)
    assert [e["code"] for e in row(conn, job.id)["errors"]] == ["error", "expired"]


def test_a_requeued_expired_job_runs_without_its_old_deadline(
    bound: Forklift, conn: psycopg.Connection[Any], dsn: str
) -> None:
    job = work.enqueue({}, expires=timedelta(seconds=1))
    past_deadline(conn, job.id)
    assert [(r.id, r.state) for r in sweep(dsn)] == [(job.id, "dead")]
    assert sweep(dsn) == []  # once only
    with Operator(dsn, actor="alice") as op:
        assert op.requeue(job.id).state == "available"
    requeued = row(conn, job.id)
    assert requeued["expires_at"] is None and requeued["attempt"] == 0
    with running_worker(app):
        wait_until(lambda: state_of(conn, job.id) == "completed", timeout=30,
                   message="the requeued job ran")
    assert job.id in RAN
    assert [e["code"] for e in row(conn, job.id)["errors"]] == ["expired"]  # history kept


def test_expired_jobs_are_counted_in_metrics(
    bound: Forklift, conn: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(metrics, "_enabled", True)

    def counted(queue: str = "exp") -> float:
        got = metrics.registry.get_sample_value(
            "forklift_jobs_expired_total", {"queue": queue, "kind": "expires.work"})
        return got or 0.0

    before, before_swept = counted(), counted("exp-elsewhere")
    gate = f"count-{os.getpid()}-{id(conn)}"
    busy = slot.enqueue({"gate": gate})
    swept = work.enqueue({}, queue="exp-elsewhere", expires=timedelta(seconds=1))
    with running_worker(app, concurrency=1, queues=["exp"], lead=False):
        wait_until(lambda: state_of(conn, busy.id) == "running", timeout=30,
                   message="the slot job started")
        late = work.enqueue({}, expires=timedelta(seconds=1))
        past_deadline(conn, late.id)
        GATES.setdefault(gate, threading.Event()).set()
        wait_until(lambda: state_of(conn, late.id) == "dead", timeout=30,
                   message="the worker ended the late job")
    assert counted() == before + 1  # the worker's
    past_deadline(conn, swept.id)
    with running_worker(app, queues=["exp-none"]):
        wait_until(lambda: state_of(conn, swept.id) == "dead", timeout=30,
                   message="the leader swept the job")
    assert counted("exp-elsewhere") == before_swept + 1  # the leader's sweep


def test_an_operator_may_give_a_requeued_job_a_new_deadline(
    bound: Forklift, conn: psycopg.Connection[Any], dsn: str
) -> None:
    job = work.enqueue({}, expires=timedelta(seconds=1))
    past_deadline(conn, job.id)
    sweep(dsn)
    with Operator(dsn, actor="alice") as op:
        for bad in (timedelta(0), 60):
            with pytest.raises(InvalidOption) as err:
                op.jobs.requeue(job.id, expires=bad)  # type: ignore[arg-type]
            assert err.value.detail["field"] == "expires"
        assert state_of(conn, job.id) == "dead"  # a refusal changes nothing
        done = op.jobs.requeue(job.id, reason="still wanted", expires=timedelta(minutes=10))
        assert done.state == "available"
    left = conn.execute("SELECT expires_at - now() FROM forklift.jobs WHERE id = %s",
                        (job.id,)).fetchone()
    assert left is not None and timedelta(0) < left[0] <= timedelta(minutes=10)
