"""forklift through a real PgBouncer in transaction mode (tests/pgbouncer.py).

The core worker tests run through it with ``-m pgbouncer``; these check what is particular to
a pooler: startup options refused and learned, no prepared statements, LISTEN on a direct
connection or polling with a warning, and the operator API.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from apps import basic
from helpers import wait_until
from pgbouncer import Bouncer
from psycopg.conninfo import conninfo_to_dict

from forklift import Forklift
from forklift._db import pooler
from forklift._db.connections import connect
from forklift.ops import Operator


@pytest.fixture
def direct(request: pytest.FixtureRequest, _databases: Any) -> Iterator[str]:
    """A fresh database, by its direct conninfo (whatever -m says)."""
    conninfo = _databases.create()
    try:
        yield conninfo
    finally:
        _databases.drop(conninfo)


@pytest.fixture
def routed(pgbouncer: Bouncer, direct: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.delenv(pooler.ENV, raising=False)
    monkeypatch.setattr(pooler, "_learned", set())
    return pgbouncer.route(direct)


def test_the_bouncer_refuses_what_it_cannot_keep(routed: str, direct: str) -> None:
    with psycopg.connect(routed, autocommit=True, prepare_threshold=None) as c:
        assert c.execute("SELECT current_database()").fetchone() == (
            conninfo_to_dict(direct)["dbname"],)
    with pytest.raises(psycopg.OperationalError, match="unsupported startup parameter"):
        psycopg.connect(routed, options="-c statement_timeout=1000").close()


def test_forklift_learns_the_pooler_and_prepares_nothing(
    routed: str, caplog: pytest.LogCaptureFixture
) -> None:
    assert not pooler.pooled(routed)
    with caplog.at_level(logging.WARNING, "forklift.db"):
        conn = connect(routed, "ops")
    try:
        assert pooler.pooled(routed) and "transaction" in caplog.text
        assert conn.prepare_threshold is None
        for _ in range(10):  # psycopg would prepare on the 5th: PgBouncer 1.18 cannot
            conn.execute("SELECT count(*) FROM forklift.jobs WHERE state = %s", ("dead",))
    finally:
        conn.close()
    # A direct connection to the same server is not pooled.
    assert not pooler.pooled(psycopg.conninfo.make_conninfo(routed, port="1"))


@pytest.fixture
def app(routed: str) -> Iterator[Forklift]:
    with basic.bound(routed) as bound_app:
        yield bound_app


def test_a_worker_listens_on_a_direct_connection(
    app: Forklift, routed: str, direct: str, conn_direct: psycopg.Connection[Any]
) -> None:
    pooler.learn(routed)
    with basic.running_worker(app, listen_dsn=direct, poll_interval=30.0) as worker:
        wait_until(lambda: worker.listener.connected.is_set(), message="not listening")
        job = basic.echo.enqueue(basic.Greeting("pooled", 1)).id
        # The poll is 30 s away: only the NOTIFY (through the bouncer) can wake it this soon.
        wait_until(lambda: state(conn_direct, job) == "completed", timeout=15)


def test_without_a_direct_connection_the_worker_polls_and_says_so(
    app: Forklift, routed: str, conn_direct: psycopg.Connection[Any],
    caplog: pytest.LogCaptureFixture,
) -> None:
    pooler.learn(routed)
    with caplog.at_level(logging.WARNING), basic.running_worker(app, poll_interval=0.2) as worker:
        ids = [basic.echo.enqueue(basic.Greeting(f"p{i}", 1)).id for i in range(30)]
        wait_until(lambda: all(state(conn_direct, i) == "completed" for i in ids), timeout=30)
        assert not worker.listener.connected.is_set()
    assert "not listening" in caplog.text and "listen_dsn" in caplog.text


def test_the_operator_api_through_the_bouncer(routed: str, conn_direct: psycopg.Connection[Any]
                                              ) -> None:
    job = conn_direct.execute(
        "INSERT INTO forklift.jobs (kind, state, attempt, finished_at)"
        " VALUES ('basic.noop', 'dead', 1, now()) RETURNING id").fetchone()
    assert job is not None
    with Operator(routed, actor="tester") as op:
        assert op.stats().totals.counts["dead"] == 1
        assert op.requeue(int(job[0])).state == "available"
        assert op.health().connections.max_connections > 0
    with Operator(routed, actor="tester", read_only=True) as op:  # no startup options either
        assert op.job(int(job[0])).job.state == "available"


def state(conn: psycopg.Connection[Any], job_id: int) -> str | None:
    row = conn.execute("SELECT state FROM forklift.jobs WHERE id = %s", (job_id,)).fetchone()
    return str(row[0]) if row else None


@pytest.fixture
def conn_direct(direct: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(direct, autocommit=True) as c:
        yield c
