"""The leader prunes by the retention windows in the database (a real worker as leader)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from apps import basic
from helpers import wait_until
from test_retention import CTX, DAY, HOUR, finished, ids

from forklift import Forklift
from forklift.ops import retention as ops


@pytest.fixture
def app(dsn: str) -> Iterator[Forklift]:
    with basic.bound(dsn) as bound_app:
        yield bound_app


def test_retention_settings_change_what_the_leader_prunes(
    app: Forklift, conn: psycopg.Connection[Any]
) -> None:
    conn.execute("INSERT INTO forklift.queues (name) VALUES ('mail'), ('audit_log')")
    ops.set_window(conn, CTX, "completed", "1h", queue="mail")
    ops.set_window(conn, CTX, "completed", "forever", queue="audit_log")
    ops.set_window(conn, CTX, "dead", "2d")
    gone = {finished(conn, "mail", "completed", 2 * HOUR),
            finished(conn, "default", "dead", 3 * DAY)}
    kept = {finished(conn, "default", "completed", 2 * HOUR),
            finished(conn, "audit_log", "completed", 90 * DAY),
            finished(conn, "default", "dead", DAY)}
    with basic.running_worker(app) as worker:
        wait_until(lambda: worker.is_leader, message="the worker did not become the leader")
        wait_until(lambda: not (ids(conn) & gone), timeout=20,
                   message=lambda: f"the leader left {ids(conn) & gone} of {gone}")
    assert ids(conn) == kept

