"""A rolling upgrade: old and new workers on one queue while a migration is applied.

Two real worker processes serve the queue. One stands for the previous release: its row is
written as a worker from before version 19 writes it (no schema recorded). This process acts
as the new release, with one more migration than forklift ships whose header says workers built
for the current schema keep working (``upgrade_probe``). What must hold: jobs keep flowing
throughout and none is lost; ``forklift migrate`` refuses, naming the old worker, while it is
live, and proceeds once it has drained, with the new worker still running.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from apps.basic import app as basic
from eco_procs import Procs, WorkerProc, procs
from helpers import wait_until
from typer.testing import CliRunner
from upgrade_probe import TABLE, newer_release

from forklift._db.migrate import required_version
from forklift.cli.main import app as cli

pytestmark = pytest.mark.slow
__all__ = ["procs"]


def enqueue(conn: psycopg.Connection[Any], n: int) -> list[int]:
    return basic.kind("basic.noop").enqueue_many([{"n": i} for i in range(n)], conn=conn)


def states(conn: psycopg.Connection[Any], ids: list[int]) -> dict[str, int]:
    rows = conn.execute("SELECT state, count(*) FROM forklift.jobs WHERE id = ANY(%s)"
                        " GROUP BY 1", (ids,)).fetchall()
    return {state: int(n) for state, n in rows}


def all_completed(conn: psycopg.Connection[Any], ids: list[int]) -> bool:
    return states(conn, ids) == {"completed": len(ids)}


def registered(conn: psycopg.Connection[Any], w: WorkerProc) -> tuple[Any, ...] | None:
    return conn.execute("SELECT id, state, schema_built, schema_min FROM forklift.workers"
                        " WHERE pid = %s AND state = 'running'", (w.popen.pid,)).fetchone()


def test_old_and_new_workers_through_a_migration(
    dsn: str, conn: psycopg.Connection[Any], procs: Procs, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = required_version()
    options = ("--app", "apps.basic:app", "--concurrency", "2", "--poll-interval", "0.2")
    old = procs.start(*options, env={"FORKLIFT_DSN": dsn})
    row = wait_until(lambda: registered(conn, old), timeout=60, message=procs.logs)
    assert row[2:] == (now, now)
    # The previous release registered without the schema columns: its row has neither.
    conn.execute("UPDATE forklift.workers SET schema_built = NULL, schema_min = NULL"
                 " WHERE id = %s", (row[0],))
    new = procs.start(*options, env={"FORKLIFT_DSN": dsn})
    wait_until(lambda: registered(conn, new), timeout=60, message=procs.logs)

    extra = newer_release(monkeypatch, workers=now)
    jobs = enqueue(conn, 100)
    wait_until(lambda: all_completed(conn, jobs), timeout=60, message=lambda: str(states(conn, jobs)))

    # The old worker is live: the migration would break it, so nothing is applied.
    jobs += enqueue(conn, 100)
    refused = CliRunner().invoke(cli, ["migrate", "--dsn", dsn])
    assert refused.exit_code == 1, refused.stdout
    assert f"pid {old.popen.pid} (running" in refused.stdout
    assert f"pid {new.popen.pid} " not in refused.stdout
    assert "workers_would_break" in refused.stderr
    assert conn.execute("SELECT to_regclass(%s)", (f"forklift.{TABLE}",)).fetchone() == (None,)

    # It drains (SIGTERM) and leaves; work goes on with the new worker alone.
    jobs += enqueue(conn, 100)
    assert old.stop() == 0, procs.logs()
    exited = conn.execute("SELECT state, exit_reason FROM forklift.workers WHERE pid = %s",
                          (old.popen.pid,)).fetchone()
    assert exited == ("exited", "drained")

    done = CliRunner().invoke(cli, ["migrate", "--dsn", dsn])
    assert done.exit_code == 0, (done.stdout, done.stderr)
    assert f"applied: {extra.version:04d}_{extra.name}" in done.stdout
    assert "break" not in done.stdout

    jobs += enqueue(conn, 100)
    wait_until(lambda: all_completed(conn, jobs), timeout=60,
               message=lambda: f"{states(conn, jobs)}\n{procs.logs()}")
    assert new.alive() and registered(conn, new) is not None
    total = conn.execute("SELECT count(*) FROM forklift.jobs").fetchone()
    assert total == (400,)
