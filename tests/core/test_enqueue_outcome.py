"""An enqueue whose commit reply is lost raises EnqueueOutcomeUnknown, naming the unique keys
that make its retry safe; a failure before the commit, or on the caller's connection, stays
the driver's error.

The commit is held for real: a deferred constraint trigger on the jobs table waits at COMMIT
for an advisory lock the test holds, and the test terminates that backend from its own
connection while it waits (the client sees its connection die at the commit).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import psycopg
import pytest
from helpers import wait_until

from forklift import EnqueueOutcomeUnknown, EnqueueRefused, Forklift, ForkliftError, JobContext

KIND = "outcome.held"
GATE = 7_300_421  # the advisory lock a held commit waits on


@dataclass
class Item:
    n: int


def _handle(ctx: JobContext, item: Item) -> None:
    return None


@pytest.fixture
def app(dsn: str) -> Iterator[Forklift]:
    bound = Forklift(dsn)
    bound.job(name=KIND, queue="held")(_handle)
    try:
        yield bound
    finally:
        bound.close()


def hold_inserts(conn: psycopg.Connection[Any], *, at_commit: bool) -> None:
    """Make each insert of a held job wait for the gate: at its transaction's commit (a deferred
    constraint trigger), or during its statement (a plain row trigger)."""
    conn.execute(
        "CREATE FUNCTION public.hold_insert() RETURNS trigger LANGUAGE plpgsql AS"
        f" $$ BEGIN PERFORM pg_advisory_xact_lock({GATE}); RETURN NULL; END $$")
    timing = "CONSTRAINT TRIGGER" if at_commit else "TRIGGER"
    deferred = " DEFERRABLE INITIALLY DEFERRED" if at_commit else ""
    conn.execute(
        f"CREATE {timing} hold_insert AFTER INSERT ON forklift.jobs{deferred} FOR EACH ROW"
        f" WHEN (NEW.kind = '{KIND}') EXECUTE FUNCTION public.hold_insert()")


def waiting_backend(conn: psycopg.Connection[Any]) -> int:
    """The pid of the backend waiting on the gate (its insert reached the trigger)."""
    def pid() -> int | None:
        row = conn.execute(
            "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
            " AND objid = %s AND database = (SELECT oid FROM pg_database"
            " WHERE datname = current_database())", (GATE,)).fetchone()
        return int(row[0]) if row else None

    return wait_until(pid, timeout=30, message="no enqueue reached the held insert")


def cut_off(conn: psycopg.Connection[Any], call: Callable[[], Any]) -> BaseException:
    """Run ``call`` while the gate is shut, terminate its backend once it waits there, and
    return what it raised."""
    conn.execute("SELECT pg_advisory_lock(%s)", (GATE,))
    try:
        with ThreadPoolExecutor(1) as pool:
            future: Future[Any] = pool.submit(call)
            pid = waiting_backend(conn)
            conn.execute("SELECT pg_terminate_backend(%s)", (pid,))
            error = future.exception(timeout=30)
    finally:
        conn.execute("SELECT pg_advisory_unlock(%s)", (GATE,))
    assert error is not None, "the enqueue returned although its connection was terminated"
    return error


def in_loop(app: Forklift, call: Callable[[], Any]) -> Callable[[], Any]:
    """``call`` (a coroutine factory) run on an event loop of its own, the app's async pool
    closed on that loop afterwards."""
    async def run() -> Any:
        try:
            return await call()
        finally:
            await app.aclose()

    return lambda: asyncio.run(run())


def held_jobs(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute("SELECT count(*) FROM forklift.jobs WHERE kind = %s", (KIND,)).fetchone()
    assert row is not None
    return int(row[0])


# -- one job -------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_lost_commit_of_one_job_is_an_unknown_outcome_naming_its_unique_key(
    app: Forklift, conn: psycopg.Connection[Any], mode: str
) -> None:
    hold_inserts(conn, at_commit=True)
    kind = app.kind(KIND)
    call: Callable[[], Any] = (
        (lambda: kind.enqueue(Item(1), unique_key="order:1")) if mode == "sync"
        else in_loop(app, lambda: kind.enqueue_async(Item(1), unique_key="order:1")))
    error = cut_off(conn, call)
    assert isinstance(error, EnqueueOutcomeUnknown), repr(error)
    assert isinstance(error, ForkliftError) and not isinstance(error, EnqueueRefused)
    assert error.code == "enqueue_outcome_unknown"
    assert error.detail["unique_key"] == "order:1" and error.detail["jobs"] == 1
    assert "may exist" in error.message and "'order:1'" in error.message
    assert isinstance(error.__cause__, psycopg.OperationalError)
    # The retry the message advises stores the job once (here the commit never landed).
    first = kind.enqueue(Item(1), unique_key="order:1")
    again = kind.enqueue(Item(1), unique_key="order:1")
    assert (first.reused, again.reused, again.id) == (False, True, first.id)
    assert held_jobs(conn) == 1


def test_a_lost_commit_without_a_unique_key_says_a_retry_may_store_it_twice(
    app: Forklift, conn: psycopg.Connection[Any]
) -> None:
    hold_inserts(conn, at_commit=True)
    error = cut_off(conn, lambda: app.enqueue(KIND, Item(2)))
    assert isinstance(error, EnqueueOutcomeUnknown), repr(error)
    assert error.detail["unique_key"] is None and error.detail["kind"] == KIND
    assert "may exist" in error.message and "twice" in error.message
    assert "unique_key" in error.message


# -- a bulk --------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_lost_commit_of_a_bulk_is_an_unknown_outcome_naming_each_unique_key(
    app: Forklift, conn: psycopg.Connection[Any], mode: str
) -> None:
    hold_inserts(conn, at_commit=True)
    items = [(KIND, Item(i), {"unique_key": f"order:{i}"}) for i in (1, 2)] + [(KIND, Item(3))]
    call: Callable[[], Any] = (
        (lambda: app.enqueue_many(items)) if mode == "sync"
        else in_loop(app, lambda: app.enqueue_many_async(items)))
    error = cut_off(conn, call)
    assert isinstance(error, EnqueueOutcomeUnknown), repr(error)
    assert error.detail["unique_keys"] == ["order:1", "order:2", None]
    assert error.detail["jobs"] == 3
    assert "all of them may exist, or none" in error.message
    assert "2 of them carry unique keys" in error.message
    assert isinstance(error.__cause__, psycopg.OperationalError)
    assert held_jobs(conn) == 0  # one transaction: here none landed
    assert len(app.enqueue_many(items[:2])) == 2 and held_jobs(conn) == 2


# -- a batch -------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_lost_commit_of_a_batch_is_an_unknown_outcome_and_the_same_submit_is_safe(
    app: Forklift, conn: psycopg.Connection[Any], mode: str
) -> None:
    hold_inserts(conn, at_commit=True)
    targets = [Item(1), Item(2), Item(3)]
    call: Callable[[], Any] = (
        (lambda: app.batch(KIND, targets, caller="importer")) if mode == "sync"
        else in_loop(app, lambda: app.batch_async(KIND, targets, caller="importer")))
    error = cut_off(conn, call)
    assert isinstance(error, EnqueueOutcomeUnknown), repr(error)
    assert error.detail["caller"] == "importer" and error.detail["jobs"] == 3
    assert error.detail["key"]  # derived from the targets when none is given
    assert "may exist" in error.message and "submit it again" in error.message
    assert held_jobs(conn) == 0  # one transaction: here none landed
    # The retry the message advises stores the batch once.
    first, reused = app.batch(KIND, targets, caller="importer")
    again, reused_again = app.batch(KIND, targets, caller="importer")
    assert (reused, reused_again, again.id) == (False, True, first.id)
    assert held_jobs(conn) == 3


# -- not a lost commit -------------------------------------------------------------------------
def test_a_connection_lost_before_the_commit_is_the_drivers_error(
    app: Forklift, conn: psycopg.Connection[Any]
) -> None:
    # A bulk is one transaction: a backend terminated during its insert committed nothing.
    hold_inserts(conn, at_commit=False)
    error = cut_off(conn, lambda: app.enqueue_many([(KIND, Item(1)), (KIND, Item(2))]))
    assert isinstance(error, psycopg.OperationalError), repr(error)
    assert not isinstance(error, EnqueueOutcomeUnknown)
    assert held_jobs(conn) == 0


def test_on_the_callers_connection_the_commit_and_its_error_are_the_callers(
    app: Forklift, conn: psycopg.Connection[Any], dsn: str
) -> None:
    with psycopg.connect(dsn) as caller:
        caller.execute("SELECT 1")
        conn.execute("SELECT pg_terminate_backend(%s)", (caller.info.backend_pid,))
        with pytest.raises(psycopg.OperationalError) as lost:
            app.kind(KIND).enqueue(Item(1), unique_key="order:1", conn=caller)
        assert not isinstance(lost.value, EnqueueOutcomeUnknown)
