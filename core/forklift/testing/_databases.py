"""A PostgreSQL for a test run, a migrated template, and a fresh database per test.

The server is ``FORKLIFT_TEST_DSN`` (a role that may CREATE DATABASE), or else forklift's
embedded server in a home of its own (``FORKLIFT_TEST_HOME``, default a per-user cache
directory), never the user's ``FORKLIFT_HOME``. Every pytest process using the embedded server
(each xdist worker) leaves a marker under the home; the last one out stops it. The template
``forklift_pt_tmpl_<digest>`` is migrated once (under an advisory lock, so parallel processes
build it once) and kept until the migrations change; a test's database is a clone of it
(milliseconds) and is dropped after the test.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import itertools
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

PREFIX = "forklift_pt_"
_DONE = "forklift pytest template: migrated"


def home_dir() -> Path:
    explicit = os.environ.get("FORKLIFT_TEST_HOME")
    if explicit:
        return Path(explicit).expanduser().resolve()
    import platformdirs

    return Path(platformdirs.user_cache_dir("forklift", appauthor=False)) / "pytest"


@contextlib.contextmanager
def _locked(home: Path) -> Iterator[None]:
    home.mkdir(parents=True, exist_ok=True)
    fd = os.open(home / "pytest-users.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _users(home: Path) -> Path:
    path = home / "pytest-users"
    path.mkdir(parents=True, exist_ok=True)
    for marker in path.iterdir():
        if not marker.name.isdigit() or not _alive(int(marker.name)):
            marker.unlink(missing_ok=True)
    return path


def acquire_server() -> str:
    """Admin conninfo (maintenance database) of the test server, started if need be."""
    external = os.environ.get("FORKLIFT_TEST_DSN")
    if external:
        return external
    from forklift import embedded

    home = home_dir()
    with _locked(home):
        (_users(home) / str(os.getpid())).touch()
        conninfo = embedded.ensure_server(home)
    return make_conninfo(conninfo, dbname="postgres")


def release_server() -> None:
    """This process is done with the embedded server; the last one out stops it."""
    if os.environ.get("FORKLIFT_TEST_DSN"):
        return
    from forklift import embedded

    home = home_dir()
    with _locked(home):
        users = _users(home)
        (users / str(os.getpid())).unlink(missing_ok=True)
        if not any(users.iterdir()):
            embedded.stop_server(home)


def _admin(admin_dsn: str) -> psycopg.Connection[Any]:
    return psycopg.connect(admin_dsn, autocommit=True, application_name="forklift:pytest")


def template_name(schema: str) -> str:
    from forklift._db.migrate import fingerprint

    digest = hashlib.sha256(f"{schema}\0{fingerprint()}".encode()).hexdigest()[:16]
    return f"{PREFIX}tmpl_{digest}"


class Databases:
    """Clones of the migrated template for one pytest process."""

    def __init__(self, admin_dsn: str, schema: str = "forklift") -> None:
        self.admin_dsn = admin_dsn
        self.schema = schema
        self._seq = itertools.count()
        self._conn = _admin(admin_dsn)
        self._drop_stale()
        self.template = self._build_template()

    def _drop_stale(self) -> None:
        """Databases that pytest processes of this host left behind when they were killed."""
        rows = self._conn.execute(
            "SELECT datname FROM pg_database WHERE datname LIKE %s AND datname NOT LIKE %s",
            (PREFIX + "%", PREFIX + "tmpl_%"),
        ).fetchall()
        for (name,) in rows:
            pid = name[len(PREFIX):].split("_")[0]
            if pid.isdigit() and not _alive(int(pid)):
                self._drop(name)

    def _build_template(self) -> str:
        from forklift._db.migrate import migrate

        name = template_name(self.schema)
        lock = "SELECT pg_advisory_lock(hashtextextended('forklift pytest: template', 0))"
        self._conn.execute(lock)
        try:
            row = self._conn.execute(
                "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = %s",
                (name,),
            ).fetchone()
            if row is None or row[0] != _DONE:
                self._drop(name)  # half built by a run that was killed
                ident = sql.Identifier(name)
                self._conn.execute(sql.SQL("CREATE DATABASE {} TEMPLATE template0").format(ident))
                migrate(make_conninfo(self.admin_dsn, dbname=name), self.schema)
                with contextlib.suppress(psycopg.errors.InsufficientPrivilege):
                    # Nobody connects to it again (autovacuum included), so clones never wait.
                    self._conn.execute(sql.SQL(
                        "ALTER DATABASE {} WITH IS_TEMPLATE true ALLOW_CONNECTIONS false"
                    ).format(ident))
                self._conn.execute(sql.SQL("COMMENT ON DATABASE {} IS {}").format(ident, _DONE))
        finally:
            self._conn.execute(
                "SELECT pg_advisory_unlock(hashtextextended('forklift pytest: template', 0))")
        return name

    def create(self) -> str:
        name = f"{PREFIX}{os.getpid()}_{next(self._seq)}"
        self._conn.execute(sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
            sql.Identifier(name), sql.Identifier(self.template)))
        return make_conninfo(self.admin_dsn, dbname=name)

    def drop(self, dsn: str) -> None:
        self._drop(str(conninfo_to_dict(dsn)["dbname"]))

    def _drop(self, name: str) -> None:
        ident = sql.Identifier(name)
        with contextlib.suppress(psycopg.errors.InvalidCatalogName):
            self._conn.execute(sql.SQL("ALTER DATABASE {} WITH IS_TEMPLATE false").format(ident))
        self._conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))

    def close(self) -> None:
        self._conn.close()
