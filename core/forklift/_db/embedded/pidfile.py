"""Is the embedded server running? Its pid file, its processes, and waiting out a start.

PostgreSQL's own check treats any pid in postmaster.pid as a live postmaster; these read
/proc as well, so a zombie or a reused pid does not block a start.
"""

from __future__ import annotations

import contextlib
import errno
import os
import time
from dataclasses import dataclass
from pathlib import Path

from forklift._base.errors import ConfigError, DatabaseUnavailable

LOG_NAME = "server.log"
START_TIMEOUT = 60.0


@dataclass(frozen=True)
class PidFile:
    pid: int
    start_time: int
    port: int
    socket_dir: str
    host: str
    status: str


def read_pidfile(data: Path) -> PidFile | None:
    try:
        lines = (data / "postmaster.pid").read_text(encoding="utf-8").splitlines()
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        if exc.errno == errno.EACCES:
            raise ConfigError(f"cannot read {data / 'postmaster.pid'}: permission denied") from None
        raise
    # Written in steps while the postmaster starts; the status line comes last.
    if len(lines) < 5 or not lines[0].strip().lstrip("-").isdigit():
        return None
    try:
        return PidFile(
            pid=abs(int(lines[0])),
            start_time=int(lines[2]),
            port=int(lines[3]),
            socket_dir=lines[4].strip(),
            host=lines[5].strip() if len(lines) > 5 else "",
            status=lines[7].strip() if len(lines) > 7 else "starting",
        )
    except ValueError:
        return None


def process_started(pid: int) -> float | None:
    """When ``pid`` started (epoch seconds), -1.0 for a zombie, None where /proc cannot tell."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        if fields[0] in ("Z", "X"):
            return -1.0  # exited, not yet reaped by its parent (init, after pg_ctl)
        btime = next(
            float(line.split()[1])
            for line in Path("/proc/stat").read_text().splitlines()
            if line.startswith("btime ")
        )
        return btime + int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError, StopIteration):
        return None


def alive(info: PidFile) -> bool:
    """Is the postmaster that wrote this pid file still running (and not a reused pid)?"""
    try:
        os.kill(info.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # alive, another user's
    started = process_started(info.pid)
    return started is None or abs(started - info.start_time) < 10.0


def clear_stale_pidfile(data: Path) -> None:
    """Remove a dead postmaster's lock files when PostgreSQL itself would refuse to start.

    PostgreSQL treats any existing pid as a live postmaster; a postmaster killed with SIGKILL
    can linger as a zombie (init reaps late) or its pid can be reused. Only then, and only
    once no process of the old server still works in the data directory, is the file removed.
    """
    info = read_pidfile(data)
    if info is None or alive(info):
        return
    try:
        os.kill(info.pid, 0)
    except ProcessLookupError:
        return  # PostgreSQL handles a stale pid file whose process is gone
    except PermissionError:
        pass
    deadline = time.monotonic() + 10.0
    while workers_in(data):
        if time.monotonic() >= deadline:
            raise DatabaseUnavailable(
                f"processes of a crashed PostgreSQL server still run in {data}: stop them",
                target=str(data),
            )
        time.sleep(0.05)
    socket_lock = Path(info.socket_dir or data) / f".s.PGSQL.{info.port}.lock"
    for stale in (socket_lock, data / "postmaster.pid"):
        with contextlib.suppress(FileNotFoundError):
            stale.unlink()


def workers_in(data: Path) -> list[int]:
    """Live (non-zombie) processes whose working directory is ``data`` (postgres chdirs there)."""
    found = []
    data = data.resolve()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if (
                Path(os.readlink(entry / "cwd")) == data
                and process_started(int(entry.name)) != -1.0
            ):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def running(data: Path) -> PidFile | None:
    """The pid file of a running server on ``data``, waiting out a start or stop in progress."""
    now = time.monotonic()
    deadline, partial_deadline = now + START_TIMEOUT, now + 2.0
    while True:
        info = read_pidfile(data)
        if info is None or not alive(info):
            partial = info is None and (data / "postmaster.pid").exists()
            if partial and time.monotonic() < partial_deadline:
                time.sleep(0.02)  # being written by a starting postmaster
                continue
            return None
        if info.status == "ready":
            return info
        if time.monotonic() >= deadline:
            raise DatabaseUnavailable(
                f"the embedded PostgreSQL server in {data} is stuck in state {info.status!r};"
                f" see {data / LOG_NAME}",
                target=str(data),
            )
        time.sleep(0.05)
