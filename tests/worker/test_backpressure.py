"""Backpressure at enqueue: a queue past its ceiling refuses (QueueFull, with its code and
figures), waits for room, or sheds, as each kind declares; bulk enqueues say what they took;
a queue without a ceiling costs an enqueue no statement; concurrent producers lose nothing and
overshoot the ceiling by no more than the documented slack."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import tempfile
import threading
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from apps import backpressure as bp
from apps.basic import running_worker
from helpers import wait_until

from forklift import Forklift, InvalidOption, QueueFull, Shed, Wait
from forklift._jobs import fullness
from forklift._worker.maintenance.ceilings import judge
from forklift.ops import InvalidFilter, Operator

app = bp.app
#: The leader measures every LEADER seconds here (at most every second in production).
LEADER = 0.2


@pytest.fixture
def bound(dsn: str) -> Iterator[Forklift]:
    app.use(dsn)
    app._full.__init__(app.schema)  # type: ignore[misc]  # a fresh view for each database
    try:
        yield app
    finally:
        app.close()


def leader() -> Any:
    """A worker that leads (measures ceilings) but drains only another queue."""
    return running_worker(app, queues=["bp_other"], leader_interval=LEADER)


def full_by(conn: psycopg.Connection[Any], queue: str = bp.QUEUE) -> str | None:
    row = conn.execute("SELECT full_by FROM forklift.queues WHERE name = %s", (queue,)).fetchone()
    return None if row is None else row[0]


def stored(conn: psycopg.Connection[Any], queue: str = bp.QUEUE) -> int:
    row = conn.execute("SELECT count(*) FROM forklift.jobs WHERE queue = %s", (queue,)).fetchone()
    assert row is not None
    return int(row[0])


def fill(dsn: str, conn: psycopg.Connection[Any], depth: int) -> None:
    """Put ``depth`` jobs in the queue, set its depth ceiling there, and wait for the leader
    to mark it full."""
    app.enqueue_many([("bp.refuse", {"n": i}) for i in range(depth)])
    with Operator(dsn) as op:
        op.queues.set_ceiling(bp.QUEUE, depth=depth, reason="test")
    wait_until(lambda: full_by(conn) == "depth", timeout=15,
               message=lambda: f"the leader marked {bp.QUEUE} full (full_by={full_by(conn)})")


def refused_once_known(kind: Any, **options: Any) -> tuple[QueueFull, int]:
    """Enqueue until the app learns the queue is full; the refusal and how many got in first
    (the news comes with the reply of the app's next statement, so one may)."""
    took = 0
    for _ in range(20):
        try:
            kind.enqueue({"late": took}, **options)
            took += 1
        except QueueFull as exc:
            return exc, took
    raise AssertionError("20 enqueues to a full queue went through")


def test_a_queue_past_its_depth_ceiling_refuses_with_the_code(
        bound: Forklift, dsn: str, conn: psycopg.Connection[Any]) -> None:
    before = fullness.counts().get((bp.QUEUE, "refused"), 0)
    with leader():
        fill(dsn, conn, 5)
        exc, took = refused_once_known(bp.refuse)
    assert took <= app.pool_size  # at most one per pooled connection before the news
    assert exc.code == "queue_full"
    assert exc.detail["queue"] == bp.QUEUE and exc.detail["ceiling"] == "depth"
    assert exc.detail["limit"] == 5 and exc.detail["figure"] >= 5
    assert exc.detail["retry_after"] > 0
    assert "bp" in exc.message and "ceiling of 5" in exc.message
    assert stored(conn) == 5 + took  # the refused one was not stored
    assert fullness.counts()[(bp.QUEUE, "refused")] == before + 1
    # another queue is not affected
    assert bp.elsewhere.enqueue({}).id > 0


def test_an_app_whose_enqueues_name_the_caller_s_connection_never_opens_a_pool(
        bound: Forklift, dsn: str, conn: psycopg.Connection[Any]) -> None:
    """An app pointed at no reachable database of its own (its enqueues all name ``conn=``)
    learns which queues are full on the caller's connection, in a savepoint."""
    with leader():
        fill(dsn, conn, 3)
    elsewhere = Forklift("host=/nonexistent-forklift-socket dbname=none")
    kind = elsewhere.job(name="bp.refuse", queue=bp.QUEUE)(bp.refuse.fn)
    free = elsewhere.job(name="bp.free", queue="bp_free")(bp.refuse.fn)
    try:
        with psycopg.connect(dsn) as caller:
            job = free.enqueue({}, conn=caller)  # in the caller's transaction, as ever
            with pytest.raises(QueueFull):
                kind.enqueue({"late": 1}, conn=caller)
            assert free.enqueue({}, conn=caller).id > job.id  # the transaction goes on
        assert not elsewhere._pools.opened()
    finally:
        elsewhere.close()
    assert stored(conn) == 3
    assert conn.execute("SELECT count(*) FROM forklift.jobs WHERE queue = 'bp_free'"
                        ).fetchone() == (2,)


def test_an_age_ceiling_fills_when_the_oldest_job_waits_too_long(
        bound: Forklift, dsn: str, conn: psycopg.Connection[Any]) -> None:
    bp.refuse.enqueue({})
    conn.execute("UPDATE forklift.jobs SET run_at = now() - interval '1 hour'")
    with Operator(dsn) as op, leader():
        op.queues.set_ceiling(bp.QUEUE, age="5m", reason="test")
        wait_until(lambda: full_by(conn) == "age", timeout=15, message="marked full by age")
        exc, _ = refused_once_known(bp.refuse)
        assert exc.detail["ceiling"] == "age" and exc.detail["limit"] == 300
        assert exc.detail["figure"] >= 3600
        info = op.queues.get(bp.QUEUE)
        assert info is not None and info.full and info.ceiling == "age 300s"
        op.queues.set_ceiling(bp.QUEUE, off=True, reason="test")
        assert full_by(conn) is None
        # the lift is announced at once: the next enqueue goes through
        wait_until(lambda: _takes(bp.refuse), timeout=5, message="an enqueue after the lift")


def _takes(kind: Any) -> bool:
    try:
        return bool(kind.enqueue({}).id)
    except QueueFull:
        return False


def test_wait_enqueues_once_a_worker_drains_room(
        bound: Forklift, dsn: str, conn: psycopg.Connection[Any]) -> None:
    with Operator(dsn) as op:
        op.pause(bp.QUEUE, reason="hold", create=True)
    with leader():
        fill(dsn, conn, 3)
        refused_once_known(bp.refuse)  # the app knows it is full now
        got: list[Any] = []
        waiter = threading.Thread(target=lambda: got.append(bp.wait.enqueue({"w": 1})))
        waiter.start()
        assert not got and waiter.is_alive()
        with Operator(dsn) as op:
            op.resume(bp.QUEUE, reason="drain")
        with running_worker(app, queues=[bp.QUEUE], lead=False):
            waiter.join(timeout=30)
            assert not waiter.is_alive(), "the waiting enqueue never got room"
    (job,) = got
    assert job.id > 0 and job.shed is None
    assert conn.execute("SELECT kind FROM forklift.jobs WHERE id = %s", (job.id,)).fetchone() \
        == ("bp.wait",)


def test_wait_times_out_with_the_same_error(
        bound: Forklift, dsn: str, conn: psycopg.Connection[Any]) -> None:
    with leader():
        fill(dsn, conn, 3)
        refused_once_known(bp.refuse)
        n = stored(conn)
        with pytest.raises(QueueFull) as err:
            bp.wait.enqueue({}, on_full=Wait(0.5))
    assert "after waiting 0.5s" in err.value.message and err.value.code == "queue_full"
    assert stored(conn) == n


def test_async_wait_does_not_block_the_loop(
        bound: Forklift, dsn: str, conn: psycopg.Connection[Any]) -> None:
    with leader():
        fill(dsn, conn, 3)
        refused_once_known(bp.refuse)

        async def main() -> tuple[int, BaseException]:
            ticks = 0
            waiting = asyncio.ensure_future(bp.wait.enqueue_async({}, on_full=Wait(0.6)))
            while not waiting.done():
                ticks += 1
                await asyncio.sleep(0.01)
            exc = waiting.exception()
            assert exc is not None
            await app.aclose()
            return ticks, exc

        ticks, exc = asyncio.run(main())
    assert isinstance(exc, QueueFull)
    assert ticks > 5  # the loop kept running while the enqueue waited


def test_shed_drops_only_what_its_rule_says(
        bound: Forklift, dsn: str, conn: psycopg.Connection[Any]) -> None:
    before = fullness.counts().get((bp.QUEUE, "shed"), 0)
    with leader():
        fill(dsn, conn, 3)
        refused_once_known(bp.refuse)
        n = stored(conn)
        dropped = bp.shed.enqueue({"low": True})  # priority 5: at or below the rule's
        assert dropped.shed == "priority>=5" and dropped.id == 0
        assert stored(conn) == n
        with pytest.raises(QueueFull):  # more urgent than the rule: refused, not shed
            bp.shed.enqueue({"urgent": True}, priority=1)
        # a per-call override sheds the refusing kind's job too
        assert bp.refuse.enqueue({}, on_full=Shed()).shed == "kind"
    assert stored(conn) == n
    assert fullness.counts()[(bp.QUEUE, "shed")] == before + 2


def test_bulk_says_what_it_took_refused_and_shed(
        bound: Forklift, dsn: str, conn: psycopg.Connection[Any]) -> None:
    with leader():
        fill(dsn, conn, 3)
        refused_once_known(bp.refuse)
        n = stored(conn)
        got = app.enqueue_many([("bp.refuse", {}), ("bp.elsewhere", {}), ("bp.shed", {}),
                                ("bp.elsewhere", {}), ("bp.refuse", {})])
        assert got.offered == 5 and got.taken == 2 and len(got) == 2
        assert got.refused == [0, 4] and got.shed == [2]
        assert got.full[bp.QUEUE].code == "queue_full"
        assert stored(conn) == n and stored(conn, "bp_other") == 2
        assert all(isinstance(i, int) for i in got)  # still the list of ids it always was
        alone = bp.refuse.enqueue_many([{"i": i} for i in range(4)])
        assert alone == [] and alone.refused == [0, 1, 2, 3] and alone.taken == 0


def test_the_callers_transaction_follows_the_rule_and_refuses_wait(
        bound: Forklift, dsn: str, conn: psycopg.Connection[Any]) -> None:
    with leader():
        fill(dsn, conn, 3)
        refused_once_known(bp.refuse)
        with psycopg.connect(dsn) as own:
            with pytest.raises(InvalidOption) as err:
                bp.refuse.enqueue({}, conn=own, on_full=Wait(5))
            assert err.value.detail["field"] == "on_full" and "conn=" in err.value.message
            with pytest.raises(QueueFull):
                bp.refuse.enqueue({}, conn=own)
            own.rollback()
            assert bp.shed.enqueue({}, conn=own).shed == "priority>=5"


def test_absurd_ceilings_are_refused_naming_the_field(bound: Forklift, dsn: str) -> None:
    bp.refuse.enqueue({})
    with Operator(dsn) as op:
        for kwargs, field in (({"depth": 0}, "depth"), ({"depth": -3}, "depth"),
                              ({"depth": True}, "depth"), ({"age": "0s"}, "age"),
                              ({"age": "90d"}, "age"), ({}, "depth"),
                              ({"depth": 5, "off": True}, "off")):
            with pytest.raises(InvalidFilter) as err:
                op.queues.set_ceiling(bp.QUEUE, **kwargs)
            assert err.value.detail["field"] == field, kwargs
        info = op.queues.get(bp.QUEUE)
        assert info is not None and info.ceiling == "none"  # nothing was changed
        audit = op.audit(limit=1)
    assert not [e for e in audit if e.action == "queue_ceiling"]


def test_full_is_reached_at_the_ceiling() -> None:
    assert judge("q", 10, None, 9, None).by is None
    assert judge("q", 10, None, 10, None).by == "depth"
    assert judge("q", None, 60.0, None, 59.0).by is None
    assert judge("q", 10, 60.0, 3, 61.0).by == "age"


def _sent(trace: str) -> int:
    """Statements a libpq trace shows the client sent (extended protocol Bind, or Query)."""
    with open(trace) as f:
        return sum(1 for line in f
                   if line.split("\t")[1:3] and line.split("\t")[1] == "F"
                   and line.split("\t")[3:4] in (["Bind"], ["Query"]))


def test_a_queue_without_a_ceiling_costs_an_enqueue_no_statement(
        dsn: str, conn: psycopg.Connection[Any]) -> None:
    """On a real pooled connection (libpq's own trace of what it sent): N enqueues are N
    statements, whether or not another queue has a ceiling and is full."""
    solo = Forklift(dsn, pool_size=1)
    kind = solo.job(name="bp.solo", queue="solo")(bp.refuse.fn)
    kind.enqueue({})  # the pool opens (LISTEN and one read of the full set, once)
    fd, trace = tempfile.mkstemp(prefix="forklift-trace-")
    try:
        with solo.pool().connection() as c:
            c.pgconn.trace(fd)
        for i in range(50):
            kind.enqueue({"i": i})
        with solo.pool().connection() as c:
            c.pgconn.untrace()
        assert _sent(trace) == 50
        # another queue full: still one statement an enqueue to this one
        with Operator(dsn) as op:
            op.queues.set_ceiling("other", depth=1, reason="test", create=True)
        conn.execute("UPDATE forklift.queues SET full_by = 'depth', measured_depth = 1,"
                     " measured_at = now() WHERE name = 'other'")
        solo._full.read_set(conn)
        os.ftruncate(fd, 0)
        os.lseek(fd, 0, os.SEEK_SET)
        with solo.pool().connection() as c:
            c.pgconn.trace(fd)
        for i in range(50):
            kind.enqueue({"i": i})
        with solo.pool().connection() as c:
            c.pgconn.untrace()
        assert _sent(trace) == 50
    finally:
        os.close(fd)
        os.unlink(trace)
        solo.close()


def test_concurrent_producers_lose_nothing_and_once_refused_are_refused_until_there_is_room(
        bound: Forklift, dsn: str, conn: psycopg.Connection[Any]) -> None:
    ceiling, producers, most = 100, 4, 5000
    with Operator(dsn) as op:
        op.queues.set_ceiling(bp.QUEUE, depth=ceiling, reason="test", create=True)
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    with leader():
        procs = [ctx.Process(target=bp.produce, args=(dsn, p, most, out))
                 for p in range(producers)]
        for p in procs:
            p.start()
        results = [out.get(timeout=300) for _ in procs]
        for p in procs:
            p.join(timeout=30)
            assert p.exitcode == 0
    taken = sorted(i for _, ids, _, _ in results for i in ids)
    rows = conn.execute("SELECT id FROM forklift.jobs WHERE queue = %s ORDER BY id",
                        (bp.QUEUE,)).fetchall()
    assert [r[0] for r in rows] == taken  # nothing lost, nothing stored that was refused
    # Each producer was refused in the end (the leader found the queue full and every app
    # heard of it), and, nothing draining the queue, took nothing once refused: the news stays.
    assert [(refused, late) for _, _, refused, late in results] == [
        (bp.STOP_AFTER, 0)] * producers
    # The ceiling is soft by what producers enqueue before the news reaches them (the how-to
    # gives measured figures); what this run took over it, for the reader of the log:
    print(f"ceiling {ceiling}: {len(taken)} taken ({len(taken) - ceiling} over)")
    assert len(taken) >= ceiling


def test_metrics_show_full_queues_and_refusals(
        bound: Forklift, dsn: str, conn: psycopg.Connection[Any]) -> None:
    from forklift import metrics

    with leader():
        fill(dsn, conn, 3)
        refused_once_known(bp.refuse)
        bp.shed.enqueue({})
    with Operator(dsn) as op:
        op.queues.set_ceiling("roomy", depth=50, reason="test", create=True)
    conn.execute("UPDATE forklift.queues SET measured_at = now() WHERE name = 'roomy'")

    async def sample() -> None:
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as aconn:
            await metrics._sample_depth("forklift")(aconn)

    asyncio.run(sample())
    got = {(s.name, tuple(sorted(s.labels.items()))): s.value
           for m in metrics.registry.collect() for s in m.samples}
    assert got[("forklift_queue_full", (("queue", bp.QUEUE),))] == 1.0
    assert got[("forklift_queue_full", (("queue", "roomy"),))] == 0.0
    assert ("forklift_queue_full", (("queue", "bp_other"),)) not in got  # no ceiling
    refused = got[("forklift_enqueue_refused_total", (("queue", bp.QUEUE), ("reason", "refused")))]
    shed = got[("forklift_enqueue_refused_total", (("queue", bp.QUEUE), ("reason", "shed")))]
    assert refused >= 1 and shed >= 1


class _Counting(psycopg.Cursor[Any]):
    """Counts the statements the client sends on a connection."""

    sent = 0

    def execute(self, *args: Any, **kwargs: Any) -> Any:
        type(self).sent += 1
        return super().execute(*args, **kwargs)


def test_the_callers_connection_learns_of_a_full_queue_and_carries_nothing_more(
        bound: Forklift, dsn: str, conn: psycopg.Connection[Any]) -> None:
    """conn= enqueues of an app whose pool is open learn the queue filled from an idle pooled
    connection's socket, and the caller's connection carries one statement per job stored,
    nothing else."""
    with leader(), psycopg.connect(dsn, autocommit=True, cursor_factory=_Counting) as own:
        bound.pool()  # the app's own pool is open (LISTEN): its news reaches conn= enqueues
        bp.refuse.enqueue({}, conn=own)
        with Operator(dsn) as op:
            op.queues.set_ceiling(bp.QUEUE, depth=5, reason="test")
        _Counting.sent = 0
        stored_here = 0

        def refused() -> bool:
            nonlocal stored_here
            try:
                bp.refuse.enqueue({}, conn=own)
            except QueueFull:
                return True
            stored_here += 1
            return False

        wait_until(refused, timeout=15, interval=0.05, message="a conn= enqueue refused")
        assert _Counting.sent == stored_here
        assert stored(conn) == 1 + stored_here


def test_the_outbox_relay_keeps_messages_while_their_queue_is_full(
        bound: Forklift, dsn: str, conn: psycopg.Connection[Any],
        caplog: pytest.LogCaptureFixture) -> None:
    def states() -> list[str]:
        return [r[0] for r in conn.execute("SELECT state FROM forklift.outbox ORDER BY id")]

    caplog.set_level("INFO", logger="forklift.worker")
    with leader():
        fill(dsn, conn, 3)
        for i in range(3):
            app.outbox.publish("bp.topic", {"n": i})
        wait_until(lambda: "is full" in caplog.text, timeout=20,
                   message=lambda: f"the relay met the full queue (outbox: {states()})")
        assert states() == ["pending"] * 3 and stored(conn) == 3  # nothing lost, nothing added
        with Operator(dsn) as op:
            op.queues.set_ceiling(bp.QUEUE, off=True, reason="room")
        wait_until(lambda: states() == ["delivered"] * 3, timeout=30,
                   message=lambda: f"delivered once there was room (outbox: {states()})")
    assert stored(conn) == 6


def test_a_full_queue_reads_full_unless_something_more_urgent_holds_it() -> None:
    from forklift.ops.stats import queue_state

    base: dict[str, Any] = {"paused": False, "counts": {"available": 5}, "workers": 1,
                            "lag": 600.0, "completed": 0, "failed": 0}
    assert queue_state(**base, full=True) == "full"  # over lagging
    assert queue_state(**base) == "lagging"
    assert queue_state(**{**base, "workers": 0}, full=True) == "no_worker"
    assert queue_state(**{**base, "paused": True}, full=True) == "paused"
