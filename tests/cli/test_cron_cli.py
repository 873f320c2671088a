"""`forklift schedules ...` and `forklift backfills ...` end to end through typer's runner
against a real PostgreSQL."""

from __future__ import annotations

import json
from typing import Any

import psycopg
from typer.testing import CliRunner

from forklift.cli.main import app as cli


def run(dsn: str, *args: str, **env: str) -> Any:
    return CliRunner().invoke(cli, list(args), env={"FORKLIFT_DSN": dsn, "FORKLIFT_ACTOR": "cli", **env})


def ok(result: Any) -> Any:
    assert result.exit_code == 0, (result.stdout, result.stderr)
    return result


def test_schedules_commands(dsn: str, conn: psycopg.Connection[Any]) -> None:
    assert "no schedules recorded" in ok(run(dsn, "schedules", "list")).stdout
    # --app records the app's schedules (a leading worker does the same).
    listed = json.loads(ok(run(dsn, "schedules", "list", "--json", "--app", "apps.scheduled:app")).stdout)
    assert [(s["name"], s["cron"], s["policy"], s["paused"]) for s in listed] == [
        ("beat", "* * * * * */2", "catch_up", False)]
    assert listed[0]["next_at"] is not None and listed[0]["last_outcome"] is None

    paused = json.loads(ok(run(dsn, "schedules", "pause", "beat", "--reason", "deploy", "--json")).stdout)
    assert paused["paused"] and paused["paused_by"] == "cli" and paused["pause_reason"] == "deploy"
    assert "paused" in ok(run(dsn, "schedules", "list")).stdout
    ran = json.loads(ok(run(dsn, "schedules", "run-now", "beat", "--json")).stdout)
    assert ran["kind"] == "sched.beat" and ran["queue"] == "cron"
    assert f"job {ran['job_id'] + 1}" in ok(run(dsn, "schedules", "run-now", "beat")).stdout
    human = ok(run(dsn, "schedules", "resume", "beat")).stdout
    assert "active, next run" in human

    missing = run(dsn, "schedules", "pause", "nope")
    assert missing.exit_code == 1 and "no schedule named 'nope'" in missing.stderr
    refused = run(dsn, "schedules", "run-now", "beat", "--read-only", "--json")
    assert refused.exit_code == 1 and json.loads(refused.stdout)["error"]["code"] == "read_only"
    actions = conn.execute("SELECT action, actor, outcome FROM forklift.audit ORDER BY id").fetchall()
    assert actions == [
        ("schedule.pause", "cli", "done"), ("schedule.run_now", "cli", "done"),
        ("schedule.run_now", "cli", "done"), ("schedule.resume", "cli", "done"),
        ("schedule.pause", "cli", "refused: schedule_not_found"),
    ]


def test_backfills_commands(dsn: str, conn: psycopg.Connection[Any]) -> None:
    assert "no backfills recorded" in ok(run(dsn, "backfills", "list")).stdout
    nope = run(dsn, "backfills", "start", "bf.items")
    assert nope.exit_code == 1 and "pass --app" in nope.stderr

    started = json.loads(ok(run(dsn, "backfills", "start", "bf.items", "--app", "apps.scheduled:app",
                                "--rate", "5", "--from", "40", "--json")).stdout)
    assert started["outcome"] == "started" and not started["changed"]
    b = started["backfill"]
    assert (b["state"], b["rate"], b["cursor"], b["page_size"], b["job_state"]) == (
        "running", 5.0, 40, 10, "available")  # no worker here: its job waits
    again = ok(run(dsn, "backfills", "start", "bf.items")).stdout  # the recorded definition serves
    assert "already running" in again

    assert "rate 0.5/s" in ok(run(dsn, "backfills", "rate", "bf.items", "0.5")).stdout
    bad = run(dsn, "backfills", "rate", "bf.items", "0")
    assert bad.exit_code == 2 and "usage_error" in bad.stderr and "above 0" in bad.stderr
    assert "paused" in ok(run(dsn, "backfills", "pause", "bf.items", "--reason", "peak hours")).stdout
    shown = json.loads(ok(run(dsn, "backfills", "show", "bf.items", "--json")).stdout)
    assert shown["state"] == "paused" and shown["paused_by"] == "cli" and shown["eta"] == "—"
    assert len(shown["runs"]) == 1 and len(shown["pace"]) == 30
    human = ok(run(dsn, "backfills", "show", "bf.items")).stdout
    assert "paused by cli" in human and "cursor 40" in human
    assert "running" in ok(run(dsn, "backfills", "resume", "bf.items")).stdout

    unconfirmed = run(dsn, "backfills", "cancel", "bf.items")  # stdin is not a terminal
    assert unconfirmed.exit_code == 1 and "--yes" in unconfirmed.stderr
    assert "cancelled" in ok(run(dsn, "backfills", "cancel", "bf.items", "--yes")).stdout
    listed = json.loads(ok(run(dsn, "backfills", "list", "--json")).stdout)
    assert [(x["name"], x["state"]) for x in listed] == [("bf.items", "cancelled")]
    gone = run(dsn, "backfills", "pause", "bf.items")
    assert gone.exit_code == 1 and "no running, paused or failed run" in gone.stderr

    conn.execute("UPDATE forklift.backfill_runs SET state = 'completed'")
    done = run(dsn, "backfills", "start", "bf.items", "--json")
    assert done.exit_code == 1 and json.loads(done.stdout)["outcome"] == "completed"
    assert json.loads(ok(run(dsn, "backfills", "start", "bf.items", "--force", "--json")).stdout
                      )["outcome"] == "started"
    actions = [r[0] for r in conn.execute("SELECT action FROM forklift.audit ORDER BY id")]
    assert actions == ["backfill.start", "backfill.start", "backfill.start", "backfill.rate",
                       "backfill.pause", "backfill.resume", "backfill.cancel", "backfill.pause",
                       "backfill.start", "backfill.start"]
