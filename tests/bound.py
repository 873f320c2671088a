"""Shared by the enqueue-side tests: an app bound to a test's database, and a job count.

Import as ``from bound import bound_to, count_jobs`` (pytest puts ``tests/`` on ``sys.path``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import psycopg

from forklift import Forklift


@contextlib.contextmanager
def bound_to(app: Forklift, dsn: str) -> Iterator[Forklift]:
    """``app`` pointed at ``dsn``, its sync pool closed afterwards."""
    app.use(dsn)
    try:
        yield app
    finally:
        app.close()


def count_jobs(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute("SELECT count(*) FROM forklift.jobs").fetchone()
    assert row is not None
    return int(row[0])
