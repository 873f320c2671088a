"""`forklift consumers ...` end to end through typer's runner, against a real PostgreSQL and
an in-process worker running the consumer: pause holds from the next batch, resume starts a
run at once, reset-cursor reads items again; --json, --dry-run, confirmation and audit rows."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from apps import consumers
from apps.basic import running_worker
from helpers import wait_until
from typer.testing import CliRunner

from forklift.cli.main import app as cli


def run(dsn: str, *args: str) -> Any:
    return CliRunner().invoke(cli, list(args), env={"FORKLIFT_DSN": dsn, "FORKLIFT_ACTOR": "cli"})


def ok(result: Any) -> Any:
    assert result.exit_code == 0, (result.stdout, result.stderr)
    return result


def shown(dsn: str) -> dict[str, Any]:
    listed = json.loads(ok(run(dsn, "consumers", "list", "--json")).stdout)
    assert [c["name"] for c in listed] == ["feed"]
    return dict(listed[0])


def job_state(conn: psycopg.Connection[Any], job_id: int) -> str | None:
    got = conn.execute("SELECT state FROM forklift.jobs WHERE id = %s", (job_id,)).fetchone()
    return str(got[0]) if got else None


def applied(conn: psycopg.Connection[Any]) -> int:
    got = conn.execute("SELECT count(*) FROM public.applied").fetchone()
    return int(got[0]) if got else 0


@pytest.fixture
def feed(dsn: str, conn: psycopg.Connection[Any]) -> Iterator[Any]:
    consumers.setup(conn)
    consumers.app.use(dsn)
    yield consumers.apply_feed
    consumers.app.close()


def test_pause_resume_and_reset_cursor(dsn: str, conn: psycopg.Connection[Any], feed: Any) -> None:
    assert "no consumers recorded" in ok(run(dsn, "consumers", "list")).stdout
    first = feed.start()  # records the consumer and enqueues a run; no worker yet
    listed = shown(dsn)
    assert (listed["state"], listed["cursor"], listed["run_job_id"]) == ("waiting", None, first.id)

    rehearsed = json.loads(ok(run(dsn, "consumers", "pause", "feed", "--dry-run", "--json")).stdout)
    assert rehearsed["paused"] and rehearsed["dry_run"]
    assert not shown(dsn)["paused"]  # a rehearsal changes nothing
    paused = json.loads(ok(run(dsn, "consumers", "pause", "feed", "--reason", "vendor outage",
                               "--json")).stdout)
    assert (paused["state"], paused["paused_by"], paused["pause_reason"]) == (
        "paused", "cli", "vendor outage")

    with running_worker(consumers.app, concurrency=4):
        # The run enqueued before the pause stops at its first batch, reading nothing.
        wait_until(lambda: job_state(conn, first.id) == "completed", timeout=30)
        assert applied(conn) == 0 and feed.start() is None
        # Resume starts a run at once through the supervisor (recorded when the worker leads).
        wait_until(lambda: conn.execute("SELECT 1 FROM forklift.schedules"
                                        " WHERE name = 'feed.supervisor'").fetchone(), timeout=30)
        assert "consumer feed:" in ok(run(dsn, "consumers", "resume", "feed")).stdout
        wait_until(lambda: shown(dsn)["items_done"] == consumers.ROWS, timeout=60,
                   message=lambda: f"not caught up: {shown(dsn)}")
        assert applied(conn) == consumers.ROWS

        dry = json.loads(ok(run(dsn, "consumers", "reset-cursor", "feed", "--to", "100",
                                "--dry-run", "--json")).stdout)
        assert dry["cursor"] == 100 and shown(dsn)["cursor"] == consumers.ROWS
        unasked = run(dsn, "consumers", "reset-cursor", "feed", "--to", "100")
        assert unasked.exit_code == 1 and "confirmation" in unasked.stderr
        bad = run(dsn, "consumers", "reset-cursor", "feed", "--to", "{oops", "--yes")
        assert bad.exit_code == 2 and "--to must be JSON" in bad.stderr
        assert "cursor 100" in ok(run(dsn, "consumers", "reset-cursor", "feed", "--to", "100",
                                      "--yes")).stdout
        wait_until(lambda: shown(dsn)["state"] == "idle", timeout=30)
        feed.start()  # rows 101..120 are read again
        wait_until(lambda: shown(dsn)["items_done"] == consumers.ROWS + 20, timeout=60)
    assert applied(conn) == consumers.ROWS + 20
    final = shown(dsn)
    assert (final["cursor"], final["failures"], final["state"]) == (consumers.ROWS, 0, "idle")
    assert final["cursor_age_seconds"] is not None and final["cursor_age_seconds"] >= 0

    missing = run(dsn, "consumers", "pause", "nope", "--json")
    assert missing.exit_code == 1
    assert json.loads(missing.stdout)["error"]["code"] == "consumer_not_found"
    audit = conn.execute("SELECT action, actor, outcome, target FROM forklift.audit"
                         " ORDER BY id").fetchall()
    assert [(a, actor, outcome) for a, actor, outcome, _ in audit] == [
        ("consumer.pause", "cli", "done"), ("consumer.resume", "cli", "done"),
        ("consumer.reset_cursor", "cli", "done"),
        ("consumer.pause", "cli", "refused: consumer_not_found"),
    ]
    assert audit[2][3] == {"consumer": "feed", "cursor": 100, "previous": consumers.ROWS}
