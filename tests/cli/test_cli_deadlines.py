"""A job's start-by deadline and debounce key, seen by operators: `jobs show` and its --json."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from apps import basic
from typer.testing import CliRunner

from forklift import Debounce, Forklift
from forklift.cli.main import app as cli


def run(dsn: str, *args: str) -> Any:
    result = CliRunner().invoke(cli, list(args), env={"FORKLIFT_DSN": dsn})
    assert result.exit_code == 0, (result.stdout, result.stderr)
    return result


@pytest.fixture
def app(dsn: str) -> Iterator[Forklift]:
    with basic.bound(dsn) as bound_app:
        yield bound_app


def test_show_names_the_deadline_and_the_debounce_key(dsn: str, app: Forklift) -> None:
    at = datetime(2999, 1, 2, 3, 4, 5, tzinfo=UTC)
    job = basic.echo.enqueue(basic.Greeting("a"), expires=at,
                             debounce=Debounce("greet:a", wait=timedelta(hours=1)))
    human = run(dsn, "jobs", "show", str(job.id)).stdout
    assert "start by: 2999-01-02" in human and "debounce key: greet:a" in human
    detail = json.loads(run(dsn, "jobs", "show", str(job.id), "--json").stdout)
    assert detail["debounce_key"] == "greet:a"
    assert datetime.fromisoformat(detail["expires_at"]) == at
    plain = basic.echo.enqueue(basic.Greeting("b"))
    shown = run(dsn, "jobs", "show", str(plain.id)).stdout
    assert "start by" not in shown and "debounce" not in shown
