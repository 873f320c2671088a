"""A job's attempt logs, seen by operators: `jobs show` prints them by attempt, and its --json
carries them; a job that logged nothing shows no logs section."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from apps import joblogs
from apps.basic import running_worker
from helpers import wait_until
from typer.testing import CliRunner

from forklift import Forklift
from forklift.cli.main import app as cli


def run(dsn: str, *args: str) -> Any:
    result = CliRunner().invoke(cli, list(args), env={"FORKLIFT_DSN": dsn})
    assert result.exit_code == 0, (result.stdout, result.stderr)
    return result


@pytest.fixture
def app(dsn: str) -> Iterator[Forklift]:
    joblogs.app.use(dsn)
    try:
        yield joblogs.app
    finally:
        joblogs.app.close()


def test_show_prints_each_attempts_log(dsn: str, app: Forklift,
                                       conn: psycopg.Connection[Any]) -> None:
    flaky = joblogs.flaky.enqueue({})
    secret = joblogs.secret.enqueue({})
    silent = joblogs.silent.enqueue({"i": 1})
    ids = [flaky.id, secret.id, silent.id]
    with running_worker(app, queues=["logs"]):
        wait_until(lambda: conn.execute(
            "SELECT count(*) FROM forklift.jobs WHERE id = ANY(%s) AND state = 'completed'",
            (ids,)).fetchone() == (3,), timeout=30, message="the jobs completed")
    human = run(dsn, "jobs", "show", str(flaky.id)).stdout
    section = human[human.index("logs\n"):human.index("timeline")]
    assert section.index("attempt 1") < section.index("try 1") < section.index("attempt 2") \
        < section.index("try 2")
    assert "INFO" in section
    shown = " ".join(run(dsn, "jobs", "show", str(secret.id)).stdout.split())  # unwrapped
    assert "postgresql://app:***@db.internal/orders" in shown
    assert "api_token=*** user=ada" in shown  # the fields in the order given
    assert "hunter2" not in shown
    assert "logs\n" not in run(dsn, "jobs", "show", str(silent.id)).stdout

    detail = json.loads(run(dsn, "jobs", "show", str(flaky.id), "--json").stdout)
    assert [(entry["attempt"], [line["message"] for line in entry["lines"]])
            for entry in detail["logs"]] == [(1, ["try 1"]), (2, ["try 2"])]
    assert detail["logs"][0]["lines"][0]["level"] == "info"
    assert json.loads(run(dsn, "jobs", "show", str(silent.id), "--json").stdout)["logs"] == []
