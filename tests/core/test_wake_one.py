"""The single enqueue wakes its own queue: its INSERT names the queue through jobs_wake_one(),
which registers the queue and takes the idle marks before the row is stored, and the insert
trigger skips that statement. Every other insert, a later one in the same transaction
included, still goes through the trigger; so does the single enqueue while a kind may be
paused, and in a transaction that is not READ COMMITTED.

Which function ran is read from the server's own per-transaction call counts
(``track_functions``), so each test sees the path its statement took, not only its effects."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from apps import basic

from forklift import Forklift
from forklift._db.sqltext import render
from forklift._worker.idle import MARK_SQL
from forklift.ops import Operator

INSERT = "INSERT INTO forklift.jobs (queue, kind) VALUES (%s, 'basic.noop') RETURNING id"


@pytest.fixture
def app(dsn: str) -> Iterator[Forklift]:
    with basic.bound(dsn) as bound_app:
        yield bound_app


@pytest.fixture
def producer(dsn: str) -> Iterator[psycopg.Connection[Any]]:
    """A session that counts its PL/pgSQL calls, in a transaction of its own."""
    with psycopg.connect(dsn) as conn:
        conn.execute("SET track_functions = 'pl'")
        conn.commit()
        yield conn


class Calls:
    """The wake functions' calls in a transaction of ``conn`` from now on. The server's
    per-transaction counts also hold calls of earlier transactions not yet reported, so what
    counts is the difference, read within one transaction (no report happens inside one)."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn
        self.base = self._read()

    def _read(self) -> dict[str, int]:
        rows = self.conn.execute(
            "SELECT funcname, calls FROM pg_stat_xact_user_functions"
            " WHERE schemaname = 'forklift'"
            " AND funcname IN ('jobs_wake_one', 'jobs_after_insert')").fetchall()
        return {"jobs_wake_one": 0, "jobs_after_insert": 0} | {str(n): int(c) for n, c in rows}

    def made(self) -> dict[str, int]:
        now = self._read()
        return {name: now[name] - self.base[name] for name in now}


def _mark(conn: psycopg.Connection[Any], worker: str, queues: list[str]) -> bool:
    row = conn.execute(render(MARK_SQL, "forklift"), {"worker": worker, "queues": queues}
                       ).fetchone()
    return bool(row and row[0])


def _marks(conn: psycopg.Connection[Any]) -> list[tuple[str, str]]:
    return [(str(q), str(w)) for q, w in conn.execute(
        "SELECT queue, worker_id FROM forklift.idle_workers ORDER BY 1, 2").fetchall()]


def _listener(dsn: str) -> psycopg.Connection[Any]:
    conn = psycopg.connect(dsn, autocommit=True)
    conn.execute('LISTEN "forklift_wake"')
    return conn


def _notes(listen: psycopg.Connection[Any], count: int) -> list[str]:
    return [n.payload for n in listen.notifies(timeout=10, stop_after=count)]


def _queues(conn: psycopg.Connection[Any]) -> set[str]:
    return {str(r[0]) for r in conn.execute("SELECT name FROM forklift.queues").fetchall()}


def test_the_single_enqueue_wakes_its_queue_without_the_insert_trigger(
    app: Forklift, dsn: str, conn: psycopg.Connection[Any], producer: psycopg.Connection[Any]
) -> None:
    assert _mark(conn, "w1", ["default", "other"]) and _mark(conn, "w2", ["default"])
    with _listener(dsn) as listen:
        calls = Calls(producer)
        job = basic.noop.enqueue({}, conn=producer)
        assert calls.made() == {"jobs_wake_one": 1, "jobs_after_insert": 0}
        assert _marks(producer) == [("other", "w1")]  # this queue's marks taken, in its transaction
        producer.commit()
        assert _notes(listen, 1) == ["default"]
    assert basic.job_row(conn, job.id)["state"] == "available"
    assert _marks(conn) == [("other", "w1")]


def test_the_single_enqueue_notifies_nobody_when_no_worker_is_idle(
    app: Forklift, dsn: str, conn: psycopg.Connection[Any], producer: psycopg.Connection[Any]
) -> None:
    with _listener(dsn) as listen:
        basic.noop.enqueue({}, conn=producer)  # nobody idle: no NOTIFY, no commit lock
        producer.commit()
        conn.execute(INSERT, ("after",))
        assert _mark(conn, "w1", ["after"])
        conn.execute(INSERT, ("after",))
        # Notifications arrive in commit order: had the enqueue sent one, it would come first.
        assert _notes(listen, 1) == ["after"]


def test_the_first_enqueue_on_a_queue_registers_it(
    app: Forklift, conn: psycopg.Connection[Any], producer: psycopg.Connection[Any]
) -> None:
    assert "fresh" not in _queues(conn)
    calls = Calls(producer)
    basic.noop.enqueue({}, conn=producer, queue="fresh")
    assert calls.made() == {"jobs_wake_one": 1, "jobs_after_insert": 0}
    producer.commit()
    assert "fresh" in _queues(conn)
    basic.noop.enqueue({}, queue="pooled")  # the app's own connection
    assert "pooled" in _queues(conn)


def test_a_later_insert_in_the_same_transaction_runs_the_trigger(
    app: Forklift, dsn: str, conn: psycopg.Connection[Any], producer: psycopg.Connection[Any]
) -> None:
    assert _mark(conn, "w1", ["later"])
    with _listener(dsn) as listen:
        calls = Calls(producer)
        basic.noop.enqueue({}, conn=producer)
        producer.execute(INSERT, ("later",))
        assert calls.made() == {"jobs_wake_one": 1, "jobs_after_insert": 1}
        producer.execute("INSERT INTO forklift.jobs (queue, kind) VALUES ('later2', 'basic.noop')")
        assert calls.made() == {"jobs_wake_one": 1, "jobs_after_insert": 2}
        producer.commit()
        assert _notes(listen, 1) == ["later"]
    assert {"later", "later2"} <= _queues(conn)
    assert _marks(conn) == []


def test_other_inserts_keep_the_trigger(
    app: Forklift, conn: psycopg.Connection[Any], producer: psycopg.Connection[Any]
) -> None:
    assert _mark(conn, "w1", ["default"])
    calls = Calls(producer)
    basic.noop.enqueue({}, conn=producer, delay=3600)  # scheduled: wakes nobody
    basic.noop.enqueue_many([{}, {}], conn=producer, queue="bulk")
    basic.noop.enqueue({}, conn=producer, unique_key="u1")
    assert calls.made() == {"jobs_wake_one": 0, "jobs_after_insert": 3}
    producer.rollback()
    assert _marks(conn) == [("default", "w1")]


def test_while_a_kind_may_be_paused_the_trigger_does_it_all(
    app: Forklift, dsn: str, conn: psycopg.Connection[Any], producer: psycopg.Connection[Any]
) -> None:
    with Operator(dsn, actor="alice") as op:
        op.kinds.pause("basic.noop")
        try:
            calls = Calls(producer)
            job = basic.noop.enqueue({}, conn=producer)
            # the function looked at the flag and marked nothing: the trigger ran and held it
            assert calls.made() == {"jobs_wake_one": 1, "jobs_after_insert": 1}
            producer.commit()
            row = basic.job_row(conn, job.id)
            assert row["state"] == "scheduled" and row["run_at"].year == 9999
        finally:
            op.kinds.resume("basic.noop")
    assert basic.job_row(conn, job.id)["state"] == "available"
    calls = Calls(producer)
    basic.noop.enqueue({}, conn=producer)
    assert calls.made() == {"jobs_wake_one": 1, "jobs_after_insert": 0}  # flag off again
    producer.rollback()


def test_a_transaction_that_is_not_read_committed_notifies_through_the_trigger(
    app: Forklift, dsn: str, producer: psycopg.Connection[Any]
) -> None:
    # Its snapshot may predate a worker's mark, so it cannot trust what it reads of them.
    producer.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
    with _listener(dsn) as listen:
        calls = Calls(producer)
        basic.noop.enqueue({}, conn=producer, queue="rr")
        assert calls.made() == {"jobs_wake_one": 1, "jobs_after_insert": 1}
        producer.commit()
        assert _notes(listen, 1) == ["rr"]


def test_a_failed_enqueue_takes_no_mark_and_sends_nothing(
    app: Forklift, dsn: str, conn: psycopg.Connection[Any], producer: psycopg.Connection[Any]
) -> None:
    assert _mark(conn, "w1", ["default"])
    with _listener(dsn) as listen:
        basic.noop.enqueue({}, conn=producer)
        producer.rollback()  # the row, the taken mark and the NOTIFY go together
        assert _marks(conn) == [("default", "w1")]
        conn.execute(INSERT, ("default",))  # the trigger's own wake: the first note to come
        assert _notes(listen, 1) == ["default"]
    assert _marks(conn) == []
