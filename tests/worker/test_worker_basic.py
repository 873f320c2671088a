"""The worker's baseline: results, progress and partial results, batched completions, failures
that become records (never a dead worker), registration, and the schema check at start."""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from apps import basic
from helpers import wait_until

from forklift import Forklift, SchemaOutdated, Worker
from forklift.ops import Operator

TERMINAL = ("completed", "cancelled", "dead")


@pytest.fixture
def app(dsn: str) -> Iterator[Forklift]:
    with basic.bound(dsn) as bound_app:
        yield bound_app


def wait_terminal(conn: psycopg.Connection[Any], ids: list[int], timeout: float = 30) -> None:
    def done() -> bool:
        row = conn.execute(
            "SELECT count(*) FROM forklift.jobs WHERE id = ANY(%s) AND state = ANY(%s)",
            (ids, list(TERMINAL)),
        ).fetchone()
        return row is not None and row[0] == len(ids)

    wait_until(done, timeout=timeout, message=lambda: f"jobs {ids} reached a terminal state: "
               + str(conn.execute("SELECT id, kind, state FROM forklift.jobs WHERE id = ANY(%s)",
                                  (ids,)).fetchall()))


# -- results, progress, partial results ---------------------------------------------------------
def test_results_of_every_payload_style_are_stored(app: Forklift, conn: psycopg.Connection[Any]) -> None:
    ids = [
        basic.echo.enqueue(basic.Greeting("ada", 2)).id,
        basic.order.enqueue({"sku": "A", "qty": 4}).id,
        basic.invoice.enqueue({"number": "9", "lines": [{"sku": "x", "qty": 2}, {"sku": "y", "qty": 5}]}).id,
        basic.noop.enqueue({}).id,
    ]
    with basic.running_worker(app):
        wait_terminal(conn, ids)
    rows = [basic.job_row(conn, i) for i in ids]
    assert [r["state"] for r in rows] == ["completed"] * 4
    assert [r["result"] for r in rows] == [
        {"text": "hello ada hello ada"},
        {"sku": "A", "total": 12},
        {"number": "9", "items": 7},
        None,
    ]
    for r in rows:
        assert (r["attempt"], r["errors"], r["partial"]) == (1, [], None)
        assert r["finished_at"] is not None and r["lease_expires_at"] is None


def test_progress_and_partial_results_are_visible_while_running(
    app: Forklift, conn: psycopg.Connection[Any]
) -> None:
    job = basic.report.enqueue(basic.Gated(gate=f"report-{os.getpid()}-{id(conn)}"))
    with basic.running_worker(app):
        wait_until(
            lambda: basic.job_row(conn, job.id)["partial"] is not None
            and basic.job_row(conn, job.id)["progress"] is not None,
            timeout=30, message="progress and the partial result were written",
        )
        running = basic.job_row(conn, job.id)
        assert running["state"] == "running"
        assert running["progress"] == {"done": 1, "total": 2, "note": "half way"}
        assert running["partial"] == {"rows": 10}
        basic.gate(job.args["gate"]).set()
        wait_terminal(conn, [job.id])
    done = basic.job_row(conn, job.id)
    assert done["state"] == "completed" and done["result"] == {"rows": 20}
    assert done["progress"] == {"done": 2, "total": 2, "note": "done"}
    assert done["partial"] is None  # the final result replaces it


def test_the_handler_context_describes_the_attempt(app: Forklift, conn: psycopg.Connection[Any]) -> None:
    job = basic.whoami.enqueue({}, max_attempts=4, meta={"trace": "t-1"})
    with basic.running_worker(app):
        wait_terminal(conn, [job.id])
    assert basic.job_row(conn, job.id)["result"] == {
        "job_id": job.id, "attempt": 1, "max_attempts": 4, "kind": "basic.whoami",
        "queue": "orders", "cancelled": False, "meta": {"trace": "t-1"},
    }


# -- batched completions --------------------------------------------------------------------
def _settle_statements(conn: psycopg.Connection[Any]) -> int | None:
    """Calls of the settle statement in this database, if pg_stat_statements is loaded."""
    try:
        row = conn.execute(
            "SELECT coalesce(sum(calls), 0) FROM pg_stat_statements s"
            " JOIN pg_database d ON d.oid = s.dbid AND d.datname = current_database()"
            " WHERE s.query LIKE %s",
            ("%AS o(id, fence, st,%",),
        ).fetchone()
    except psycopg.Error:
        return None
    return int(row[0]) if row else None


def test_completions_are_written_in_batches(app: Forklift, conn: psycopg.Connection[Any]) -> None:
    n = 500
    ids = basic.noop.enqueue_many([{"i": i} for i in range(n)])
    with basic.running_worker(app, concurrency=20) as worker:
        wait_terminal(conn, ids, timeout=60)
        completed = worker.stats.completed
    assert completed == n
    states = conn.execute("SELECT state, count(*) FROM forklift.jobs GROUP BY state").fetchall()
    assert states == [("completed", n)]
    # Each job's final row version was written by the statement that completed it: its
    # transaction id tells how many statements settled the 500 jobs.
    row = conn.execute("SELECT count(DISTINCT xmin::text) FROM forklift.jobs").fetchone()
    assert row is not None
    statements = int(row[0])
    assert statements <= n // 4, f"{statements} settle statements for {n} jobs"
    server_count = _settle_statements(conn)
    if server_count is not None:
        assert server_count <= n // 4


# -- bad input at run time ----------------------------------------------------------------------
def test_a_kind_no_worker_knows_waits_and_explain_says_so(
    app: Forklift, conn: psycopg.Connection[Any], dsn: str
) -> None:
    # A rolling deploy: a new kind's job reaches a worker that does not have it yet. It is not
    # claimed (never dead-lettered as unknown_kind); a job behind it runs.
    job_id = conn.execute(
        "INSERT INTO forklift.jobs (kind, args, priority) VALUES ('basic.retired', '{}', -5)"
        " RETURNING id"
    ).fetchone()[0]  # type: ignore[index]
    with basic.running_worker(app, queues=["default"]) as worker:
        behind = basic.echo.enqueue({"name": "behind"})
        wait_terminal(conn, [behind.id])
        assert basic.job_row(conn, behind.id)["state"] == "completed"
        row = basic.job_row(conn, job_id)
        assert (row["state"], row["attempt"], row["errors"]) == ("available", 0, [])
        assert "basic.retired" not in worker.kinds
        with Operator(dsn) as op:
            wait_until(lambda: any(w.live for w in op.workers()), timeout=30)
            job = op.explain(job_id)
            assert job.reasons[0].code == "unknown_kind", job
            assert "no worker knows kind 'basic.retired'" in job.summary
            queue = op.explain_queue("default")
            unknown = [r for r in queue.reasons if r.code == "unknown_kind"]
            assert [(r.facts["kind"], r.facts["waiting"]) for r in unknown] == [
                ("basic.retired", 1)]
    assert basic.job_row(conn, job_id)["state"] == "available"


def test_a_payload_that_no_longer_validates_goes_dead(app: Forklift, conn: psycopg.Connection[Any]) -> None:
    job_id = conn.execute(
        "INSERT INTO forklift.jobs (kind, args, max_attempts)"
        " VALUES ('basic.echo', '{\"nom\": \"x\"}', 5) RETURNING id"
    ).fetchone()[0]  # type: ignore[index]
    with basic.running_worker(app):
        wait_terminal(conn, [job_id])
    row = basic.job_row(conn, job_id)
    assert (row["state"], row["attempt"]) == ("dead", 1)  # no retry: it would fail the same way
    (entry,) = row["errors"]
    assert entry["code"] == "invalid_payload" and "'name'" in entry["message"]


@pytest.mark.parametrize(
    ("kind", "needle"),
    [("basic.bad_result", "serialise"), ("basic.wrong_result", "'text'")],
    ids=["unserialisable", "wrong-type"],
)
def test_a_result_that_does_not_serialise_goes_dead(
    app: Forklift, conn: psycopg.Connection[Any], kind: str, needle: str
) -> None:
    job = app.enqueue(kind, {})
    with basic.running_worker(app):
        wait_terminal(conn, [job.id])
    row = basic.job_row(conn, job.id)
    assert row["state"] == "dead" and row["result"] is None
    (entry,) = row["errors"]
    assert entry["code"] == "invalid_result" and needle in entry["message"]


def test_an_exception_is_recorded_and_retried_with_backoff_until_dead(
    app: Forklift, conn: psycopg.Connection[Any]
) -> None:
    job = basic.flaky.enqueue({})
    with basic.running_worker(app, leader_interval=0.05):
        wait_terminal(conn, [job.id])
    row = basic.job_row(conn, job.id)
    assert (row["state"], row["attempt"], row["max_attempts"]) == ("dead", 3, 3)
    errors = row["errors"]
    assert [e["attempt"] for e in errors] == [1, 2, 3]
    for i, e in enumerate(errors, start=1):
        assert (e["code"], e["type"]) == ("error", "ValueError")
        assert e["message"] == f"boom on attempt {i}"
        assert e["traceback"] and "flaky" in str(e["traceback"])
    # Exponential backoff (base 0.3 s, no jitter): the next attempt is never due sooner.
    from datetime import datetime

    at = [datetime.fromisoformat(e["at"]) for e in errors]
    assert (at[1] - at[0]).total_seconds() >= 0.3
    assert (at[2] - at[1]).total_seconds() >= 0.6


HOSTILE = {
    "basic.exit_sync": ("handler_exit", "SystemExit"),
    "basic.exit_async": ("handler_exit", "SystemExit"),
    "basic.interrupt_sync": ("handler_exit", "KeyboardInterrupt"),
    "basic.interrupt_async": ("handler_exit", "KeyboardInterrupt"),
    "basic.bad_result": ("invalid_result", None),
    "basic.recurse": ("error", "RecursionError"),
    "basic.recurse_async": ("error", "RecursionError"),
}


def test_nothing_a_handler_does_kills_the_worker(app: Forklift, conn: psycopg.Connection[Any]) -> None:
    with basic.running_worker(app, concurrency=4) as worker:
        ids = {name: app.enqueue(name, {}).id for name in HOSTILE}
        wait_terminal(conn, list(ids.values()))
        # Still claiming and running: a plain job enqueued afterwards completes.
        after = basic.echo.enqueue({"name": "still here"})
        wait_terminal(conn, [after.id])
        assert worker.stats.failed == len(HOSTILE)
    for name, (code, type_name) in HOSTILE.items():
        row = basic.job_row(conn, ids[name])
        assert row["state"] == "dead", name
        (entry,) = row["errors"]
        assert entry["code"] == code, name
        if type_name is not None:
            assert entry["type"] == type_name, name
    assert basic.job_row(conn, after.id)["result"] == {"text": "hello still here"}


# -- registration and the schema check ------------------------------------------------------
def test_a_worker_registers_itself_and_its_kinds_and_records_its_exit(
    app: Forklift, conn: psycopg.Connection[Any]
) -> None:
    with basic.running_worker(app, queues=["orders", "default"], concurrency=3) as worker:
        row = wait_until(
            lambda: conn.execute(
                "SELECT id, host, pid, queues, slots, state FROM forklift.workers"
            ).fetchone(),
            timeout=30, message="the worker row appeared",
        )
        assert row == (worker.id, socket.gethostname(), os.getpid(), ["default", "orders"], 3,
                       "running")
        kinds = conn.execute("SELECT kinds FROM forklift.workers").fetchone()[0]  # type: ignore[index]
        assert set(kinds) == set(app.kinds)
        assert kinds["basic.echo"]["retry"] == basic.echo.retry.to_json()
    # The row stays as history: exited, when, and how.
    assert conn.execute(
        "SELECT state, exit_reason, exited_at IS NOT NULL, in_use FROM forklift.workers"
    ).fetchone() == ("exited", "drained", True, 0)


def test_a_worker_listens_on_every_declared_queue_by_default(app: Forklift) -> None:
    assert Worker(app).queues == sorted({k.queue for k in app.kinds.values()})


def test_a_worker_refuses_an_older_schema_and_names_the_command(
    app: Forklift, conn: psycopg.Connection[Any]
) -> None:
    conn.execute(
        "DELETE FROM forklift.schema_version"
        " WHERE version = (SELECT max(version) FROM forklift.schema_version)"
    )
    with pytest.raises(SchemaOutdated) as refused:
        asyncio.run(Worker(app).run())
    assert refused.value.code == "schema_outdated"
    assert "forklift migrate" in refused.value.message
    assert conn.execute("SELECT count(*) FROM forklift.workers").fetchone() == (0,)
