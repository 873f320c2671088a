"""The demo's pinned horizon: a transaction held open on purpose, as a forgotten report would.

A REPEATABLE READ transaction that has read something keeps its snapshot, and with it the
xmin horizon, until it ends: vacuum may not remove a dead row any later transaction made. The
Health screen names it (pid, application, since when) with the SQL that ends it; the person
rehearsing can run that SQL from psql, or press the key again to let it go.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any

import psycopg

#: How the pinned session names itself: what the Health screen shows as the holder.
APPLICATION = "forklift-demo pinned report"


class HorizonPin:
    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self._conn: psycopg.Connection[Any] | None = None
        self._lock = threading.Lock()

    @property
    def pid(self) -> int | None:
        """The pinning session's backend pid while it holds the horizon."""
        conn = self._conn
        return conn.info.backend_pid if conn is not None and not conn.closed else None

    def hold(self) -> int:
        """Open the transaction (if it is not open) and return its backend pid."""
        with self._lock:
            if self._conn is None or self._conn.closed:
                conn = psycopg.connect(self.dsn, application_name=APPLICATION)
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                conn.execute("SELECT count(*) FROM pg_class").fetchone()  # takes the snapshot
                self._conn = conn
            return self._conn.info.backend_pid

    def release(self) -> None:
        with self._lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):  # ended from psql already: nothing to undo
                conn.rollback()
            with contextlib.suppress(Exception):
                conn.close()

    def toggle(self) -> str:
        """Pin the horizon, or let it go if pinned (or ended by someone): what happened."""
        conn = self._conn
        if conn is not None and not conn.closed and _alive(conn):
            self.release()
            return "released the pinned transaction: vacuum may clean up again"
        self.release()
        pid = self.hold()
        return (f"pinned the xmin horizon: pid {pid} ({APPLICATION}) holds a transaction open;"
                " the Health screen names it and the SQL that ends it (p again lets it go)")


def _alive(conn: psycopg.Connection[Any]) -> bool:
    """False once the session was ended from outside (pg_terminate_backend)."""
    try:
        conn.execute("SELECT 1").fetchone()
    except psycopg.Error:
        return False
    return True
