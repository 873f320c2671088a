"""Durable steps: a step's function runs once per job; a retried, rescued or requeued attempt
returns the stored result (typed alike); refusals fail the attempt for good with their code; a
job that uses no steps opens no steps session and reads nothing."""

from __future__ import annotations

import asyncio
import signal
from typing import Any

import psycopg
import pytest
import wf_common
from apps import faults
from apps.basic import running_worker
from helpers import wait_until
from wf_common import FAST, job

from forklift import Forklift
from forklift._features.durable.steps import _write

app = wf_common.app
procs = wf_common.procs


def step_runs(conn: psycopg.Connection[Any], step: str) -> int:
    row = conn.execute("SELECT count(*) FROM public.wf_seen WHERE what = 'step'"
                       " AND detail ->> 'step' = %s", (step,)).fetchone()
    return int(row[0]) if row else 0


def stored(conn: psycopg.Connection[Any], job_id: int) -> list[tuple[Any, ...]]:
    return conn.execute("SELECT name, state, result, error ->> 'code', attempt FROM"
                        " forklift.job_steps WHERE job_id = %s ORDER BY started_at, name",
                        (job_id,)).fetchall()


def finished(conn: psycopg.Connection[Any], job_id: int) -> bool:
    return job(conn, job_id)["state"] in ("completed", "dead", "cancelled")


@pytest.mark.parametrize("kind", ["wf.steps", "wf.steps_sync"])
def test_a_retried_attempt_returns_the_stored_result_without_running_the_step_again(
    app: Forklift, conn: psycopg.Connection[Any], kind: str
) -> None:
    j = app.kind(kind).enqueue({"n": 7, "fail": True})
    with running_worker(app, **FAST):
        wait_until(lambda: finished(conn, j.id), timeout=30)
    row = job(conn, j.id)
    assert row["state"] == "completed" and row["attempt"] == 2
    assert step_runs(conn, "charge") == 1
    steps = stored(conn, j.id)
    assert steps[0][:2] == ("charge", "completed") and steps[0][2]["charged"] == 7
    assert steps[0][4] == 1  # stored by the first attempt
    assert all(s[1] == "completed" for s in steps)
    if kind == "wf.steps":
        assert row["result"]["shipped"] == {"shipped": 7, "tags": ["a", "b"]}


def test_a_step_runs_once_across_a_sigkill_and_rescue(
    app: Forklift, conn: psycopg.Connection[Any], procs: faults.Procs
) -> None:
    j = app.kind("wf.steps").enqueue({"n": 3, "hold": "g"})
    w = procs.start(concurrency=2, lease=2.0, poll_interval=0.2,
                    extra=["--app", "apps.workflows:app"])
    faults.registered(conn, w)
    wait_until(lambda: stored(conn, j.id), timeout=30, message=lambda: procs.logs())
    w.signal(signal.SIGKILL)
    assert w.popen.wait(10) == -signal.SIGKILL
    conn.execute("INSERT INTO public.wf_gates VALUES ('g')")
    with running_worker(app, **FAST):
        wait_until(lambda: finished(conn, j.id), timeout=60)
    row = job(conn, j.id)
    assert row["state"] == "completed" and row["attempt"] == 2
    assert [e["code"] for e in row["errors"]] == ["lease_expired"]
    assert step_runs(conn, "charge") == 1 and step_runs(conn, "ship") == 1
    assert row["result"]["receipt"] == w.pid  # the killed worker's stored receipt


@pytest.mark.parametrize(("how", "code"), [
    ("duplicate", "duplicate_step"), ("result", "invalid_result"), ("long", "invalid_step_name"),
    ("hidden", "invalid_step_name"),
])
def test_a_refused_step_fails_the_job_for_good_with_its_code(
    app: Forklift, conn: psycopg.Connection[Any], how: str, code: str
) -> None:
    j = app.kind("wf.bad_steps").enqueue({"how": how})
    with running_worker(app, **FAST):
        wait_until(lambda: finished(conn, j.id), timeout=30)
    row = job(conn, j.id)
    assert row["state"] == "dead" and row["attempt"] == 1
    assert [e["code"] for e in row["errors"]] == [code]
    steps = stored(conn, j.id)
    if how == "duplicate":
        assert [s[:2] for s in steps] == [("once", "completed")]
    elif how == "result":
        assert [s[:4] for s in steps] == [("odd", "failed", None, "invalid_result")]
    else:
        assert steps == []


def test_a_requeued_job_returns_its_stored_results_without_running_its_steps_again(
    app: Forklift, dsn: str, conn: psycopg.Connection[Any]
) -> None:
    from forklift.ops import Operator

    j = app.kind("wf.steps").enqueue({"n": 4})
    with running_worker(app, **FAST):
        wait_until(lambda: finished(conn, j.id), timeout=30)
        first = job(conn, j.id)
        with Operator(dsn, actor="tester") as op:
            op.requeue(j.id, reason="again")
        wait_until(lambda: job(conn, j.id)["fence"] > first["fence"] and finished(conn, j.id),
                   timeout=30)
    row = job(conn, j.id)
    assert row["state"] == "completed" and row["result"] == first["result"]
    assert step_runs(conn, "charge") == 1 and step_runs(conn, "ship") == 1
    assert [s[:2] for s in stored(conn, j.id)] == [("charge", "completed"), ("ship", "completed")]


def test_a_step_costs_one_statement_and_the_read_of_the_job_s_steps_one_per_attempt(
    app: Forklift, conn: psycopg.Connection[Any]
) -> None:
    from forklift._features.durable.runtime import _RUNTIMES

    with running_worker(app, **FAST) as w:
        runtime = _RUNTIMES[w.id]
        j = app.kind("wf.steps").enqueue({"n": 2})
        wait_until(lambda: finished(conn, j.id), timeout=30)
        assert job(conn, j.id)["state"] == "completed"
        assert (runtime.statements, runtime.load_statements) == (3, 1)  # read, charge, ship
        again = app.kind("wf.steps").enqueue({"n": 3, "fail": True})
        wait_until(lambda: finished(conn, again.id), timeout=30)
        # attempt 1: read, charge; attempt 2: read, ship (charge comes from the read)
        assert (runtime.statements, runtime.load_statements) == (3 + 4, 1 + 2)


def test_a_stale_fence_cannot_write_a_step(app: Forklift, dsn: str,
                                           conn: psycopg.Connection[Any]) -> None:
    j = app.kind("wf.steps").enqueue({"n": 1})
    conn.execute("UPDATE forklift.jobs SET state = 'running', fence = 5, worker_id = 'w',"
                 " lease_expires_at = now() + interval '1 minute', attempt = 1 WHERE id = %s",
                 (j.id,))

    async def write(fence: int) -> bool:
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as c:
            return await _write(c, schema="forklift", params={
                "job": j.id, "fence": fence, "name": "s", "state": "completed",
                "result": "1", "took": 0.0, "error": None})

    assert asyncio.run(write(4)) is False
    assert stored(conn, j.id) == []
    assert asyncio.run(write(5)) is True
    conn.execute("UPDATE forklift.jobs SET fence = 6 WHERE id = %s", (j.id,))
    assert asyncio.run(write(6)) is False  # a completed step is never written again
    assert stored(conn, j.id) == [("s", "completed", 1, None, 1)]


def test_jobs_without_steps_open_no_steps_session(app: Forklift,
                                                  conn: psycopg.Connection[Any]) -> None:
    ids = [app.kind("wf.task").enqueue({"n": i}).id for i in range(5)]
    with running_worker(app, **FAST) as w:
        wait_until(lambda: all(finished(conn, i) for i in ids), timeout=30)
        assert "steps" not in faults.purposes(conn, w.id)
        s = app.kind("wf.steps").enqueue({"n": 1})
        wait_until(lambda: finished(conn, s.id), timeout=30)
        assert "steps" in faults.purposes(conn, w.id)


def test_jobs_show_lists_the_steps_with_state_time_and_result(
    app: Forklift, dsn: str, conn: psycopg.Connection[Any]
) -> None:
    import json

    from typer.testing import CliRunner

    from forklift.cli.main import app as cli

    j = app.kind("wf.steps").enqueue({"n": 7, "fail": True})
    with running_worker(app, **FAST):
        wait_until(lambda: finished(conn, j.id), timeout=30)
    runner = CliRunner()
    got = runner.invoke(cli, ["jobs", "show", str(j.id), "--json"], env={"FORKLIFT_DSN": dsn})
    assert got.exit_code == 0, got.output
    steps = json.loads(got.stdout)["steps"]
    assert [(s["name"], s["state"], s["attempt"]) for s in steps] == [
        ("charge", "completed", 1), ("ship", "completed", 2)]
    assert json.loads(steps[0]["summary"])["charged"] == 7 and steps[0]["seconds"] >= 0
    got = runner.invoke(cli, ["jobs", "show", str(j.id)], env={"FORKLIFT_DSN": dsn})
    assert got.exit_code == 0 and "charge  completed  attempt 1" in got.stdout
