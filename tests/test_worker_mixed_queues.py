"""A worker of plain queues and flow queues at once: neither starves the other, and a flow
queue with nothing in it costs the plain queues nothing (no lost buffer, no claim a round)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from apps import faults
from apps.basic import running_worker
from helpers import wait_until

from forklift import Forklift
from forklift.ops import Operator

PREFETCH = {"prefetch_horizon": 1000.0, "prefetch_max": 20}


@pytest.fixture
def app(dsn: str, conn: psycopg.Connection[Any]) -> Iterator[Forklift]:
    faults.setup(conn)
    faults.app.use(dsn)
    try:
        yield faults.app
    finally:
        faults.app.close()


def _started(conn: psycopg.Connection[Any], ids: list[int]) -> int:
    row = conn.execute("SELECT count(*) FROM public.notes WHERE job_id = ANY(%s)"
                       " AND what = 'start'", (ids,)).fetchone()
    return int(row[0]) if row else 0


def _available(conn: psycopg.Connection[Any], queue: str) -> int:
    row = conn.execute("SELECT count(*) FROM forklift.jobs WHERE queue = %s"
                       " AND state = 'available'", (queue,)).fetchone()
    return int(row[0]) if row else 0


def test_an_empty_rated_queue_leaves_the_plain_queues_their_buffer(
    app: Forklift, conn: psycopg.Connection[Any], dsn: str
) -> None:
    # A rated queue's jobs never wait in a buffer (their token is taken at the claim); while it
    # holds none, the worker's other queue keeps its buffer.
    with Operator(dsn) as op:
        op.set_queue_rate("rated", "100/s", create=True)
    with running_worker(app, concurrency=1, queues=["default", "rated"], **PREFETCH):
        warm = [faults.enqueue(conn, "faults.quick", {}) for _ in range(30)]
        wait_until(lambda: faults.all_in(conn, warm, "completed"), timeout=30, message="not warm")
        with conn.transaction():
            blocker = faults.enqueue(conn, "faults.hold", {"gate": "go"}, priority=-1)
            ids = [faults.enqueue(conn, "faults.hold", {"gate": "open"}) for _ in range(3)]
        wait_until(lambda: faults.all_in(conn, ids, "running") and _started(conn, ids) == 0,
                   timeout=30, message=lambda: f"not buffered: {faults.states(conn, ids)}")
        faults.open_gate(conn, "open")
        faults.open_gate(conn, "go")
        wait_until(lambda: faults.all_in(conn, [blocker, *ids], "completed"), timeout=30)


def test_a_plain_backlog_does_not_keep_a_flow_queue_from_being_claimed(
    app: Forklift, conn: psycopg.Connection[Any], dsn: str
) -> None:
    # Every plain claim comes back full while the backlog lasts; the flow queue's job still
    # starts long before the backlog is gone.
    with Operator(dsn) as op:
        op.set_queue_rate("rated", "1000/s", create=True)
    conn.execute("INSERT INTO forklift.jobs (queue, kind, args)"
                 " SELECT 'default', 'faults.quick', '{}' FROM generate_series(1, 20000)")
    with running_worker(app, concurrency=2, queues=["default", "rated"], poll_interval=0.2):
        wait_until(lambda: _available(conn, "default") < 19_900, timeout=60,
                   message="the backlog is not being worked")
        rated = faults.enqueue(conn, "faults.quick", {}, queue="rated")
        wait_until(lambda: faults.all_in(conn, [rated], "completed"), timeout=60,
                   message=lambda: f"the rated job is {faults.states(conn, [rated])}")
        assert _available(conn, "default") > 0, "it ran only once the plain backlog was gone"


def test_a_flow_backlog_does_not_keep_a_plain_queue_from_being_claimed(
    app: Forklift, conn: psycopg.Connection[Any], dsn: str
) -> None:
    with Operator(dsn) as op:
        op.set_queue_rate("rated", "100000/s", create=True)
    conn.execute("INSERT INTO forklift.jobs (queue, kind, args)"
                 " SELECT 'rated', 'faults.quick', '{}' FROM generate_series(1, 20000)")
    with running_worker(app, concurrency=2, queues=["default", "rated"], poll_interval=0.2):
        wait_until(lambda: _available(conn, "rated") < 19_900, timeout=60,
                   message="the backlog is not being worked")
        plain = faults.enqueue(conn, "faults.quick", {})
        wait_until(lambda: faults.all_in(conn, [plain], "completed"), timeout=60,
                   message=lambda: f"the plain job is {faults.states(conn, [plain])}")
        assert _available(conn, "rated") > 0, "it ran only once the flow backlog was gone"
