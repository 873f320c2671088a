"""Test harness: a real PostgreSQL for the run, a migrated template, a fresh database per test.

The server
    ``FORKLIFT_TEST_DSN`` set: that server, as a role that may CREATE DATABASE (a superuser is
    best). Nothing is started, tuned or stopped.

    Otherwise an embedded server (``forklift.embedded``) in a private home, never the user's
    FORKLIFT_HOME: ``FORKLIFT_TEST_HOME`` if set, else ``/dev/shm/forklift-test-<uid>-<hash of
    this checkout>`` (memory: a database created and dropped per test is the worst case for a
    disk file system, and on ext4 without a journal its cost grows with every test), else
    ``.forklift-test/`` in the checkout. Every pytest process that uses it (each xdist worker,
    and concurrent runs of the same checkout) registers its pid under a file lock; the last one
    to leave stops the server. Dead pids (SIGKILL, an aborted run) are pruned on the way in, so
    an aborted run leaves nothing that breaks the next one: its server is reused, its
    databases and scratch servers are removed. Only this server runs with fsync,
    synchronous_commit and full_page_writes off.

The template
    ``forklift_tmpl_<hash of the migration files>``: created and migrated once (under an
    advisory lock, so xdist workers and concurrent runs build it once) and reused by later runs
    until the migrations change.

Fixtures
    ``admin_dsn`` (session)  conninfo of an admin session on the maintenance database.
    ``dsn``                  conninfo of a fresh, migrated database; dropped after the test.
    ``conn``                 an autocommit psycopg connection to ``dsn``.
    ``empty_dsn``            conninfo of a fresh database without the forklift schema.
    ``scratch_home``         a directory for a test's own embedded server (module scope);
                             its servers are stopped and removed afterwards.

Waiting: ``from helpers import wait_until``; never sleep to synchronise.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import itertools
import json
import os
import shutil
import socket
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import hypothesis
import psutil
import psycopg
import pytest
from pgbouncer import mark_pooled, pgbouncer, prepare_threshold, routed  # noqa: F401 (fixture; tests/pgbouncer.py)
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from forklift import embedded
from forklift._db.connections import connect, describe_target
from forklift._db.migrate import fingerprint, migrate

ROOT = Path(__file__).resolve().parent.parent
# Property tests check what a function returns, never how fast: hypothesis' default 200 ms
# deadline an example failed a run on a loaded machine for nothing but the load.
hypothesis.settings.register_profile("forklift", deadline=None)
hypothesis.settings.load_profile("forklift")
SCHEMA = "forklift"
DB_PREFIX = "forklift_t_"
TEMPLATE_PREFIX = "forklift_tmpl_"
_HOST = hashlib.sha256(socket.gethostname().encode()).hexdigest()[:6]
_TEMPLATE_DONE = "forklift test template: migrated"
# Only for the test server: durability is worth nothing here and costs every test.
_TEST_SETTINGS = {
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "min_wal_size": "32MB",
    "max_wal_size": "256MB",
}
# CREATE DATABASE from the template, measured on the embedded test server (fsync off, tmpfs,
# 2 cores): FILE_COPY ~9 ms, WAL_LOG ~13 ms alone; with two xdist workers create+connect+drop
# cost 25-40 ms vs ~44 ms. (On disk with fsync on, WAL_LOG wins: 45 vs 65 ms, so a server
# given by FORKLIFT_TEST_DSN keeps its default.)
_EMBEDDED_STRATEGY = "FILE_COPY"


# ---------------------------------------------------------------------------------------------
# the private home, the lock, the registry of pytest processes


def _test_home() -> Path:
    explicit = os.environ.get("FORKLIFT_TEST_HOME")
    if explicit:
        return Path(explicit).expanduser().resolve()
    tag = hashlib.sha256(str(ROOT).encode()).hexdigest()[:12]
    shm = Path("/dev/shm")
    with contextlib.suppress(OSError):
        if shm.is_dir() and os.access(shm, os.W_OK) and shutil.disk_usage(shm).free > 1 << 30:
            home = shm / f"forklift-test-{os.geteuid()}-{tag}"
            if not home.exists() or home.stat().st_uid == os.geteuid():
                return home
    return ROOT / ".forklift-test"


def _prepare_home(home: Path) -> None:
    # 0755: when we run as root, the server's own account must reach the data under it.
    home.mkdir(parents=True, exist_ok=True)
    home.chmod(0o755)
    (home / "scratch").mkdir(exist_ok=True)
    (home / "scratch").chmod(0o755)


@contextlib.contextmanager
def _session_lock(home: Path, timeout: float = 300.0) -> Iterator[None]:
    fd = os.open(home / "pytest.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"timed out waiting for {home / 'pytest.lock'}") from None
                time.sleep(0.02)
        yield
    finally:
        os.close(fd)  # releases the lock


def _started(pid: int) -> float | None:
    """Start time of a live (non-zombie) process, None if it is gone."""
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return None
        return float(proc.create_time())
    except psutil.NoSuchProcess:
        return None
    except psutil.AccessDenied:
        return -1.0


def _me() -> dict[str, Any]:
    return {"pid": os.getpid(), "started": _started(os.getpid())}


def _is_alive(entry: dict[str, Any]) -> bool:
    started = _started(int(entry["pid"]))
    return started is not None and (started < 0 or abs(started - float(entry["started"])) < 0.5)


def _load_users(home: Path) -> list[dict[str, Any]]:
    try:
        entries = json.loads((home / "pytest-users.json").read_text())
    except (OSError, ValueError):
        return []
    return [e for e in entries if isinstance(e, dict) and _is_alive(e)]


def _save_users(home: Path, users: list[dict[str, Any]]) -> None:
    tmp = home / "pytest-users.json.tmp"
    tmp.write_text(json.dumps(users))
    tmp.replace(home / "pytest-users.json")


def _pid_alive(pid: int) -> bool:
    return _started(pid) is not None


# ---------------------------------------------------------------------------------------------
# databases


def template_name() -> str:
    """The template for the current migration files and schema.sql (and schema name)."""
    digest = hashlib.sha256(SCHEMA.encode())
    digest.update(fingerprint().encode())
    return TEMPLATE_PREFIX + digest.hexdigest()[:16]


def _connect_admin(admin_dsn: str) -> psycopg.Connection[Any]:
    return psycopg.connect(admin_dsn, autocommit=True, application_name="forklift:tests:admin")


def _drop(conn: psycopg.Connection[Any], name: str) -> None:
    ident = sql.Identifier(name)
    row = conn.execute(
        "SELECT datistemplate FROM pg_database WHERE datname = %s", (name,)
    ).fetchone()
    if row is None:
        return
    if row[0]:
        conn.execute(sql.SQL("ALTER DATABASE {} WITH IS_TEMPLATE false").format(ident))
    conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(ident))


def _drop_stale(admin_dsn: str, *, everything: bool) -> None:
    """Drop databases of dead pytest processes on this host; with ``everything`` (we are the
    only user of a private server) also every per-test database and outdated template."""
    keep = template_name()
    with _connect_admin(admin_dsn) as conn:
        names = [
            r[0]
            for r in conn.execute(
                "SELECT datname FROM pg_database WHERE datname LIKE %s OR datname LIKE %s",
                (DB_PREFIX + "%", TEMPLATE_PREFIX + "%"),
            )
        ]
        for name in names:
            if name.startswith(TEMPLATE_PREFIX):
                if everything and name != keep:
                    _drop(conn, name)
                continue
            parts = name[len(DB_PREFIX) :].split("_")
            ours = len(parts) == 3 and parts[0] == _HOST and parts[1].isdigit()
            if everything or (ours and not _pid_alive(int(parts[1]))):
                _drop(conn, name)


def _tune(admin_dsn: str) -> None:
    with _connect_admin(admin_dsn) as conn:
        if conn.execute("SELECT current_setting('fsync')").fetchone() == ("off",):
            return
        for name, value in _TEST_SETTINGS.items():
            conn.execute(sql.SQL("ALTER SYSTEM SET {} = {}").format(sql.Identifier(name), value))
        conn.execute("SELECT pg_reload_conf()")


def _build_template(admin_dsn: str) -> str:
    name = template_name()
    with _connect_admin(admin_dsn) as conn:
        conn.execute("SELECT pg_advisory_lock(hashtextextended('forklift tests: template', 0))")
        try:
            row = conn.execute(
                "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = %s",
                (name,),
            ).fetchone()
            if row is None or row[0] != _TEMPLATE_DONE:
                _drop(conn, name)  # a build an aborted run left half done
                ident = sql.Identifier(name)
                conn.execute(sql.SQL("CREATE DATABASE {} TEMPLATE template0").format(ident))
                migrate(make_conninfo(admin_dsn, dbname=name), SCHEMA)
                with contextlib.suppress(psycopg.errors.InsufficientPrivilege):
                    # Nobody connects to it again (autovacuum included), so clones never wait.
                    conn.execute(
                        sql.SQL("ALTER DATABASE {} WITH IS_TEMPLATE true ALLOW_CONNECTIONS false")
                        .format(ident)
                    )  # fmt: skip
                conn.execute(sql.SQL("COMMENT ON DATABASE {} IS {}").format(ident, _TEMPLATE_DONE))
        finally:
            conn.execute(
                "SELECT pg_advisory_unlock(hashtextextended('forklift tests: template', 0))"
            )
    return name


class _Databases:
    """This process's per-test databases, made and dropped off the test's critical path.

    One background thread with its own admin session clones the next database while the
    current test runs and drops finished ones afterwards, so a test usually finds its
    database ready. The thread's errors surface in the test that next asks for a database.
    """

    _SESSIONS = sql.SQL("SELECT count(*) FROM pg_stat_activity WHERE datname = %s")

    def __init__(self, admin_dsn: str, template: str, strategy: str | None) -> None:
        self.admin_dsn = admin_dsn
        self.template = template
        self.strategy = strategy
        self._seq = itertools.count()
        self._conn: psycopg.Connection[Any] | None = None  # used by the thread only
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="forklift-test-dbs")
        self._next: Future[str] | None = None
        self._drops: list[Future[None]] = []

    # -- run on the thread

    def _execute(self, query: sql.Composable, params: tuple[Any, ...] | None = None) -> Any:
        if self._conn is None or self._conn.closed or self._conn.broken:
            self._conn = _connect_admin(self.admin_dsn)
        return self._conn.execute(query, params).fetchone() if params else self._conn.execute(query)

    def _create(self, template: str) -> str:
        name = f"{DB_PREFIX}{_HOST}_{os.getpid()}_{next(self._seq)}"
        query = sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
            sql.Identifier(name), sql.Identifier(template)
        )
        if self.strategy:
            query = sql.Composed([query, sql.SQL(" STRATEGY {}").format(sql.SQL(self.strategy))])
        self._execute(query)
        return make_conninfo(self.admin_dsn, dbname=name)

    def _drop(self, dsn: str) -> None:
        name = conninfo_to_dict(dsn)["dbname"]
        # Sessions the test closed may still be exiting; DROP would find them and sleep 100 ms
        # before looking again, so give them a few milliseconds first (FORCE ends the rest).
        deadline = time.monotonic() + 0.2
        while time.monotonic() < deadline:
            row = self._execute(self._SESSIONS, (name,))
            if not row or not row[0]:
                break
            time.sleep(0.002)
        self._execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )

    # -- called by fixtures

    def _check_drops(self) -> None:
        done = [f for f in self._drops if f.done()]
        self._drops = [f for f in self._drops if not f.done()]
        for f in done:
            f.result()  # raises what the thread raised

    def create(self) -> str:
        """A fresh clone of the migrated template (usually made while the last test ran)."""
        self._check_drops()
        ready = self._next or self._pool.submit(self._create, self.template)
        self._next = None
        conninfo = ready.result()
        self._next = self._pool.submit(self._create, self.template)
        return conninfo

    def create_empty(self) -> str:
        self._check_drops()
        return self._pool.submit(self._create, "template0").result()

    def drop(self, dsn: str) -> None:
        self._drops.append(self._pool.submit(self._drop, dsn))

    def close(self) -> None:
        if self._next is not None:
            with contextlib.suppress(Exception):
                self.drop(self._next.result())
        self._pool.shutdown(wait=True)
        try:
            for f in self._drops:
                f.result()
        finally:
            if self._conn is not None:
                self._conn.close()


def _clean_scratch(home: Path, *, only_dead: bool) -> None:
    """Stop and delete the servers of scratch homes (of dead pytest processes)."""
    scratch = home / "scratch"
    if not scratch.is_dir():
        return
    for entry in scratch.iterdir():
        pid = entry.name.split("-", 1)[0]
        if only_dead and pid.isdigit() and _pid_alive(int(pid)):
            continue
        _remove_scratch(entry)


def _remove_scratch(path: Path) -> None:
    for data in [p for p in path.rglob(embedded.DATA_DIR_NAME) if p.is_symlink() or p.is_dir()]:
        with contextlib.suppress(Exception):
            embedded.remove_server(data.parent)
    shutil.rmtree(path, ignore_errors=True)


# ---------------------------------------------------------------------------------------------
# fixtures


def pytest_report_header(config: pytest.Config) -> str:
    external = os.environ.get("FORKLIFT_TEST_DSN")
    if external:
        return f"forklift: PostgreSQL from FORKLIFT_TEST_DSN ({describe_target(external)})"
    return f"forklift: embedded PostgreSQL for tests in {_test_home()}"


@pytest.fixture(scope="session")
def test_home() -> Path:
    """The harness's private directory (holds the embedded test server and scratch homes)."""
    home = _test_home()
    _prepare_home(home)
    return home


@pytest.fixture(scope="session")
def admin_dsn(test_home: Path) -> Iterator[str]:
    """Conninfo of an admin session (CREATE DATABASE) on the test server's maintenance db."""
    external = os.environ.get("FORKLIFT_TEST_DSN")
    if external:
        connect(external, "ops").close()  # a one-line DatabaseUnavailable if it is not there
        with _session_lock(test_home):
            _clean_scratch(test_home, only_dead=True)
        _drop_stale(external, everything=False)
        yield external
        return
    with _session_lock(test_home):
        users = _load_users(test_home)
        first = not users
        _clean_scratch(test_home, only_dead=True)
        conninfo = embedded.ensure_server(test_home)
        admin = make_conninfo(conninfo, dbname="postgres")
        _tune(admin)
        _drop_stale(admin, everything=first)
        users.append(_me())
        _save_users(test_home, users)
    try:
        yield admin
    finally:
        with _session_lock(test_home):
            users = [u for u in _load_users(test_home) if u["pid"] != os.getpid()]
            _save_users(test_home, users)
            if not users:
                _clean_scratch(test_home, only_dead=True)
                embedded.stop_server(test_home)


@pytest.fixture(scope="session")
def _databases(admin_dsn: str) -> Iterator[_Databases]:
    strategy = None if os.environ.get("FORKLIFT_TEST_DSN") else _EMBEDDED_STRATEGY
    dbs = _Databases(admin_dsn, _build_template(admin_dsn), strategy)
    try:
        yield dbs
    finally:
        dbs.close()


@pytest.fixture
def dsn(_databases: _Databases, request: pytest.FixtureRequest) -> Iterator[str]:
    """Conninfo of a fresh database at the current schema version, dropped after the test
    (through PgBouncer for the tests marked pgbouncer under ``-m pgbouncer``)."""
    conninfo = _databases.create()
    try:
        yield routed(request, conninfo)
    finally:
        _databases.drop(conninfo)


@pytest.fixture
def empty_dsn(_databases: _Databases) -> Iterator[str]:
    """Conninfo of a fresh database with no forklift schema, dropped after the test."""
    conninfo = _databases.create_empty()
    try:
        yield conninfo
    finally:
        _databases.drop(conninfo)


@pytest.fixture
def conn(dsn: str, request: pytest.FixtureRequest) -> Iterator[psycopg.Connection[Any]]:
    """An autocommit connection to ``dsn`` (preparing nothing when that is PgBouncer)."""
    with psycopg.connect(dsn, autocommit=True, application_name="forklift:tests",
                         prepare_threshold=prepare_threshold(request)) as c:
        yield c


@pytest.fixture(scope="module")
def scratch_home(test_home: Path) -> Iterator[Path]:
    """A fresh directory for a module's own embedded server(s); they are removed afterwards."""
    path = test_home / "scratch" / f"{os.getpid()}-{time.monotonic_ns()}"
    path.mkdir(mode=0o755)
    path.chmod(0o755)
    try:
        yield path
    finally:
        _remove_scratch(path)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "pgbouncer: core worker tests; -m pgbouncer runs them"
                            " through a PgBouncer in transaction mode (tests/pgbouncer.py)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    mark_pooled(items)
