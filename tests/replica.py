"""A real streaming replica of the test server, for tests of reads sent off the primary.

``pg_basebackup -R`` of the running test server into a scratch directory, then a standby started
from it with the same PostgreSQL binaries (as the server's own account when the tests run as
root). It follows the primary over streaming replication through a physical replication slot of
its own, so WAL it has not received yet is kept for it however much the other tests write
(without one, a checkpoint removes a segment a paused or stopped standby still needs and it never
catches up again), so a row committed on the primary
shows up on the replica a moment later; :meth:`Replica.pause` stops its replay (a lagging
replica), :meth:`Replica.stop` shuts it down (a replica that is gone).

Only for the embedded test server (a Unix socket this process can reach); with
``FORKLIFT_TEST_DSN`` pointing elsewhere the fixture skips, saying so.
"""

from __future__ import annotations

import itertools
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from helpers import wait_until
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from forklift._db.embedded import files, server
from forklift._db.embedded.pidfile import PidFile, running


@dataclass
class Replica:
    data: Path
    bin_dir: Path
    user: files.User | None
    info: PidFile
    admin_dsn: str
    slot: str

    def dsn(self, dbname: str) -> str:
        return server.conninfo_of(self.info, dbname)

    def connect(self, dbname: str = "postgres") -> psycopg.Connection[Any]:
        return psycopg.connect(self.dsn(dbname), autocommit=True)

    def pause(self) -> None:
        with self.connect() as c:
            c.execute("SELECT pg_wal_replay_pause()")

    def resume(self) -> None:
        with self.connect() as c:
            c.execute("SELECT pg_wal_replay_resume()")

    def stop(self) -> None:
        if running(self.data) is not None:
            server.stop(self.data, self.info, self.user)

    def remove(self) -> None:
        self.stop()
        with psycopg.connect(self.admin_dsn, autocommit=True) as c:
            # The primary's sender for the standby ends a moment after the standby has.
            wait_until(lambda: c.execute("SELECT NOT active FROM pg_replication_slots"
                                         " WHERE slot_name = %s", (self.slot,)).fetchone()
                       in (None, (True,)),
                       timeout=30, message=f"replication slot {self.slot} still in use")
            c.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots"
                      " WHERE slot_name = %s", (self.slot,))
        shutil.rmtree(self.data, ignore_errors=True)
        short = files.short_socket_dir(self.data, self.user)
        if short.is_dir() and not short.is_symlink():
            shutil.rmtree(short, ignore_errors=True)


def make_replica(admin_dsn: str, where: Path) -> Replica:
    """Base backup of the server ``admin_dsn`` reaches, started as its standby."""
    params = conninfo_to_dict(admin_dsn)
    host = str(params.get("host") or "")
    if not host.startswith("/"):
        pytest.skip("the test server is not on a local Unix socket: no replica is made here")
    user = files.service_user()
    bin_dir = files.server_bin_dir(files.package_bin_dir(), user)
    where.mkdir(parents=True, exist_ok=True)
    os.chmod(where, 0o755)
    server.own(where, user)  # pg_basebackup runs as the server's account
    data = where / files.DATA_DIR_NAME
    slot = f"{_SLOT_PREFIX}{os.getpid()}_{next(_made)}"
    _drop_abandoned_slots(admin_dsn)
    source = make_conninfo("", host=host, port=params.get("port") or files.PORT,
                           user=params.get("user") or server.SUPERUSER)
    code, output = server.run(
        [str(bin_dir / "pg_basebackup"), "-d", source, "-D", str(data), "-R", "-X", "stream",
         "-C", "-S", slot, "-c", "fast", "--no-sync"],
        user, timeout=300)
    if code != 0:
        pytest.fail(f"pg_basebackup failed: {server.last_line(output)}")
    # The primary keeps its socket in its data directory, and the copy brings the socket's
    # lock file along: the standby would take it for a live server of its own.
    for stale in data.glob(".s.PGSQL.*"):
        stale.unlink()
    # The standby gets its own socket directory (server.start writes it) and keeps streaming.
    info = server.start(data, bin_dir, user)
    return Replica(data=data, bin_dir=bin_dir, user=user, info=info, admin_dsn=admin_dsn,
                   slot=slot)


_SLOT_PREFIX = "forklift_test_replica_"
_made = itertools.count()


def _drop_abandoned_slots(admin_dsn: str) -> None:
    """Slots left by test processes that died before removing their replica: each would keep
    the server's WAL from being recycled for good."""
    with psycopg.connect(admin_dsn, autocommit=True) as c:
        rows = c.execute("SELECT slot_name FROM pg_replication_slots"
                         " WHERE slot_name LIKE %s AND NOT active",
                         (_SLOT_PREFIX + "%",)).fetchall()
        for (name,) in rows:
            pid = int(name.removeprefix(_SLOT_PREFIX).split("_")[0])
            if pid != os.getpid() and not Path(f"/proc/{pid}").exists():
                c.execute("SELECT pg_drop_replication_slot(%s)", (name,))



@pytest.fixture(scope="module")
def replica(admin_dsn: str, scratch_home: Path) -> Iterator[Replica]:
    """A standby of the test server for the module; stopped and removed afterwards."""
    r = make_replica(admin_dsn, scratch_home / "replica")
    try:
        yield r
    finally:
        r.remove()
