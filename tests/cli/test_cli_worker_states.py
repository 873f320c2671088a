"""`workers list` and `stats` show each worker's state as --json gives it, with ``live``."""

from __future__ import annotations

import json
from typing import Any

import psycopg
from apps.ops import register_worker
from typer.testing import CliRunner

from forklift.cli.main import app as cli

STATES = ("running", "draining", "exited")


def run(dsn: str, *args: str) -> str:
    result = CliRunner().invoke(cli, list(args), env={"FORKLIFT_DSN": dsn})
    assert result.exit_code == 0, (result.stdout, result.stderr)
    return str(result.stdout)


def exited_worker(conn: psycopg.Connection[Any], worker_id: str, how: str) -> None:
    """A worker that drained (its cutoff long past) and exited five minutes ago."""
    conn.execute(
        """INSERT INTO forklift.workers (id, host, pid, queues, slots, in_use, state,
               heartbeat_at, drain_deadline, exited_at, exit_reason)
           VALUES (%s, 'testhost', 2, '{mail}', 4, 0, 'exited', now() - interval '6 minutes',
                   now() - interval '10 minutes', now() - interval '5 minutes', %s)""",
        (worker_id, how),
    )


def seed(conn: psycopg.Connection[Any]) -> None:
    register_worker(conn, "w-run", ["mail"])
    register_worker(conn, "w-drain", ["mail"], state="draining")
    register_worker(conn, "w-silent", ["mail"], heartbeat_age=600.0)
    exited_worker(conn, "w-drained", "drained")
    exited_worker(conn, "w-killed", "killed")


def text_rows(text: str) -> dict[str, str]:
    return {line.split()[0]: line for line in text.splitlines()
            if line.strip() and line.split()[0].startswith("w-")}


def state_words(line: str) -> set[str]:
    return {s for s in STATES if s in line.split()}


def assert_text_agrees(text: str, workers: list[dict[str, Any]]) -> None:
    rows = text_rows(text)
    assert set(rows) == {w["id"] for w in workers}
    for w in workers:
        line = rows[w["id"]]
        assert state_words(line) == {w["state"]}, line
        assert ("drain cutoff" in line) == (w["state"] == "draining"), line
        assert ("stale" in line) == w["stale"], line


def test_workers_list_text_and_json_agree_on_every_state(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    seed(conn)
    workers = json.loads(run(dsn, "workers", "list", "--json"))
    by_id = {w["id"]: w for w in workers}
    assert {i: (w["state"], w["live"]) for i, w in by_id.items()} == {
        "w-run": ("running", True),
        "w-drain": ("draining", True),
        "w-silent": ("running", False),
        "w-drained": ("exited", False),
        "w-killed": ("exited", False),
    }
    assert by_id["w-drained"]["drain_remaining_seconds"] is None
    assert by_id["w-drain"]["drain_remaining_seconds"] > 0
    text = run(dsn, "workers", "list")
    assert_text_agrees(text, workers)
    rows = text_rows(text)
    assert "killed" in rows["w-killed"] and "drained" in rows["w-drained"]


def test_stats_workers_table_agrees_with_its_json(dsn: str, conn: psycopg.Connection[Any]) -> None:
    seed(conn)
    workers = json.loads(run(dsn, "stats", "--json"))["workers"]
    assert {w["id"]: w["live"] for w in workers} == {
        "w-run": True, "w-drain": True, "w-silent": False}
    assert_text_agrees(run(dsn, "stats"), workers)


def test_operator_worker_type_carries_live(dsn: str, conn: psycopg.Connection[Any]) -> None:
    from forklift.ops import Operator

    seed(conn)
    with Operator(dsn=dsn) as op:
        live = {w.id: w.live for w in op.workers()}
        assert live == {"w-run": True, "w-drain": True, "w-silent": False,
                        "w-drained": False, "w-killed": False}
        assert all(w.to_json()["live"] == w.live for w in op.workers())
