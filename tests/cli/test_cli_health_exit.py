"""`forklift health --json` exits with the report's level, for a cron monitor: 0 ok, 1 warning,
2 critical; `--fail-on-alert` keeps exiting 1 on any alert in text mode."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from typer.testing import CliRunner

from forklift.cli.main import app as cli
from forklift.ops import health as h


def run(dsn: str, *args: str) -> Any:
    return CliRunner().invoke(cli, list(args), env={"FORKLIFT_DSN": dsn})


@pytest.fixture
def horizon_holder(dsn: str) -> Iterator[psycopg.Connection[Any]]:
    """A side session idle in a transaction that holds an xid, with transactions after it."""
    side = psycopg.connect(dsn, application_name="stuck-client")
    side.execute("SELECT txid_current()").fetchone()
    with psycopg.connect(dsn, autocommit=True) as other:
        for _ in range(3):
            other.execute("SELECT txid_current()")
    try:
        yield side
    finally:
        side.rollback()
        side.close()


def report(dsn: str, *args: str) -> tuple[int, dict[str, Any]]:
    got = run(dsn, "health", "--json", *args)
    return got.exit_code, json.loads(got.stdout)


def test_ok_exits_0(dsn: str) -> None:
    code, data = report(dsn)
    assert (code, data["level"], data["alerts"]) == (0, "ok", [])


def test_a_warning_exits_1(dsn: str) -> None:
    # Any client connection at all crosses a zero threshold; far from the critical 95%.
    code, data = report(dsn, "--threshold", "connections_ratio=0")
    assert data["level"] == "warning" and code == 1
    assert [(a["code"], a["level"]) for a in data["alerts"]] == [("connections", "warning")]


def test_a_critical_alert_exits_2(dsn: str, horizon_holder: psycopg.Connection[Any]) -> None:
    # A horizon held ten times past its threshold (here: any age over zero) is critical.
    code, data = report(dsn, "--threshold", "horizon_seconds=0", "--threshold",
                        "connections_ratio=0")
    assert data["level"] == "critical" and code == 2, data["alerts"]
    levels = {a["code"]: a["level"] for a in data["alerts"]}
    assert levels == {"horizon_held": "critical", "connections": "warning"}


def test_fail_on_alert_keeps_exiting_1_in_text(dsn: str,
                                               horizon_holder: psycopg.Connection[Any]) -> None:
    calm = run(dsn, "health", "--fail-on-alert")
    assert calm.exit_code == 0 and "no alerts" in calm.stdout
    alarmed = run(dsn, "health", "--threshold", "horizon_seconds=0", "--fail-on-alert")
    assert alarmed.exit_code == 1 and "critical horizon_held" in alarmed.stdout
    assert run(dsn, "health", "--threshold", "horizon_seconds=0").exit_code == 0
    # A usage error keeps its exit 2, and says so in the JSON.
    bad = run(dsn, "health", "--json", "--threshold", "nonsense")
    assert bad.exit_code == 2 and json.loads(bad.stdout)["error"]["code"] == "usage_error"


def test_the_level_is_the_worst_alert() -> None:
    warn = h.Alert("dead_tuples", "jobs", "m", "a")
    crit = h.Alert("horizon_held", "pid 1", "m", "a", "critical")
    assert h.level([]) == "ok"
    assert h.level([warn]) == "warning"
    assert h.level([warn, crit, warn]) == "critical"


def test_finished_jobs_past_their_window_are_a_retention_backlog_with_advice(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    conn.execute(
        "INSERT INTO forklift.jobs (queue, kind, args, state, attempt, finished_at, created_at)"
        " SELECT 'default', 'old.report', '{}'::jsonb, 'completed', 1,"
        "        now() - interval '3 days', now() - interval '3 days'"
        " FROM generate_series(1, 5)")
    code, body = report(dsn, "-t", "retention_backlog=3")
    assert body["retention_backlog"] == {"completed": 5, "cancelled": 0, "dead": 0}
    alert = next(a for a in body["alerts"] if a["code"] == "retention_backlog")
    assert alert["action"] == h.RETENTION_ADVICE and "completed 5" in alert["message"]
    check = next(c for c in body["checks"] if c["name"] == "retention")
    assert check["level"] == "warning" and check["action"] == h.RETENTION_ADVICE
    assert code == 1
    # Under the default threshold the same backlog is only reported, and every check is ok.
    code, body = report(dsn)
    assert code == 0 and {c["level"] for c in body["checks"]} == {"ok"}
    assert [c["name"] for c in body["checks"]] == [
        "horizon", "locks", "connections", "notify_queue", "bloat", "retention", "starvation",
        "backpressure"]
    text = run(dsn, "health").stdout
    assert "retention backlog: 5 finished jobs over an hour past their window" in text
