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


# Every claim of the backlog's queue comes back full while the backlog lasts; a job of the
# worker's other queue still starts long before the backlog is gone. (A rated queue is a flow
# queue; its rate here is high enough never to hold its backlog back.)
@pytest.mark.parametrize(("backlog", "other", "rate"), [
    ("default", "rated", "1000/s"), ("rated", "default", "100000/s")],
    ids=["plain-backlog-flow-job", "flow-backlog-plain-job"])
def test_a_backlog_in_one_kind_of_queue_does_not_keep_the_other_from_being_claimed(
    app: Forklift, conn: psycopg.Connection[Any], dsn: str, backlog: str, other: str, rate: str
) -> None:
    with Operator(dsn) as op:
        op.set_queue_rate("rated", rate, create=True)
    conn.execute("INSERT INTO forklift.jobs (queue, kind, args)"
                 " SELECT %s, 'faults.quick', '{}' FROM generate_series(1, 20000)", (backlog,))
    with running_worker(app, concurrency=2, queues=["default", "rated"], poll_interval=0.2):
        wait_until(lambda: _available(conn, backlog) < 19_900, timeout=60,
                   message="the backlog is not being worked")
        job = faults.enqueue(conn, "faults.quick", {}, queue=other)
        wait_until(lambda: faults.all_in(conn, [job], "completed"), timeout=60,
                   message=lambda: f"the {other} job is {faults.states(conn, [job])}")
        assert _available(conn, backlog) > 0, f"it ran only once the {backlog} backlog was gone"
