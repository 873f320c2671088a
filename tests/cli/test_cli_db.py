"""`forklift db start|status|stop|remove` against private embedded servers (throwaway FORKLIFT_HOMEs)."""

from __future__ import annotations

import json
from pathlib import Path

import psycopg
import pytest
from typer.testing import CliRunner

from forklift import embedded
from forklift.cli.main import app


@pytest.fixture
def home(scratch_home: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> Path:
    path = scratch_home / request.node.name[:40]
    path.mkdir()
    path.chmod(0o755)
    monkeypatch.setenv("FORKLIFT_HOME", str(path))
    return path


def run(*args: str) -> object:
    return CliRunner().invoke(app, list(args))


def test_status_and_stop(home: Path) -> None:
    runner = CliRunner()
    stopped = runner.invoke(app, ["db", "status", "--json"])
    assert stopped.exit_code == 0, stopped.output
    assert json.loads(stopped.stdout)["running"] is False

    embedded.ensure_server(home)
    running = runner.invoke(app, ["db", "status", "--json"])
    assert json.loads(running.stdout)["running"] is True
    assert "running" in runner.invoke(app, ["db", "status"]).stdout

    dry = runner.invoke(app, ["db", "stop", "--dry-run"])
    assert dry.exit_code == 0 and "would stop" in dry.stdout
    assert embedded.server_status(home)["running"] is True

    result = runner.invoke(app, ["db", "stop"])
    assert result.exit_code == 0
    assert "stopped" in result.stdout
    assert embedded.server_status(home)["running"] is False
    assert "was not running" in runner.invoke(app, ["db", "stop"]).stdout
    assert (home / "pg18" / "PG_VERSION").exists()  # stop keeps the data


def test_stop_purge_asks_shows_and_deletes(home: Path) -> None:
    runner = CliRunner()
    embedded.ensure_server(home)
    data = Path(embedded.server_status(home)["data_dir"])

    refused = runner.invoke(app, ["db", "stop", "--purge"])  # stdin is not a terminal
    assert refused.exit_code == 1
    assert "confirmation" in refused.stderr and "--yes" in refused.stderr
    assert (data / "PG_VERSION").exists()

    dry = runner.invoke(app, ["db", "stop", "--purge", "--dry-run", "--json"])
    assert dry.exit_code == 0, dry.output
    plan = json.loads(dry.stdout)
    assert plan["dry_run"] is True and plan["data_dir"] == str(data) and plan["bytes"] > 0
    assert (data / "PG_VERSION").exists()

    done = runner.invoke(app, ["db", "stop", "--purge", "--yes", "--json"])
    assert done.exit_code == 0, done.output
    report = json.loads(done.stdout)
    assert report["removed"] == [str(data)] and report["was_running"] is True
    assert not data.exists()
    again = runner.invoke(app, ["db", "remove", "--yes"])
    assert again.exit_code == 0 and "nothing to delete" in again.stdout


def test_remove_refuses_while_in_use_unless_forced(home: Path) -> None:
    runner = CliRunner()
    conninfo = embedded.ensure_server(home)
    data = Path(embedded.server_status(home)["data_dir"])
    with psycopg.connect(conninfo, application_name="myapp:worker") as held:
        refused = runner.invoke(app, ["db", "remove", "--yes", "--json"])
        assert refused.exit_code == 1
        assert json.loads(refused.stdout)["error"]["code"] == "server_in_use"
        assert "myapp:worker" in refused.stderr and len(refused.stderr.strip().splitlines()) == 1
        assert (data / "PG_VERSION").exists()
        dry = runner.invoke(app, ["db", "remove", "--dry-run"])
        assert "refused while 1 other session" in dry.stdout
        forced = runner.invoke(app, ["db", "remove", "--yes", "--force"])
        assert forced.exit_code == 0, forced.output
        with pytest.raises(psycopg.OperationalError):
            held.execute("SELECT 1")
    assert not data.exists()


def test_start_starts_the_server_once_and_prints_its_conninfo(home: Path) -> None:
    assert embedded.server_status(home)["running"] is False
    first = CliRunner().invoke(app, ["db", "start", "--json"])
    assert first.exit_code == 0, first.output
    report = json.loads(first.stdout)
    assert report["started"] is True and report["running"] is True
    status = embedded.server_status(home)
    assert status["running"] is True and report["pid"] == status["pid"]
    with psycopg.connect(report["conninfo"]) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)

    again = CliRunner().invoke(app, ["db", "start"])
    assert again.exit_code == 0, again.output
    assert "already running" in again.stdout and str(status["pid"]) in again.stdout
    assert embedded.server_status(home)["pid"] == status["pid"]  # the same server, not a new one
    assert embedded.stop_server(home)
