"""`forklift webhooks ...` against a real database: JSON output, --dry-run that changes
nothing, the audit rows, and refusals with their codes."""

from __future__ import annotations

import json
from typing import Any

import psycopg
from click.testing import Result
from typer.testing import CliRunner

from forklift.cli.main import app as cli


def run(dsn: str, *args: str) -> Result:
    return CliRunner().invoke(cli, list(args), env={"FORKLIFT_DSN": dsn, "FORKLIFT_ACTOR": "ana"})


def seed(conn: psycopg.Connection[Any]) -> None:
    conn.execute("INSERT INTO forklift.webhook_endpoints (name, url, last_status, last_size,"
                 " failure_streak, failed) VALUES ('billing', 'https://example.com/h', 503, 0,"
                 " 4, 4)")
    conn.execute("INSERT INTO forklift.webhook_attempts (endpoint, event_id, event_type, job_id,"
                 " attempt, status, size, outcome) VALUES ('billing', 'msg_1', 'invoice.paid',"
                 " 1, 1, 503, 0, 'retry'), ('billing', 'msg_1', 'invoice.paid', 1, 2, NULL,"
                 " NULL, 'failed')")


def audit(conn: psycopg.Connection[Any]) -> list[tuple[Any, ...]]:
    return conn.execute("SELECT actor, action, target, reason FROM forklift.audit"
                        " ORDER BY id").fetchall()


def test_endpoints_and_deliveries_as_json(dsn: str, conn: psycopg.Connection[Any]) -> None:
    seed(conn)
    listed = run(dsn, "webhooks", "endpoints", "--json")
    assert listed.exit_code == 0, listed.output
    (billing,) = json.loads(listed.output)
    assert {k: billing[k] for k in ("name", "enabled", "last_status", "failure_streak",
                                    "pending")} == {
        "name": "billing", "enabled": True, "last_status": 503, "failure_streak": 4,
        "pending": 0}
    tries = run(dsn, "webhooks", "deliveries", "--endpoint", "billing", "--json")
    assert tries.exit_code == 0, tries.output
    assert [(a["attempt"], a["status"], a["outcome"]) for a in json.loads(tries.output)] == [
        (2, None, "failed"), (1, 503, "retry")]
    human = run(dsn, "webhooks", "endpoints")
    assert human.exit_code == 0 and "billing" in human.output and "failing" in human.output


def test_disable_and_enable_are_audited_and_dry_run_changes_nothing(
        dsn: str, conn: psycopg.Connection[Any]) -> None:
    seed(conn)
    rehearsed = run(dsn, "webhooks", "disable", "billing", "--dry-run", "--json")
    assert rehearsed.exit_code == 0, rehearsed.output
    shown = json.loads(rehearsed.output)
    assert shown["dry_run"] is True and shown["endpoint"]["enabled"] is False
    assert conn.execute("SELECT enabled FROM forklift.webhook_endpoints").fetchone() == (True,)
    assert audit(conn) == []

    refused = run(dsn, "webhooks", "disable", "billing")  # no terminal, no --yes
    assert refused.exit_code == 1
    done = run(dsn, "webhooks", "disable", "billing", "--yes", "--reason", "their outage",
               "--json")
    assert done.exit_code == 0, done.output
    assert json.loads(done.output)["endpoint"]["disabled_reason"] == "their outage"
    back = run(dsn, "webhooks", "enable", "billing", "--json")
    assert back.exit_code == 0, back.output
    assert json.loads(back.output)["endpoint"]["enabled"] is True
    assert audit(conn) == [
        ("ana", "webhooks.disable", {"endpoint": "billing"}, "their outage"),
        ("ana", "webhooks.enable", {"endpoint": "billing"}, None),
    ]


def test_enabling_an_unknown_endpoint_is_refused_with_its_code(dsn: str) -> None:
    got = run(dsn, "webhooks", "enable", "nowhere", "--json")
    assert got.exit_code == 1
    assert json.loads(got.stdout)["error"]["code"] == "webhook_endpoint_not_found"
