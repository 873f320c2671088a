"""Workers are woken only when one may be idle: an insert NOTIFYs only if a worker left its idle
mark on the job's queue (and consumes it), so concurrent producers' commits are not serialised
on NOTIFY's cluster-wide lock; the advisory-lock barrier leaves no job stranded."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from apps import basic
from helpers import wait_until

from forklift import Forklift
from forklift._db.sqltext import render
from forklift._worker.idle import MARK_SQL, IdleMark

INSERT = "INSERT INTO forklift.jobs (queue, kind) VALUES (%s, 'basic.noop') RETURNING id"


@pytest.fixture
def app(dsn: str) -> Iterator[Forklift]:
    with basic.bound(dsn) as bound_app:
        yield bound_app


def _listener(dsn: str) -> psycopg.Connection[Any]:
    conn = psycopg.connect(dsn, autocommit=True)
    conn.execute('LISTEN "forklift_wake"')
    return conn


def _mark(conn: psycopg.Connection[Any], worker: str, queues: list[str]) -> bool:
    row = conn.execute(render(MARK_SQL, "forklift"), {"worker": worker, "queues": queues}
                       ).fetchone()
    return bool(row and row[0])


def _marks(conn: psycopg.Connection[Any]) -> list[tuple[str, str]]:
    return [tuple(r) for r in conn.execute(
        "SELECT queue, worker_id FROM forklift.idle_workers ORDER BY 1, 2").fetchall()]


def _notes(listen: psycopg.Connection[Any], count: int) -> list[str]:
    return [n.payload for n in listen.notifies(timeout=10, stop_after=count)]


def test_an_insert_notifies_only_when_a_worker_is_idle_on_its_queue(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    with _listener(dsn) as listen:
        conn.execute(INSERT, ("default",))  # nobody idle: no NOTIFY, no commit lock
        assert _mark(conn, "w1", ["default", "other"]) and _mark(conn, "w2", ["default"])
        conn.execute(INSERT, ("default",))  # consumes both marks of 'default', one NOTIFY
        assert _marks(conn) == [("other", "w1")]
        conn.execute(INSERT, ("default",))  # the marks are gone: no NOTIFY
        conn.execute(INSERT, ("other",))
        # Notifications arrive in commit order: had the first insert sent one, it would come
        # before these two.
        assert _notes(listen, 2) == ["default", "other"]
        assert _marks(conn) == []


def test_scheduled_jobs_wake_nobody_and_leave_the_mark(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    assert _mark(conn, "w1", ["default"])
    conn.execute("INSERT INTO forklift.jobs (queue, kind, state, run_at)"
                 " VALUES ('default', 'basic.noop', 'scheduled', now() + interval '1 hour')")
    assert _marks(conn) == [("default", "w1")]


def test_a_transaction_that_is_not_read_committed_always_notifies(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    # Its snapshot may predate a worker's mark, so it cannot trust what it reads of them.
    with _listener(dsn) as listen, psycopg.connect(dsn) as producer:
        producer.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        with producer.transaction():
            producer.execute(INSERT, ("rr",))
        conn.execute(INSERT, ("after",))
        assert _mark(conn, "w1", ["after"])
        conn.execute(INSERT, ("after",))
        assert _notes(listen, 2) == ["rr", "after"]


def test_the_mark_holds_only_once_no_producer_is_in_flight(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    with psycopg.connect(dsn) as producer:
        producer.execute(INSERT, ("default",))  # open transaction: holds the queue's lock shared
        assert not _mark(conn, "w1", ["default"])  # its jobs may be invisible to a last claim
        assert _mark(conn, "w1", ["other"])  # another queue is not held up
        producer.commit()
    assert _mark(conn, "w1", ["default"])


def _limited(dsn: str, **kw: Any) -> psycopg.Connection[Any]:
    """A session whose statements give up after a few seconds instead of waiting on a lock."""
    c = psycopg.connect(dsn, **kw)
    c.execute("SET statement_timeout = '5s'")
    c.commit()
    return c


def test_marking_never_waits_for_a_producer_taking_the_old_mark(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    assert _mark(conn, "w1", ["default"])
    with psycopg.connect(dsn) as producer, _limited(dsn, autocommit=True) as worker:
        producer.execute(INSERT, ("default",))  # takes the mark away, uncommitted
        assert not _mark(worker, "w1", ["default"])  # at once: the producer is in flight
        producer.commit()
    assert _marks(conn) == [("default", "w1")]  # the new mark stays, the old one went


def test_producers_never_wait_on_each_other_for_a_mark(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    conn.execute(INSERT, ("default",))  # the queue is known (its first insert records it)
    assert _mark(conn, "w1", ["default"])
    with _listener(dsn) as listen, psycopg.connect(dsn) as first, \
            _limited(dsn, autocommit=True) as second:
        first.execute(INSERT, ("default",))  # takes the mark away, uncommitted
        second.execute(INSERT, ("default",))  # sees the mark being taken: NOTIFYs too
        assert _notes(listen, 1) == ["default"]
        first.rollback()  # the mark is back; the second producer's job woke the worker anyway
    assert _marks(conn) == [("default", "w1")]


def test_the_pause_after_a_mark() -> None:
    idle = IdleMark("forklift", "w1", ["default"])
    assert idle.pause(None, 1.0) == 1.0
    waits = [idle.pause(False, 0.05) for _ in range(6)]
    assert waits[0] < waits[1] < waits[2] and max(waits) == 0.05  # growing, up to the poll
    assert not idle.marked
    assert idle.pause(True, 1.0) == 0.0 and idle.marked  # claim once more at once
    assert idle.pause(False, 1.0) == waits[0]  # a held mark starts the delays over
    idle.woken()
    assert not idle.marked


def test_an_idle_worker_is_woken_long_before_its_poll(
    app: Forklift, conn: psycopg.Connection[Any]
) -> None:
    with basic.running_worker(app, poll_interval=120.0, queues=["default"]) as worker:
        wait_until(lambda: ("default", worker.id) in _marks(conn), timeout=30,
                   message="the idle worker left its mark")
        job = basic.noop.enqueue({})
        wait_until(lambda: basic.job_row(conn, job.id)["state"] == "completed", timeout=30,
                   message="the job was picked up by the NOTIFY")
        # Woken, it claimed, found nothing more, and marked itself idle again.
        wait_until(lambda: ("default", worker.id) in _marks(conn), timeout=30,
                   message="the worker marked itself idle again")


def test_a_producer_in_flight_as_the_worker_goes_idle_strands_nothing(
    app: Forklift, dsn: str, conn: psycopg.Connection[Any]
) -> None:
    # The producer's trigger runs before any mark exists (so it will not NOTIFY) and commits
    # only after the worker's last claim: the failed try makes the worker claim again soon.
    with psycopg.connect(dsn) as producer:
        job_id = producer.execute(INSERT, ("default",)).fetchone()[0]  # type: ignore[index]
        with basic.running_worker(app, poll_interval=120.0, queues=["default"]) as worker:
            wait_until(lambda: ("default", worker.id) in _marks(conn), timeout=30,
                       message="the worker went idle")
            tries = worker.producer.idle.marks
            assert not worker.producer.idle.marked
            producer.commit()
            wait_until(lambda: basic.job_row(conn, job_id)["state"] == "completed", timeout=30,
                       message="the job committed behind the mark was claimed without a NOTIFY")
            # The barrier held at last: a try after the commit succeeded. It may be the try that
            # was in flight as `tries` was read (the claim it asks for found the job, and a held
            # mark is not written again), or one after the job's claim; only the producer's
            # commit lets a try hold, so `marked` cannot have been true before it.
            wait_until(lambda: worker.producer.idle.marked, timeout=30,
                       message=lambda: f"no try held: marks {worker.producer.idle.marks},"
                                       f" {tries} when the producer committed")


def test_marks_are_cheap_to_leave_behind(conn: psycopg.Connection[Any]) -> None:
    # A worker that died leaves its marks: the next insert on the queue consumes them.
    assert _mark(conn, "gone", ["default"])
    conn.execute(INSERT, ("default",))
    assert _marks(conn) == []


def test_marks_cost_the_idle_worker_no_wal_flush(conn: psycopg.Connection[Any]) -> None:
    # A mark is written at every wait; in a logged table its commit waited for a WAL flush
    # (6-7 ms a mark on this busy disk against 0.19 ms unlogged), with the queue's lock held
    # exclusively all the while, so producers waited behind it.
    row = conn.execute("SELECT relpersistence FROM pg_class"
                       " WHERE oid = 'forklift.idle_workers'::regclass").fetchone()
    assert row == ("u",)
