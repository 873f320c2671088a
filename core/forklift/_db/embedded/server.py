"""The embedded PostgreSQL server itself: its pid file, start, stop, initdb, settings, data
directory and database. See forklift.embedded for the whole story."""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import psycopg
from psycopg import errors as pg_errors
from psycopg import sql
from psycopg.conninfo import make_conninfo

from forklift._base.errors import ConfigError, DatabaseUnavailable
from forklift._db.embedded import files
from forklift._db.embedded.files import (
    DATA_DIR_NAME,
    PORT,
    User,
    data_dir,
    package_bin_dir,
    reachable,
    server_bin_dir,
    short_socket_dir,
    socket_dir,
)
from forklift._db.embedded.pidfile import (
    LOG_NAME,
    START_TIMEOUT,
    PidFile,
    alive,
    running,
)

DATABASE = "forklift"
SUPERUSER = "postgres"
CONF_NAME = "forklift.conf"
_LOG_ROTATE_BYTES = 10 * 1024 * 1024


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


def prepare_data_dir(home: Path, user: User | None) -> Path:
    """Decide (once per home) where the data lives; make its parent ready for initdb."""
    existing = data_dir(home)
    if existing is not None:
        if user is not None and not reachable(existing.parent, user):
            raise ConfigError(
                f"the data directory {existing} is not reachable by the system user"
                f" {user.name} that runs the server as root: make its parents traversable"
                " (chmod o+x) or move it away to start afresh"
            )
        return existing
    link = home / DATA_DIR_NAME
    if user is None or reachable(home, user):
        return link
    # Root, and the service user cannot reach the home: keep the data outside it.
    outside = files.ROOT_BASE / "embedded" / hashlib.sha256(str(home).encode()).hexdigest()[:16]
    data = outside / DATA_DIR_NAME
    try:
        for d in (files.ROOT_BASE, files.ROOT_BASE / "embedded"):
            d.mkdir(mode=0o755, exist_ok=True)
        if outside.exists():
            # Left by a deleted home of the same path: a new home starts afresh.
            remove_data(data, user)
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


def conninfo_of(info: PidFile, dbname: str) -> str:
    host = info.socket_dir or info.host or "localhost"
    return make_conninfo("", host=host, port=info.port, user=SUPERUSER, dbname=dbname)


def run(args: list[str], user: User | None, timeout: float) -> tuple[int, str]:
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


def last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for line in reversed(lines):
        if any(word in line for word in ("FATAL", "PANIC", "ERROR", "error:")):
            return line
    return lines[-1] if lines else "no output"


def own(path: Path, user: User | None) -> None:
    if user is not None:
        os.chown(path, user.uid, user.gid)


def initdb(data: Path, bin_dir: Path, user: User | None) -> None:
    """initdb into a scratch directory, then rename: a half-made data dir is never adopted."""
    if data.is_dir() and not any(data.iterdir()):
        data.rmdir()
    elif data.exists() or data.is_symlink():
        raise ConfigError(f"{data} exists but is not a PostgreSQL data directory: move it away")
    scratch = data.with_name(data.name + ".initdb")
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(mode=0o700)
    own(scratch, user)
    code, output = run(
        [str(bin_dir / "initdb"), "-D", str(scratch), "-U", SUPERUSER, "--auth=trust",
         "--encoding=UTF8", "--locale=C", "--locale-provider=builtin",
         "--builtin-locale=C.UTF-8", "--no-instructions"],
        user, timeout=300,
    )  # fmt: skip
    if code != 0:
        shutil.rmtree(scratch, ignore_errors=True)
        raise DatabaseUnavailable(
            f"initdb failed for the embedded PostgreSQL server in {data}: {last_line(output)}",
            target=str(data),
        )
    with (scratch / "postgresql.conf").open("a", encoding="utf-8") as conf:
        conf.write(
            "\n# forklift: its defaults, rewritten at every start; ALTER SYSTEM overrides them.\n"
            f"include_if_exists = '{CONF_NAME}'\n"
        )
    scratch.rename(data)


def quote(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "''") + "'"


def write_conf(data: Path, socket_dir: Path, user: User | None) -> None:
    lines = [f"{k} = {v}" for k, v in SERVER_SETTINGS.items()]
    lines.append(f"unix_socket_directories = {quote(str(socket_dir))}")
    path = data / CONF_NAME
    tmp = path.with_name(CONF_NAME + ".tmp")
    tmp.write_text("# written by forklift at every start; do not edit\n" + "\n".join(lines) + "\n")
    tmp.chmod(0o600)
    own(tmp, user)
    tmp.replace(path)


def rotate_log(log: Path) -> None:
    with contextlib.suppress(OSError):
        if log.stat().st_size > _LOG_ROTATE_BYTES:
            log.replace(log.with_name(LOG_NAME + ".1"))


def start(data: Path, bin_dir: Path, user: User | None) -> PidFile:
    write_conf(data, socket_dir(data, user), user)
    log = data / LOG_NAME
    rotate_log(log)
    code, output = run(
        [str(bin_dir / "pg_ctl"), "start", "-D", str(data), "-l", str(log), "-w",
         "-t", str(int(START_TIMEOUT)), "-s"],
        user, timeout=START_TIMEOUT + 30,
    )  # fmt: skip
    info = running(data)
    if info is None:
        try:
            reason = last_line(log.read_text(encoding="utf-8", errors="replace")[-8192:])
        except OSError:
            reason = last_line(output)
        raise DatabaseUnavailable(
            f"the embedded PostgreSQL server in {data} did not start"
            f"{' (pg_ctl exit ' + str(code) + ')' if code else ''}: {reason}; see {log}",
            target=str(data),
        )
    return info


def stop(data: Path, info: PidFile, user: User | None) -> None:
    """``pg_ctl stop -m fast``: roll back open transactions, checkpoint, exit."""
    try:
        pg_ctl = server_bin_dir(package_bin_dir(), user) / "pg_ctl"
    except ConfigError:
        pg_ctl = None  # the package is gone: a fast shutdown is SIGINT to the postmaster
    if pg_ctl is not None:
        code, output = run(
            [str(pg_ctl), "stop", "-D", str(data), "-m", "fast", "-w", "-t", "60", "-s"],
            user, timeout=90,
        )  # fmt: skip
    else:
        with contextlib.suppress(ProcessLookupError):
            os.kill(info.pid, signal.SIGINT)
        code, output = 1, "postmaster did not exit after SIGINT"
    deadline = time.monotonic() + 60
    while alive(info) and time.monotonic() < deadline:
        time.sleep(0.02)
    if alive(info):
        raise DatabaseUnavailable(
            f"could not stop the embedded PostgreSQL server in {data}"
            f" (exit {code}): {last_line(output)}",
            target=str(data),
        )


def remove_data(data: Path, user: User | None) -> None:
    info = running(data) if data.exists() else None
    if info is not None:
        stop(data, info, user)
    shutil.rmtree(data, ignore_errors=True)
    shutil.rmtree(data.with_name(data.name + ".initdb"), ignore_errors=True)
    short = short_socket_dir(data, user)
    if short.is_dir() and not short.is_symlink():
        shutil.rmtree(short, ignore_errors=True)


def clients(info: PidFile) -> list[dict[str, Any]]:
    """Client sessions on the running server, but this one's own."""
    try:
        with psycopg.Connection.connect(conninfo_of(info, "postgres"), autocommit=True,
                                        connect_timeout=10) as admin:
            rows = admin.execute(
                "SELECT pid, application_name, datname, backend_start FROM pg_stat_activity"
                " WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()"
                " ORDER BY backend_start"
            ).fetchall()
    except psycopg.Error as exc:
        raise DatabaseUnavailable(
            f"cannot ask the embedded server who uses it: {str(exc).strip().splitlines()[0]}",
            target=info.socket_dir,
        ) from None
    return [{"pid": r[0], "application_name": r[1], "database": r[2], "since": r[3]}
            for r in rows]


def ensure_database(info: PidFile, data: Path) -> str:
    conninfo = conninfo_of(info, DATABASE)
    try:
        with psycopg.Connection.connect(conninfo, connect_timeout=10):
            return conninfo
    except psycopg.OperationalError:
        pass  # most likely: the database does not exist yet
    try:
        with psycopg.Connection.connect(
            conninfo_of(info, "postgres"), autocommit=True, connect_timeout=10
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
