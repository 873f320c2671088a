"""forklift's pytest plugin and forklift.testing: drain, inline mode, fault injection.

Two ways in: this module uses the plugin's fixtures inside forklift's own suite (the plugin is
installed in the dev environment, beside tests/conftest.py; ``forklift_app`` is overridden here
to use the suite's per-test database), and a user's suite in a temporary directory runs in a
pytest subprocess that loads the plugin through its entry point, as an installed forklift does.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from forklift import Backoff, Fail, Forklift, InvalidPayload, JobContext, Wait
from forklift.testing import DrainReport, DrainTimeout, Faults, InjectedFault, InlineRuns

app = Forklift()
FIXED = Backoff(kind="fixed", base=0.05, jitter="none")


@app.job(name="plugin.add", max_attempts=4, retry=FIXED)
def add(ctx: JobContext, payload: dict[str, int]) -> int:
    return payload["a"] + payload["b"]


@app.job(name="plugin.aadd", max_attempts=4, retry=FIXED)
async def aadd(ctx: JobContext, payload: dict[str, int]) -> int:
    return payload["a"] + payload["b"]


@app.job(name="plugin.chain")
def chain(ctx: JobContext, payload: dict[str, int]) -> str:
    add.enqueue({"a": payload["n"], "b": 1})
    return "chained"


@app.job(name="plugin.picky", failure_codes=["too_big"])
def picky(ctx: JobContext, payload: dict[str, int]) -> int:
    if payload["n"] > 10:
        raise Fail("too_big", f"{payload['n']} is more than 10")
    if payload["n"] < 0:
        raise ValueError("negative")
    return payload["n"]


@app.job(name="plugin.stuck")
def stuck(ctx: JobContext, payload: dict[str, Any]) -> None:
    if ctx.cancelled.wait(60):
        raise RuntimeError(f"stopped: {ctx.cancel_reason}")


@pytest.fixture
def forklift_app(dsn: str) -> Iterator[Forklift]:
    """The plugin's fixture, overridden as a suite with its own database fixture would."""
    app.use(dsn)
    yield app
    app.close()


def _jobs(conn: psycopg.Connection[Any], kind: str) -> list[dict[str, Any]]:
    cur = conn.execute("SELECT id, state, attempt, result, errors FROM forklift.jobs"
                       " WHERE kind = %s ORDER BY id", (kind,))
    return [dict(zip(["id", "state", "attempt", "result", "errors"], r, strict=True))
            for r in cur.fetchall()]


def test_drain_runs_due_jobs_to_the_end_through_a_real_worker(
    forklift_app: Forklift, forklift_drain: Callable[..., DrainReport],
    conn: psycopg.Connection[Any],
) -> None:
    add.enqueue_many([{"a": i, "b": i} for i in range(20)])
    aadd.enqueue({"a": 1, "b": 2})
    chain.enqueue({"n": 41})
    later = add.enqueue({"a": 0, "b": 0}, delay=3600)
    report = forklift_drain()
    # The chained job was enqueued while the drain ran: it ran too.
    assert report.completed == 23 and report.failed == 0 and report.stale_writes == 0
    done = _jobs(conn, "plugin.add")
    assert sorted(j["result"] for j in done if j["state"] == "completed") == sorted(
        [2 * i for i in range(20)] + [42])
    assert [j["state"] for j in done if j["id"] == later.id] == ["scheduled"]  # not due
    assert [j["result"] for j in _jobs(conn, "plugin.aadd")] == [3]
    # The fence was real: each completed job was claimed under a fence of its own.
    fences = conn.execute("SELECT count(DISTINCT fence) FROM forklift.jobs"
                          " WHERE state = 'completed'").fetchone()
    assert fences == (23,)


def test_a_queue_can_be_drained_alone(
    forklift_app: Forklift, forklift_drain: Callable[..., DrainReport],
    conn: psycopg.Connection[Any],
) -> None:
    add.enqueue({"a": 1, "b": 1}, queue="one")
    add.enqueue({"a": 2, "b": 2}, queue="two")
    assert forklift_drain(queue="one").completed == 1
    states = conn.execute("SELECT queue, state FROM forklift.jobs ORDER BY queue").fetchall()
    assert states == [("one", "completed"), ("two", "available")]


def test_injected_failures_are_retried_by_the_real_backoff(
    forklift_app: Forklift, forklift_drain: Callable[..., DrainReport],
    forklift_faults: Faults, conn: psycopg.Connection[Any],
) -> None:
    forklift_faults.fail("plugin.add", times=2)
    forklift_faults.fail("plugin.aadd", times=4, exc=RuntimeError("down"))
    add.enqueue({"a": 1, "b": 2})
    aadd.enqueue({"a": 1, "b": 2})
    forklift_drain(retries=True)
    [ok] = _jobs(conn, "plugin.add")
    assert (ok["state"], ok["attempt"], ok["result"]) == ("completed", 3, 3)
    assert [(e["code"], e["type"]) for e in ok["errors"]] == [
        ("error", f"{InjectedFault.__module__}.InjectedFault")] * 2
    [dead] = _jobs(conn, "plugin.aadd")
    assert (dead["state"], dead["attempt"]) == ("dead", 4)
    assert {e["message"] for e in dead["errors"]} == {"down"}
    assert [f[3] for f in forklift_faults.injected] == ["raise"] * 6


def test_a_lost_lease_is_rescued_and_the_late_outcome_refused(
    forklift_app: Forklift, forklift_drain: Callable[..., DrainReport],
    forklift_faults: Faults, conn: psycopg.Connection[Any],
) -> None:
    forklift_faults.lose_lease("plugin.add")
    forklift_faults.lose_lease("plugin.aadd")
    add.enqueue({"a": 2, "b": 2})
    aadd.enqueue({"a": 3, "b": 3})
    report = forklift_drain(retries=True)
    assert report.lease_lost == 2  # the worker noticed, and cancelled both handlers
    for kind, result in (("plugin.add", 4), ("plugin.aadd", 6)):
        [job] = _jobs(conn, kind)
        assert (job["state"], job["attempt"], job["result"]) == ("completed", 2, result)
        assert [e["code"] for e in job["errors"]] == ["lease_expired"]


def test_drain_gives_up_after_its_timeout_and_stops_its_worker(
    forklift_app: Forklift, forklift_drain: Callable[..., DrainReport],
    conn: psycopg.Connection[Any],
) -> None:
    stuck.enqueue({})
    with pytest.raises(DrainTimeout, match="1 job"):
        forklift_drain(timeout=2.0)
    # The worker was stopped for real: the job was released by its drain (interrupted, if it
    # had started by then; on a loaded machine it may not have been claimed yet), not left
    # running, and the worker deregistered.
    row = conn.execute("SELECT state, errors FROM forklift.jobs").fetchone()
    assert row is not None and row[0] in ("retryable", "available")
    assert [e["code"] for e in row[1]] in ([], ["interrupted"])
    assert conn.execute("SELECT count(*) FROM forklift.workers WHERE state <> 'exited'"
                        ).fetchone() == (0,)  # exited: its row stays a while as history


def test_inline_runs_the_handler_at_enqueue_and_stores_nothing(
    forklift_app: Forklift, forklift_inline: InlineRuns, conn: psycopg.Connection[Any],
) -> None:
    job = add.enqueue({"a": 2, "b": 3})
    assert (job.state, job.result, job.attempt) == ("completed", 5, 1) and job.id < 0
    assert app.enqueue("plugin.chain", {"n": 1}).result == "chained"
    ids = add.enqueue_many([{"a": 1, "b": 1}, {"a": 2, "b": 2}])
    assert [j.result for j in forklift_inline.of("plugin.add")] == [5, 2, 2, 4]
    assert ids == [j.id for j in forklift_inline.jobs[-2:]]
    with pytest.raises(ValueError, match="negative"):
        picky.enqueue({"n": -1})  # the handler's own exception comes out of enqueue
    with pytest.raises(Fail):
        picky.enqueue({"n": 11})
    assert [j.state for j in forklift_inline.of("plugin.picky")] == ["retryable", "dead"]
    assert forklift_inline.of("plugin.picky")[1].errors[0]["code"] == "too_big"
    with pytest.raises(InvalidPayload):
        add.enqueue({"a": "x"})  # refused as enqueue refuses it
    # nothing is stored, so no queue is full: an on_full= of the call changes nothing
    assert add.enqueue({"a": 1, "b": 0}, on_full=Wait(1)).result == 1
    assert conn.execute("SELECT count(*) FROM forklift.jobs").fetchone() == (0,)


async def _async_inline() -> int:
    job = await aadd.enqueue_async({"a": 20, "b": 22})
    return int(job.result)


def test_inline_runs_async_enqueues_too(forklift_app: Forklift, forklift_inline: InlineRuns) -> None:
    import asyncio

    assert asyncio.run(_async_inline()) == 42
    assert forklift_inline.jobs[-1].kind == "plugin.aadd"


# -- a user's suite, in a pytest subprocess -----------------------------------------------------
USER_APP = '''
from forklift import Forklift, JobContext

app = Forklift()


@app.job(name="shop.total")
def total(ctx: JobContext, order: dict[str, list[int]]) -> int:
    return sum(order["items"])
'''

USER_TESTS = '''
import psycopg
from shop import app, total


def test_drain(forklift_app, forklift_drain, forklift_dsn):
    assert forklift_app is app
    ids = total.enqueue_many([{"items": [1, 2]}, {"items": [3]}])
    assert forklift_drain().completed == 2
    with psycopg.connect(forklift_dsn) as conn:
        got = conn.execute("SELECT result FROM forklift.jobs ORDER BY id").fetchall()
    assert [r[0] for r in got] == [3, 3] and len(ids) == 2


def test_each_test_has_a_fresh_database(forklift_app, forklift_dsn):
    with psycopg.connect(forklift_dsn) as conn:
        assert conn.execute("SELECT count(*) FROM forklift.jobs").fetchone() == (0,)


def test_faults(forklift_app, forklift_drain, forklift_faults):
    forklift_faults.fail("shop.total", times=1)
    job = total.enqueue({"items": [5]})
    forklift_drain()
    assert forklift_app.get_job(job.id).state == "retryable"


def test_inline_needs_no_database(forklift_inline):
    app.use("host=/nonexistent dbname=nothing connect_timeout=1")  # any connection would fail
    assert total.enqueue({"items": [4, 5]}).result == 9
'''


def _user_suite(tmp: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    (tmp / "shop.py").write_text(USER_APP)
    (tmp / "test_shop.py").write_text(USER_TESTS)
    (tmp / "pytest.ini").write_text(textwrap.dedent("""\
        [pytest]
        forklift_app = shop:app
        """))
    full = {k: v for k, v in os.environ.items() if not k.startswith(("FORKLIFT_", "PYTEST_"))}
    full.update(env, PYTHONPATH=str(tmp))
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=tmp, env=full, capture_output=True, text=True, timeout=300,
    )


def test_a_users_suite_loads_the_plugin_and_runs_on_the_given_server(
    tmp_path: Path, admin_dsn: str
) -> None:
    done = _user_suite(tmp_path, "-n", "2", env={"FORKLIFT_TEST_DSN": admin_dsn})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "4 passed" in done.stdout
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        left = conn.execute("SELECT datname FROM pg_database WHERE datname LIKE 'forklift_pt_%'"
                            " AND datname NOT LIKE 'forklift_pt_tmpl_%'").fetchall()
    assert left == []  # every per-test database was dropped


def test_without_a_test_dsn_the_plugin_runs_its_own_embedded_server_and_stops_it(
    tmp_path: Path, scratch_home: Path
) -> None:
    from forklift import embedded

    home = scratch_home / "plugin"
    done = _user_suite(tmp_path, "-k", "drain or fresh", env={"FORKLIFT_TEST_HOME": str(home)})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed" in done.stdout
    assert embedded.stop_server(home) is False  # the last process out already stopped it
