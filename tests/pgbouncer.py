"""A real PgBouncer in transaction mode in front of the test server (Debian package pgbouncer).

``pytest -m pgbouncer`` runs the tests marked ``pgbouncer`` (the core worker tests, listed in
:data:`POOLED_MODULES`) with their ``dsn`` pointing at a PgBouncer on 127.0.0.1 in
``pool_mode = transaction``: every transaction may land on another server session, so session
state (SET, LISTEN, session advisory locks, prepared statements) is not kept. Without ``-m
pgbouncer`` the same tests run against the server directly.

The bouncer is strict on purpose: it accepts no startup parameter it cannot keep (``options``
included), so a client that relies on one fails here instead of silently losing its settings.
One bouncer per pytest process (xdist worker), on a free port, stopped at the end. Where the
binary is missing the pooled tests are skipped, saying so (``.ci/run`` installs it).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

MARK = "pgbouncer"
#: The core worker tests run through PgBouncer: claims, settles, retries and backoff, rescue of
#: killed workers, fencing, leadership moving, and the pooler's own tests. Not (yet) here:
#: test_worker_basic.py (through the bouncer, a client's connect intermittently stalls past its
#: 10 s timeout under load, cause not found), test_faults_drain.py (it SIGSTOPs the worker's
#: server backends by purpose; behind a pooler backends are shared).
POOLED_MODULES = frozenset({
    "test_retry.py",
    "test_faults_rescue.py",
    "test_faults_fencing.py",
    "test_pgbouncer.py",
})
BINARY_PATHS = ("/usr/sbin/pgbouncer", "/usr/bin/pgbouncer")


def binary() -> str | None:
    return shutil.which("pgbouncer") or next((p for p in BINARY_PATHS if Path(p).exists()), None)


def mark_pooled(items: list[pytest.Item]) -> None:
    """Mark the tests of :data:`POOLED_MODULES` (from pytest_collection_modifyitems)."""
    for item in items:
        if item.path.name in POOLED_MODULES:
            item.add_marker(getattr(pytest.mark, MARK))


def pooled(config: pytest.Config) -> bool:
    """Whether this run routes the marked tests through PgBouncer (``-m pgbouncer``)."""
    expr = str(config.getoption("-m") or "")
    return MARK in expr.split() and "not" not in expr.split()


def routed(request: pytest.FixtureRequest, conninfo: str) -> str:
    """``conninfo`` through the bouncer for a marked test of a pooled run, else as it is."""
    if pooled(request.config) and request.node.get_closest_marker(MARK) is not None:
        bouncer: Bouncer = request.getfixturevalue("pgbouncer")
        return bouncer.route(conninfo)
    return conninfo


def prepare_threshold(request: pytest.FixtureRequest) -> int | None:
    """psycopg's for a test's own connection: none prepared where it goes through PgBouncer
    (1.18 keeps no prepared statements in transaction mode)."""
    routed_here = pooled(request.config) and request.node.get_closest_marker(MARK) is not None
    return None if routed_here else 5


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Bouncer:
    """One PgBouncer process; :meth:`route` turns a direct conninfo into one through it."""

    def __init__(self, server_dsn: str) -> None:
        exe = binary()
        if exe is None:
            pytest.skip("pgbouncer is not installed (Debian: apt-get install pgbouncer);"
                        " .ci/run installs it")
        params = conninfo_to_dict(server_dsn)
        self.port = _free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="forklift-pgbouncer-"))
        self.dir.chmod(0o755)
        user = str(params.get("user") or "postgres")
        (self.dir / "users.txt").write_text(f'"{user}" ""\n')
        ini = self.dir / "pgbouncer.ini"
        ini.write_text("\n".join([
            "[databases]",
            f"* = host={params.get('host') or '127.0.0.1'} port={params.get('port') or 5432}",
            "[pgbouncer]",
            "listen_addr = 127.0.0.1",
            f"listen_port = {self.port}",
            f"unix_socket_dir = {self.dir}",
            "auth_type = trust",
            f"auth_file = {self.dir / 'users.txt'}",
            "pool_mode = transaction",
            "max_client_conn = 1000",
            "default_pool_size = 40",
            "max_db_connections = 60",
            # psycopg sends none by itself; `options` is NOT ignored: a client relying on it
            # must fail here rather than run without its settings.
            "ignore_startup_parameters = extra_float_digits",
            "server_reset_query = DISCARD ALL",
            "autodb_idle_timeout = 30",
            f"logfile = {self.dir / 'pgbouncer.log'}",
            "",
        ]))
        for f in self.dir.iterdir():
            f.chmod(0o644)
        cmd = [exe, str(ini)]
        if os.geteuid() == 0:  # pgbouncer refuses to run as root: it runs as another user
            import pwd

            account = pwd.getpwnam(_unprivileged_user())
            os.chown(self.dir, account.pw_uid, account.pw_gid)  # for its log and socket
            cmd[1:1] = ["-u", account.pw_name]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            self._wait_ready(server_dsn)
        except BaseException:
            self.stop()
            raise

    def _wait_ready(self, server_dsn: str) -> None:
        deadline = time.monotonic() + 15
        probe = self.route(server_dsn)
        while True:
            if self.proc.poll() is not None:
                err = self.proc.stderr.read().decode() if self.proc.stderr else ""
                log = (self.dir / "pgbouncer.log")
                raise RuntimeError(f"pgbouncer exited ({self.proc.returncode}): {err}"
                                   f" {log.read_text() if log.exists() else ''}")
            try:
                with psycopg.connect(probe, connect_timeout=2) as c:
                    c.execute("SELECT 1")
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def route(self, dsn: str) -> str:
        """The same database and user, through the bouncer."""
        return make_conninfo(dsn, host="127.0.0.1", port=str(self.port))

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        shutil.rmtree(self.dir, ignore_errors=True)


def _unprivileged_user() -> str:
    import pwd

    # The embedded server's own account reaches its socket (0700); else Debian's postgres.
    for name in ("embedded_postgres", "postgres", "nobody"):
        with contextlib.suppress(KeyError):
            pwd.getpwnam(name)
            return name
    return "nobody"


@pytest.fixture(scope="session")
def pgbouncer(admin_dsn: str) -> Iterator[Bouncer]:
    """A PgBouncer in transaction mode in front of the test server, for this pytest process."""
    bouncer = Bouncer(admin_dsn)
    try:
        yield bouncer
    finally:
        bouncer.stop()
