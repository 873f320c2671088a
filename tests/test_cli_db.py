"""`forklift db status|stop` against a private embedded server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from forklift import embedded
from forklift_console.cli import app


def test_status_and_stop(scratch_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = scratch_home / "db-cmd"
    home.mkdir()
    monkeypatch.setenv("FORKLIFT_HOME", str(home))
    runner = CliRunner()

    stopped = runner.invoke(app, ["db", "status", "--json"])
    assert stopped.exit_code == 0, stopped.output
    assert json.loads(stopped.stdout)["running"] is False

    embedded.ensure_server(home)
    running = runner.invoke(app, ["db", "status", "--json"])
    assert json.loads(running.stdout)["running"] is True
    assert "running" in runner.invoke(app, ["db", "status"]).stdout

    result = runner.invoke(app, ["db", "stop"])
    assert result.exit_code == 0
    assert "stopped" in result.stdout
    assert embedded.server_status(home)["running"] is False
    assert "was not running" in runner.invoke(app, ["db", "stop"]).stdout
