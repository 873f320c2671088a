"""A test app's handlers' own statements: each thread on a connection of its own to the app's
database (never one of forklift's), made at its first statement and again once it breaks."""

from __future__ import annotations

import threading
from typing import Any

import psycopg

from forklift import Forklift


class ThreadSql:
    """``sql(query, params)`` -> the rows (none for a statement that returns none)."""

    def __init__(self, app: Forklift, name: str) -> None:
        self.app = app
        self.name = name  # the connections' application_name
        self._local = threading.local()

    def __call__(self, query: str, params: Any = None) -> list[tuple[Any, ...]]:
        conn: psycopg.Connection[Any] | None = getattr(self._local, "conn", None)
        if conn is None or conn.closed or conn.broken:
            conn = psycopg.connect(self.app.dsn, autocommit=True, application_name=self.name)
            self._local.conn = conn
        cur = conn.execute(query, params)
        return cur.fetchall() if cur.description else []
