"""Batch handlers at work: a kind declared with ``@app.batch_job`` takes several of its jobs
in one call, and each job keeps its own attempt, retries, dead letter, result and error entry.

The handlers (tests/apps/batch_handlers.py) record every call they get in a table, so the
tests read which jobs went together and on which attempt.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from apps import batch_handlers as bh
from apps.basic import running_worker
from helpers import wait_until

from forklift import BatchContext, ConfigError, Forklift, JobContext
from forklift.ops import Operator

TERMINAL = ["completed", "dead", "cancelled"]


@pytest.fixture
def app(dsn: str, conn: psycopg.Connection[Any]) -> Iterator[Forklift]:
    bh.setup(conn)
    bh.app.use(dsn)
    try:
        yield bh.app
    finally:
        bh.app.close()


def rows(conn: psycopg.Connection[Any], ids: list[int]) -> dict[int, dict[str, Any]]:
    cur = conn.execute("SELECT id, state, attempt, result, errors FROM forklift.jobs"
                       " WHERE id = ANY(%s)", (ids,))
    return {int(r[0]): {"state": r[1], "attempt": r[2], "result": r[3], "errors": r[4]}
            for r in cur.fetchall()}


def wait_done(conn: psycopg.Connection[Any], ids: list[int]) -> dict[int, dict[str, Any]]:
    def done() -> dict[int, dict[str, Any]] | None:
        got = rows(conn, ids)
        return got if all(r["state"] in TERMINAL for r in got.values()) else None

    return wait_until(done, timeout=30, message=lambda: f"jobs not finished: {rows(conn, ids)}")


def test_a_call_takes_several_waiting_jobs_and_each_gets_its_own_result(
    app: Forklift, conn: psycopg.Connection[Any]
) -> None:
    ids = bh.double.enqueue_many([{"n": n} for n in range(20)])
    with running_worker(app, queues=["default"], concurrency=20):
        got = wait_done(conn, ids)
    assert {r["state"] for r in got.values()} == {"completed"}
    for n, job_id in enumerate(ids):
        assert got[job_id]["result"] == {"n": n, "doubled": 2 * n}
        assert got[job_id]["attempt"] == 1
    calls = bh.calls(conn, "bh.double")
    sizes = [len(c["jobs"]) for c in calls]
    assert max(sizes) > 1, sizes  # 20 waiting jobs did not go one a call
    assert max(sizes) <= 10  # the kind's max
    assert sorted(j for c in calls for j in c["jobs"]) == sorted(ids)  # each once
    assert bh.done_counts(conn) == dict.fromkeys(ids, 1)


def test_one_job_of_a_call_fails_alone_and_dead_letters_after_its_attempts(
    app: Forklift, conn: psycopg.Connection[Any]
) -> None:
    ids = bh.double.enqueue_many([{"n": 0}, {"n": 1, "fail": True}, {"n": 2},
                                  {"n": 3, "reject": True}, {"n": 4}])
    ok, failing, rejected = [ids[0], ids[2], ids[4]], ids[1], ids[3]
    with running_worker(app, queues=["default"], concurrency=10):
        got = wait_done(conn, ids)
    for job_id in ok:
        assert got[job_id]["state"] == "completed" and got[job_id]["attempt"] == 1
        assert got[job_id]["errors"] == []
    # The failing one retried on its own backoff, then died alone after its two attempts.
    assert got[failing]["state"] == "dead" and got[failing]["attempt"] == 2
    errors = got[failing]["errors"]
    assert [e["code"] for e in errors] == ["error", "error"]
    assert [e["attempt"] for e in errors] == [1, 2]
    assert errors[0]["type"] == "ValueError" and "failed on attempt 1" in errors[0]["message"]
    assert errors[0]["batch"] == 5 and errors[1]["batch"] == 1  # its second try ran alone
    # A declared Fail in a job's place: dead at once, its attempts unspent.
    assert got[rejected]["state"] == "dead" and got[rejected]["attempt"] == 1
    assert [e["code"] for e in got[rejected]["errors"]] == ["rejected"]
    calls = bh.calls(conn, "bh.double")
    assert [len(c["jobs"]) for c in calls] == [5, 1]
    assert calls[1] == {"jobs": [failing], "attempts": [2], "worker": calls[0]["worker"]}


def test_a_wrong_length_or_a_raising_handler_fails_every_job_of_the_call(
    app: Forklift, conn: psycopg.Connection[Any]
) -> None:
    short = bh.double.enqueue_many([{"n": 0, "short": True}, {"n": 1}, {"n": 2}])
    with running_worker(app, queues=["default"], concurrency=3):
        got = wait_done(conn, short)
        for job_id in short:
            assert got[job_id]["state"] == "dead" and got[job_id]["attempt"] == 1
            (entry,) = got[job_id]["errors"]
            assert entry["code"] == "invalid_batch_result"
            assert entry["message"] == ("the batch handler returned 2 items for 3 jobs: it"
                                        " must return a list with one result or exception per"
                                        " job, in the payloads' order")
        # The worker lives on: a call that raises fails each of its jobs.
        boom = bh.double.enqueue_many([{"n": 5, "boom": True}, {"n": 6}])
        got = wait_done(conn, boom)
    assert got[boom[0]]["state"] == "dead"
    assert [e["code"] for e in got[boom[0]]["errors"]] == ["error", "error"]
    first = got[boom[1]]["errors"][0]
    assert (first["code"], first["message"], first["attempt"]) == (
        "error", "the whole call failed", 1)


def test_an_async_batch_handler_takes_several_jobs_a_call(
    app: Forklift, conn: psycopg.Connection[Any]
) -> None:
    ids = bh.double_async.enqueue_many([{"n": n, "fail": n == 3} for n in range(12)])
    with running_worker(app, queues=["async"], concurrency=12):
        got = wait_done(conn, ids)
    for n, job_id in enumerate(ids):
        if n == 3:
            assert got[job_id]["state"] == "dead" and got[job_id]["attempt"] == 2
        else:
            assert got[job_id]["result"] == {"n": n, "doubled": 2 * n}
    sizes = [len(c["jobs"]) for c in bh.calls(conn, "bh.double_async")]
    assert max(sizes) > 1 and max(sizes) <= 10, sizes


def test_wait_gathers_jobs_enqueued_one_by_one_into_one_call(
    app: Forklift, conn: psycopg.Connection[Any]
) -> None:
    with running_worker(app, queues=["gathered"], concurrency=10):
        ids = [bh.gathered.enqueue({"n": n}).id for n in range(4)]
        got = wait_done(conn, ids)
    assert {r["state"] for r in got.values()} == {"completed"}
    sizes = [len(c["jobs"]) for c in bh.calls(conn, "bh.gathered")]
    assert max(sizes) > 1, sizes  # enqueued apart, run together within the kind's wait


def test_a_job_cancelled_while_its_call_runs_ends_cancelled_and_the_others_complete(
    app: Forklift, conn: psycopg.Connection[Any], dsn: str
) -> None:
    ids = bh.double.enqueue_many([{"n": 0, "hold": "cancel"}, {"n": 1}, {"n": 2}])
    with running_worker(app, queues=["default"], concurrency=3):
        wait_until(lambda: bh.calls(conn, "bh.double"), timeout=30)
        with Operator(dsn) as op:
            op.jobs.cancel(ids[1])
        # The call goes on for the others; the cancel is honoured when it returns (once the
        # job was told: a call that returns before the worker hears of the cancel completes it).
        wait_until(lambda: conn.execute("SELECT 1 FROM public.bh_told WHERE job_id = %s",
                                        (ids[1],)).fetchone(), timeout=30,
                   message="the running job was told of its cancel")
        conn.execute("INSERT INTO public.bh_gates VALUES ('cancel')")
        got = wait_done(conn, ids)
    assert got[ids[1]]["state"] == "cancelled"
    assert got[ids[0]]["state"] == got[ids[2]]["state"] == "completed"
    assert len(bh.calls(conn, "bh.double")) == 1


def test_the_timeout_applies_to_the_call_and_fails_each_job_of_it(
    app: Forklift, conn: psycopg.Connection[Any]
) -> None:
    ids = bh.stuck.enqueue_many([{"n": n} for n in range(3)])
    with running_worker(app, queues=["stuck"], concurrency=3):
        got = wait_done(conn, ids)
    for job_id in ids:
        assert got[job_id]["state"] == "dead"
        (entry,) = got[job_id]["errors"]
        assert entry["code"] == "timeout" and entry["batch"] == 3
    assert [sorted(c["jobs"]) for c in bh.calls(conn, "bh.stuck")] == [sorted(ids)]


def test_a_drain_interrupts_a_held_call_and_releases_each_job_with_its_attempt_refunded(
    app: Forklift, conn: psycopg.Connection[Any]
) -> None:
    ids = bh.double.enqueue_many([{"n": n, "hold": "drain"} for n in range(3)])
    with running_worker(app, queues=["default"], concurrency=3, drain_timeout=0.2):
        wait_until(lambda: bh.calls(conn, "bh.double"), timeout=30)
    # The call was told at the drain cutoff (each job was), returned, and wrote nothing.
    got = rows(conn, ids)
    for job_id in ids:
        assert got[job_id]["state"] in ("retryable", "available")
        assert got[job_id]["attempt"] == 0  # a drain is not the job's fault
        assert [e["code"] for e in got[job_id]["errors"]] == ["interrupted"]
    assert bh.done_counts(conn) == {}


def test_inline_mode_runs_each_job_of_a_batch_kind_in_a_call_of_its_own() -> None:
    from forklift.testing import inline

    app = Forklift("postgresql://unused")

    @app.batch_job(name="inline.double", max=10)
    def twice(ctx: BatchContext, items: list[int]) -> list[int | Exception]:
        assert len(ctx) == 1
        return [ValueError("odd") if i % 2 else 2 * i for i in items]

    with inline(app, propagate=False):
        done = twice.enqueue(4)
        failed = twice.enqueue(3)
    assert (done.state, done.result) == ("completed", 8)
    assert failed.state == "retryable" and failed.errors[0]["message"] == "odd"


# -- declaring ------------------------------------------------------------------------------------
def test_a_batch_kind_refuses_bad_declarations() -> None:
    app = Forklift("postgresql://unused")

    def fine(ctx: BatchContext, items: list[int]) -> list[int | Exception]:
        return items

    def single(ctx: JobContext, item: int) -> int:
        return item

    with pytest.raises(ConfigError, match="max= of batch kind k must be a whole number"):
        app.batch_job(name="k", max=0)(fine)
    with pytest.raises(ConfigError, match="wait= of batch kind k must be 0 to 60 seconds"):
        app.batch_job(name="k", wait=-1)(fine)
    with pytest.raises(ConfigError, match="the payload of batch handler k must be annotated"):
        app.batch_job(name="k")(single)
    kind = app.batch_job(name="k", max=5, wait=0.1)(fine)
    assert (kind.batch_max, kind.batch_wait) == (5, 0.1)
    # A job's payload and result are the list's elements, less the exceptions.
    assert kind.payload.validate(3, kind="k") == 3
    assert kind.result.validate(4, kind="k") == 4
    assert app.job(name="plain")(single).batch_max is None


# -- shown ----------------------------------------------------------------------------------------
def test_the_kinds_listing_and_jobs_show_tell_a_batch_kind_and_call(
    app: Forklift, conn: psycopg.Connection[Any], dsn: str
) -> None:
    import json

    from typer.testing import CliRunner

    from forklift.cli.main import app as cli
    from forklift_console.screens.kinds import kind_cell

    ids = bh.double.enqueue_many([{"n": 0}, {"n": 1, "reject": True}])
    bh.plain.enqueue({})
    with running_worker(app, queues=["default"], concurrency=4):
        wait_done(conn, ids)
        with Operator(dsn) as op:
            rows = {r.kind: r for r in op.stats.kinds().rows}
        got = CliRunner().invoke(cli, ["kinds", "list", "--json"], env={"FORKLIFT_DSN": dsn})
        human = CliRunner().invoke(cli, ["kinds", "list"], env={"FORKLIFT_DSN": dsn, "COLUMNS": "200"})
    assert rows["bh.double"].batch == 10  # as the live worker registered the kind
    assert rows["bh.plain"].batch is None
    assert got.exit_code == 0, got.stderr
    listed = {r["kind"]: r for r in json.loads(got.stdout)["rows"]}
    assert listed["bh.double"]["batch"] == 10 and listed["bh.plain"]["batch"] is None
    assert human.exit_code == 0 and "batch" in human.stdout
    assert kind_cell(rows["bh.double"]).plain == "bh.double ×10"
    assert kind_cell(rows["bh.plain"]).plain == "bh.plain"
    # jobs show says which batch call the failed attempt ran in.
    shown = CliRunner().invoke(cli, ["jobs", "show", str(ids[1])], env={"FORKLIFT_DSN": dsn,
                                                                      "COLUMNS": "200"})
    assert shown.exit_code == 0 and "(in a batch of 2)" in shown.stdout, shown.stdout
