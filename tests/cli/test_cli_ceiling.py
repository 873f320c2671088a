"""`forklift queues ceiling` and `queues show`: set, show, lift a queue's ceiling; absurd values
refused naming the field; a full queue in `queues list`, `queues show` and `forklift health`."""

from __future__ import annotations

import json
from typing import Any

import psycopg
from typer.testing import CliRunner

from forklift.cli.main import app as cli


def run(dsn: str, *args: str) -> Any:
    return CliRunner().invoke(cli, list(args), env={"FORKLIFT_DSN": dsn, "COLUMNS": "200"})


def ok(result: Any) -> Any:
    assert result.exit_code == 0, (result.exit_code, result.stdout, result.stderr)
    return result


def test_set_show_and_lift_a_ceiling(dsn: str, conn: psycopg.Connection[Any]) -> None:
    dry = ok(run(dsn, "queues", "ceiling", "mail", "--depth", "100", "--create", "--dry-run"))
    assert "dry run" in dry.stdout and "ceiling depth 100" in dry.stdout
    assert conn.execute("SELECT count(*) FROM forklift.queues").fetchone() == (0,)
    got = ok(run(dsn, "queues", "ceiling", "mail", "--depth", "100", "--age", "5m", "--create",
                 "--reason", "protect the db"))
    assert "ceiling depth 100, age 300s" in got.stdout and "not measured yet" in got.stdout
    data = json.loads(ok(run(dsn, "queues", "show", "mail", "--json")).stdout)
    assert data["ceiling_depth"] == 100 and data["ceiling_age"] == 300 and data["full_by"] is None
    row = conn.execute("SELECT action, reason FROM forklift.audit ORDER BY id DESC LIMIT 1"
                       ).fetchone()
    assert row == ("queue_ceiling", "protect the db")
    listed = ok(run(dsn, "queues", "list")).stdout
    assert "ceiling" in listed and "depth 100, age 300s" in listed and "room" in listed
    off = json.loads(ok(run(dsn, "queues", "ceiling", "mail", "--off", "--json")).stdout)
    assert off["ceiling_depth"] is None and off["ceiling_age"] is None
    assert "no ceiling" in ok(run(dsn, "queues", "show", "mail")).stdout


def test_absurd_values_are_refused_naming_the_field(dsn: str, conn: psycopg.Connection[Any]
                                                    ) -> None:
    for args, field in ((["--depth", "0"], "depth"), (["--age", "0.1s"], "age"),
                        (["--age", "forever"], "age"), ([], "depth"),
                        (["--depth", "5", "--off"], "off")):
        got = run(dsn, "queues", "ceiling", "mail", "--create", *args, "--json")
        assert got.exit_code != 0, args
        assert field in got.stdout + got.stderr, (args, got.stdout, got.stderr)
    assert conn.execute("SELECT count(*) FROM forklift.queues").fetchone() == (0,)


def test_a_full_queue_is_shown_and_health_alerts_with_advice(
        dsn: str, conn: psycopg.Connection[Any]) -> None:
    ok(run(dsn, "queues", "ceiling", "mail", "--depth", "10", "--create"))
    conn.execute("UPDATE forklift.queues SET full_by = 'depth', measured_depth = 11,"
                 " measured_at = now() WHERE name = 'mail'")
    shown = ok(run(dsn, "queues", "show", "mail")).stdout
    assert "full" in shown and "past its depth ceiling" in shown and "depth 11" in shown
    assert "full (depth)" in ok(run(dsn, "queues", "list")).stdout
    got = run(dsn, "health", "--json")
    assert got.exit_code == 1, got.stdout
    report = json.loads(got.stdout)
    (alert,) = [a for a in report["alerts"] if a["code"] == "queue_full"]
    assert alert["subject"] == "mail" and "11 jobs waiting" in alert["message"]
    assert "forklift queues ceiling mail" in alert["action"]
    (check,) = [c for c in report["checks"] if c["name"] == "backpressure"]
    assert check["level"] == "warning" and "mail" in check["summary"]
    text = run(dsn, "health").stdout
    assert "queue mail is full" in text
