"""A job's start-by deadline and debounce key, seen by operators: `jobs show` and its --json."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from typer.testing import CliRunner

from forklift import Debounce, Forklift, JobContext
from forklift.cli.main import app as cli

# An app of this module's own: binding the shared test apps to this test's database would leave
# them pointed at it after it is dropped, for the `--app` commands of tests that follow.
jobs = Forklift()


@jobs.job(name="cli_deadlines.greet")
def greet(ctx: JobContext, payload: dict[str, str]) -> None:
    """Never run here: the test only enqueues and shows."""


def run(dsn: str, *args: str) -> Any:
    result = CliRunner().invoke(cli, list(args), env={"FORKLIFT_DSN": dsn})
    assert result.exit_code == 0, (result.stdout, result.stderr)
    return result


@pytest.fixture
def app(dsn: str) -> Iterator[Forklift]:
    jobs.use(dsn)
    try:
        yield jobs
    finally:
        jobs.close()


def test_show_names_the_deadline_and_the_debounce_key(dsn: str, app: Forklift) -> None:
    at = datetime(2999, 1, 2, 3, 4, 5, tzinfo=UTC)
    job = greet.enqueue({"name": "a"}, expires=at,
                             debounce=Debounce("greet:a", wait=timedelta(hours=1)))
    human = run(dsn, "jobs", "show", str(job.id)).stdout
    assert "start by: 2999-01-02" in human and "debounce key: greet:a" in human
    detail = json.loads(run(dsn, "jobs", "show", str(job.id), "--json").stdout)
    assert detail["debounce_key"] == "greet:a"
    assert datetime.fromisoformat(detail["expires_at"]) == at
    plain = greet.enqueue({"name": "b"})
    shown = run(dsn, "jobs", "show", str(plain.id)).stdout
    assert "start by" not in shown and "debounce" not in shown


def invoke(dsn: str, *args: str) -> Any:
    return CliRunner().invoke(cli, list(args), env={"FORKLIFT_DSN": dsn})


def test_retry_gives_a_requeued_job_a_new_deadline_or_none(dsn: str, app: Forklift) -> None:
    job = greet.enqueue({"name": "a"}, expires=datetime(2999, 1, 1, tzinfo=UTC))
    run(dsn, "jobs", "cancel", str(job.id), "--yes")
    before = datetime.now(UTC)
    rehearsed = json.loads(run(dsn, "jobs", "retry", str(job.id), "--expires", "2h",
                               "--dry-run", "--json").stdout)
    assert rehearsed["results"][0]["outcome"] == "requeued"
    assert json.loads(run(dsn, "jobs", "show", str(job.id), "--json").stdout)["state"] == (
        "cancelled")  # the rehearsal changed nothing
    run(dsn, "jobs", "retry", str(job.id), "--expires", "2h", "--yes", "--json")
    detail = json.loads(run(dsn, "jobs", "show", str(job.id), "--json").stdout)
    assert detail["state"] == "available"
    deadline = datetime.fromisoformat(detail["expires_at"])
    assert before + timedelta(minutes=119) < deadline < before + timedelta(hours=3)
    run(dsn, "jobs", "cancel", str(job.id), "--yes")
    run(dsn, "jobs", "retry", str(job.id), "--expires", "off", "--yes")
    detail = json.loads(run(dsn, "jobs", "show", str(job.id), "--json").stdout)
    assert detail["state"] == "available" and detail["expires_at"] is None


@pytest.mark.parametrize("args", [
    ("jobs", "retry", "1", "--expires", "soon", "--yes"),           # not a duration
    ("jobs", "retry", "--state", "dead", "--expires", "1h", "--yes"),  # a filter, not ids
    ("jobs", "cancel", "1", "--expires", "1h", "--yes"),            # a requeue's option only
])
def test_retry_expires_refuses_what_it_cannot_use(dsn: str, args: tuple[str, ...]) -> None:
    result = invoke(dsn, *args)
    assert result.exit_code == 2, (result.stdout, result.stderr)
    assert "expires" in result.stderr
