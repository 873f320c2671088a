"""Enqueue: single, async, bulk, delayed, priority order, tags and meta, unique keys, and
enqueue inside the caller's own transaction."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar

import psycopg
import pytest
from apps import basic
from helpers import wait_until

from forklift import Forklift, Job, UniqueConflict
from forklift._db.sqltext import channel, render
from forklift._worker.idle import MARK_SQL


@pytest.fixture
def app(dsn: str) -> Iterator[Forklift]:
    with basic.bound(dsn) as bound_app:
        yield bound_app


def one(conn: psycopg.Connection[Any], sql: str, params: Any = None) -> Any:
    row = conn.execute(sql, params).fetchone()
    assert row is not None
    return row[0]


def state_of(conn: psycopg.Connection[Any], job_id: int) -> str:
    return str(one(conn, "SELECT state FROM forklift.jobs WHERE id = %s", (job_id,)))


# -- single ---------------------------------------------------------------------------------
def test_enqueue_stores_and_returns_the_job(app: Forklift, conn: psycopg.Connection[Any]) -> None:
    job = basic.echo.enqueue(basic.Greeting("ada"))
    assert isinstance(job, Job)
    assert (job.kind, job.queue, job.state, job.priority) == ("basic.echo", "default", "available", 0)
    assert (job.attempt, job.max_attempts, job.reused) == (0, 20, False)
    assert job.args == {"name": "ada", "times": 1}
    assert job.run_at <= datetime.now(UTC) and job.finished_at is None
    row = basic.job_row(conn, job.id)
    assert row["args"] == job.args and row["state"] == "available" and row["queue"] == "default"
    assert app.get_job(job.id) == job


class _RecordingCursor(psycopg.Cursor[Any]):
    """Keeps the parameters of every statement the client sends."""

    params: ClassVar[list[Any]] = []

    def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
        type(self).params.append(params)
        return super().execute(query, params, **kwargs)


def test_a_default_enqueue_sends_only_queue_kind_and_args(
    app: Forklift, dsn: str, conn: psycopg.Connection[Any]
) -> None:
    with psycopg.connect(dsn, autocommit=True, cursor_factory=_RecordingCursor) as own:
        _RecordingCursor.params = []
        plain = basic.noop.enqueue({"i": 1}, conn=own)
        assert _RecordingCursor.params == [("default", "basic.noop", '{"i":1}')]
        # An option that differs from the table's default is sent, and only that one.
        _RecordingCursor.params = []
        tagged = basic.noop.enqueue({"i": 2}, conn=own, priority=5, tags=["t"])
        assert [len(p) for p in _RecordingCursor.params] == [5]
    for job in (plain, tagged):
        assert app.get_job(job.id) == job
    assert (tagged.priority, tagged.tags, tagged.max_attempts) == (5, ["t"], 20)


def test_a_queue_is_recorded_again_when_the_insert_that_recorded_it_rolled_back(
    app: Forklift, dsn: str, conn: psycopg.Connection[Any]
) -> None:
    # The insert trigger remembers, per session, the queues it recorded; a rolled-back record
    # (transaction or savepoint) must be forgotten with it.
    def recorded(queue: str) -> bool:
        return bool(one(conn, "SELECT count(*) FROM forklift.queues WHERE name = %s", (queue,)))

    with psycopg.connect(dsn) as own:
        basic.noop.enqueue({}, conn=own, queue="rb_tx")
        own.rollback()
        with own.transaction():
            with own.transaction(force_rollback=True):
                basic.noop.enqueue({}, conn=own, queue="rb_sp")
            basic.noop.enqueue({}, conn=own, queue="rb_other")
        assert not recorded("rb_tx") and not recorded("rb_sp") and recorded("rb_other")
        basic.noop.enqueue({}, conn=own, queue="rb_tx")
        basic.noop.enqueue_many([{}], conn=own, queue="rb_sp")
        own.commit()
    assert recorded("rb_tx") and recorded("rb_sp")


def test_enqueue_by_kind_name_uses_the_kinds_defaults(app: Forklift) -> None:
    job = app.enqueue("basic.order", {"sku": "A", "qty": 1})
    assert (job.kind, job.queue) == ("basic.order", "orders")
    job = app.enqueue("basic.order", {"sku": "A", "qty": 1}, queue="rush", priority=-5,
                      max_attempts=2)
    assert (job.queue, job.priority, job.max_attempts) == ("rush", -5, 2)


def test_async_enqueue(app: Forklift, conn: psycopg.Connection[Any]) -> None:
    async def main() -> tuple[Job, Job, list[int], Job]:
        try:
            a = await basic.order.enqueue_async({"sku": "A", "qty": 1})
            b = await app.enqueue_async("basic.echo", {"name": "b"}, delay=60)
            many = await basic.noop.enqueue_many_async([{"i": i} for i in range(3)])
            many += await basic.noop.enqueue_many_async(
                [{"i": 3}, {"i": 4}, {"i": 5}], unique_key="async-key"
            )
            own = await psycopg.AsyncConnection.connect(app.dsn)
            async with own, own.transaction():
                c = await basic.noop.enqueue_async({}, conn=own, tags=["tx"])
            return a, b, many, c
        finally:
            await app.aclose()

    a, b, many, c = asyncio.run(main())
    assert (a.kind, a.state, b.state, c.tags) == ("basic.order", "available", "scheduled", ["tx"])
    assert len(set(many)) == 4 and many[3] == many[4] == many[5]
    assert basic.job_row(conn, many[3])["args"] == {"i": 3}
    assert one(conn, "SELECT count(*) FROM forklift.jobs") == 7


# -- bulk -----------------------------------------------------------------------------------
def test_enqueue_many_puts_ten_thousand_in_one_statement(
    app: Forklift, conn: psycopg.Connection[Any]
) -> None:
    n = 10_000
    ids = basic.anything.enqueue_many([{"n": i} for i in range(n)], tags=["bulk"])
    assert len(ids) == n and len(set(ids)) == n
    rows = conn.execute(
        "SELECT id, (args->>'n')::int, xmin::text, cmin::text, state, tags FROM forklift.jobs"
    ).fetchall()
    assert len(rows) == n
    # The returned ids are in the order of the payloads given.
    assert sorted((r[1], r[0]) for r in rows) == list(enumerate(ids))
    assert {r[4] for r in rows} == {"available"} and all(r[5] == ["bulk"] for r in rows)
    # One transaction (one xmin) and, inside it, one command (one cmin): a loop of inserts,
    # even inside one transaction, would give every row its own command id.
    assert len({r[2] for r in rows}) == 1
    assert len({r[3] for r in rows}) == 1


class _CountingCursor(psycopg.Cursor[Any]):
    """Counts the statements the client sends (execute and COPY)."""

    sent: int = 0

    def execute(self, *args: Any, **kwargs: Any) -> Any:
        type(self).sent += 1
        return super().execute(*args, **kwargs)

    def copy(self, *args: Any, **kwargs: Any) -> Any:
        type(self).sent += 1
        return super().copy(*args, **kwargs)


@pytest.mark.parametrize("keyed", [False, True], ids=["copy", "unique-keys"])
def test_enqueue_many_sends_as_many_statements_for_three_jobs_as_for_three_thousand(
    app: Forklift, dsn: str, conn: psycopg.Connection[Any], keyed: bool
) -> None:
    sent = []
    app.pool()  # open: conn= enqueues hear of full queues through it, sending nothing on own
    with psycopg.connect(dsn, autocommit=True, cursor_factory=_CountingCursor) as own:
        for n in (3, 3000):
            rows = [basic.noop.row({"i": i}, unique_key=f"{n}-{i}" if keyed else None)
                    for i in range(n)]
            _CountingCursor.sent = 0
            ids = app.enqueue_rows(rows, conn=own)
            sent.append(_CountingCursor.sent)
            assert len(set(ids)) == n
            assert [basic.job_row(conn, i)["args"]["i"] for i in (ids[0], ids[-1])] == [0, n - 1]
    assert sent[0] == sent[1] <= 3
    commands = conn.execute(
        "SELECT count(DISTINCT xmin::text), count(DISTINCT cmin::text) FROM forklift.jobs"
        " WHERE (args->>'i')::int >= 0 AND id > %s", (ids[0] - 1,)
    ).fetchone()
    assert commands == (1, 1)


def test_enqueue_many_with_unique_keys_returns_ids_in_order(
    app: Forklift, conn: psycopg.Connection[Any]
) -> None:
    held = basic.noop.enqueue({"first": True}, unique_key="k1")
    rows = [
        basic.noop.row({"i": 0}),
        basic.noop.row({"i": 1}, unique_key="k1"),  # a live job holds it already
        basic.noop.row({"i": 2}, unique_key="k2"),
        basic.noop.row({"i": 3}),
        basic.noop.row({"i": 4}, unique_key="k2"),  # twice in the same call
        basic.echo.row({"name": "x"}, unique_key="k1"),  # keys are per kind
    ]
    ids = app.enqueue_rows(rows)
    assert ids[1] == held.id
    assert ids[2] == ids[4] and ids[2] != held.id
    assert len({ids[0], ids[2], ids[3], ids[5], held.id}) == 5
    assert basic.job_row(conn, ids[0])["args"] == {"i": 0}
    assert basic.job_row(conn, ids[3])["args"] == {"i": 3}
    assert basic.job_row(conn, ids[2])["args"] == {"i": 2}
    assert basic.job_row(conn, ids[5])["kind"] == "basic.echo"
    assert one(conn, "SELECT count(*) FROM forklift.jobs") == 5


def test_enqueue_many_across_kinds_and_options(app: Forklift, conn: psycopg.Connection[Any]) -> None:
    ids = app.enqueue_many(
        [
            ("basic.echo", {"name": "a"}),
            ("basic.order", {"sku": "s", "qty": 1}, {"priority": 3, "delay": 120}),
            ("basic.noop", {}, {"queue": "side", "meta": {"m": 1}}),
        ]
    )
    rows = [basic.job_row(conn, i) for i in ids]
    assert [r["kind"] for r in rows] == ["basic.echo", "basic.order", "basic.noop"]
    assert [r["state"] for r in rows] == ["available", "scheduled", "available"]
    assert rows[1]["priority"] == 3 and rows[2]["queue"] == "side" and rows[2]["meta"] == {"m": 1}
    assert basic.noop.enqueue_many([]) == []


def test_enqueue_many_joins_the_callers_transaction(app: Forklift, dsn: str,
                                                    conn: psycopg.Connection[Any]) -> None:
    with psycopg.connect(dsn) as own:
        basic.noop.enqueue_many([{}] * 10, conn=own)
        own.rollback()
        basic.noop.enqueue_many([{}] * 4, conn=own)
        assert one(conn, "SELECT count(*) FROM forklift.jobs") == 0
        own.commit()
    assert one(conn, "SELECT count(*) FROM forklift.jobs") == 4


# -- delayed --------------------------------------------------------------------------------
def test_delay_and_at_schedule_the_job(app: Forklift) -> None:
    now = datetime.now(UTC)
    later = basic.noop.enqueue({}, delay=30)
    assert later.state == "scheduled"
    assert later.run_at >= later.created_at + timedelta(seconds=29.9)
    td = basic.noop.enqueue({}, delay=timedelta(minutes=2))
    assert td.state == "scheduled" and td.run_at >= td.created_at + timedelta(seconds=119.9)
    at = now + timedelta(hours=1)
    fixed = basic.noop.enqueue({}, at=at)
    assert (fixed.state, fixed.run_at) == ("scheduled", at)
    past = basic.noop.enqueue({}, at=now - timedelta(hours=1))
    assert (past.state, past.run_at) == ("available", now - timedelta(hours=1))
    zero = basic.noop.enqueue({}, delay=0)
    assert zero.state == "available"
    bulk = app.enqueue_rows([basic.noop.row({}, delay=30), basic.noop.row({}, at=at)])
    assert [app.get_job(i).state for i in bulk] == ["scheduled", "scheduled"]  # type: ignore[union-attr]


def test_a_delayed_job_runs_when_due_without_help(app: Forklift, conn: psycopg.Connection[Any]) -> None:
    job = basic.echo.enqueue({"name": "later"}, delay=0.5)
    assert job.state == "scheduled"
    with basic.running_worker(app, leader_interval=0.1, poll_interval=30) as worker:
        wait_until(lambda: state_of(conn, job.id) == "completed", timeout=30,
                   message="the delayed job completed")
        assert worker.stats.staged >= 1
    row = basic.job_row(conn, job.id)
    assert row["attempted_at"] >= row["run_at"]  # never claimed before it was due
    assert row["result"] == {"text": "hello later"}


# -- priority order -------------------------------------------------------------------------
def test_claim_order_is_priority_then_run_at_then_id(
    app: Forklift, conn: psycopg.Connection[Any]
) -> None:
    base = datetime.now(UTC) - timedelta(minutes=10)
    plan = [  # (label, priority, run_at offset in seconds)
        ("p5", 5, 0),
        ("p0-late", 0, 60),
        ("p-3", -3, 120),
        ("p0-early-a", 0, 30),
        ("p0-early-b", 0, 30),
        ("p0-earliest", 0, 0),
        ("p1", 1, 0),
    ]
    ids = {
        label: basic.noop.enqueue({"label": label}, priority=prio,
                                  at=base + timedelta(seconds=offset)).id
        for label, prio, offset in plan
    }
    with basic.running_worker(app, concurrency=1, prefetch_max=0):  # no local buffer
        wait_until(
            lambda: one(conn, "SELECT count(*) FROM forklift.jobs WHERE state = 'completed'") == 7,
            timeout=30, message="all seven jobs completed",
        )
    # One slot: one job per claim, so the claim order is the order of the fences.
    order = [r[0] for r in conn.execute("SELECT args->>'label' FROM forklift.jobs ORDER BY fence")]
    assert order == ["p-3", "p0-earliest", "p0-early-a", "p0-early-b", "p0-late", "p1", "p5"]
    assert ids["p0-early-a"] < ids["p0-early-b"]


# -- tags and meta --------------------------------------------------------------------------
def test_tags_and_meta_are_stored(app: Forklift, conn: psycopg.Connection[Any]) -> None:
    job = basic.noop.enqueue({}, tags=["billing", "eu"], meta={"trace": "abc", "n": [1, 2]})
    assert (job.tags, job.meta) == (["billing", "eu"], {"trace": "abc", "n": [1, 2]})
    row = basic.job_row(conn, job.id)
    assert (row["tags"], row["meta"]) == (["billing", "eu"], {"trace": "abc", "n": [1, 2]})
    plain, keyed = app.enqueue_rows([
        basic.noop.row({}, tags=("t1",), meta={"a": 1}),
        basic.noop.row({}, tags=["t2", "t3"], meta={"b": 2}, unique_key="u"),
    ])
    assert (basic.job_row(conn, plain)["tags"], basic.job_row(conn, plain)["meta"]) == (["t1"], {"a": 1})
    assert (basic.job_row(conn, keyed)["tags"], basic.job_row(conn, keyed)["meta"]) == (["t2", "t3"], {"b": 2})
    bare = basic.noop.enqueue({})
    assert (bare.tags, bare.meta) == ([], {})


# -- unique keys ----------------------------------------------------------------------------
def test_unique_key_returns_the_existing_live_job(app: Forklift, conn: psycopg.Connection[Any]) -> None:
    first = basic.noop.enqueue({"v": 1}, unique_key="report:42")
    again = basic.noop.enqueue({"v": 2}, unique_key="report:42")
    assert not first.reused and again.reused
    assert again.id == first.id and again.args == {"v": 1}
    other_kind = basic.anything.enqueue({}, unique_key="report:42")
    assert not other_kind.reused and other_kind.id != first.id
    assert one(conn, "SELECT count(*) FROM forklift.jobs") == 2


def test_unique_key_with_raise_policy(app: Forklift, conn: psycopg.Connection[Any]) -> None:
    basic.noop.enqueue({}, unique_key="once", delay=60)
    with pytest.raises(UniqueConflict) as refused:
        basic.noop.enqueue({}, unique_key="once", on_conflict="raise")
    assert refused.value.code == "unique_conflict"
    assert refused.value.detail == {"kind": "basic.noop", "unique_key": "once"}
    assert one(conn, "SELECT count(*) FROM forklift.jobs") == 1


@pytest.mark.parametrize("policy", ["return_existing", "raise"])
def test_unique_key_holds_under_concurrent_enqueues(
    app: Forklift, dsn: str, conn: psycopg.Connection[Any], policy: Any
) -> None:
    racers = 8
    barrier = threading.Barrier(racers)
    got: list[Job | BaseException] = []
    lock = threading.Lock()

    def race() -> None:
        with psycopg.connect(dsn, autocommit=True) as own:
            barrier.wait(30)
            try:
                result: Job | BaseException = basic.noop.enqueue(
                    {}, unique_key="race", on_conflict=policy, conn=own
                )
            except BaseException as exc:
                result = exc
        with lock:
            got.append(result)

    threads = [threading.Thread(target=race) for _ in range(racers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(got) == racers
    jobs = [g for g in got if isinstance(g, Job)]
    assert one(conn, "SELECT count(*) FROM forklift.jobs") == 1
    assert len([j for j in jobs if not j.reused]) == 1
    if policy == "raise":
        assert len(jobs) == 1
        assert all(isinstance(g, UniqueConflict) for g in got if not isinstance(g, Job))
    else:
        assert len(jobs) == racers and len({j.id for j in jobs}) == 1


def test_a_unique_key_is_free_again_once_the_job_completes(
    app: Forklift, conn: psycopg.Connection[Any]
) -> None:
    first = basic.echo.enqueue({"name": "a"}, unique_key="daily")
    with basic.running_worker(app):
        wait_until(lambda: state_of(conn, first.id) == "completed", timeout=30,
                   message="the first job completed")
    second = basic.echo.enqueue({"name": "b"}, unique_key="daily", on_conflict="raise")
    assert second.id != first.id and not second.reused
    assert app.enqueue_rows([basic.echo.row({"name": "c"}, unique_key="daily")]) == [second.id]


# -- inside the caller's transaction ----------------------------------------------------------
class _Listener:
    """A session listening on the wake channel, to see what workers would be told: it is an
    idle worker of queue txq (inserts NOTIFY only when one is: forklift._worker.idle)."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.conn = psycopg.connect(dsn, autocommit=True)
        self.conn.execute(f'LISTEN "{channel("forklift")}"')
        self._mark("listener", "txq")

    def _mark(self, worker: str, queue: str) -> None:
        self.conn.execute(render(MARK_SQL, "forklift"), {"worker": worker, "queues": [queue]})

    def until_marker(self) -> list[str]:
        """Wake-ups received up to a marker enqueued now on another session (in commit order)."""
        self._mark("listener-marker", "marker")
        basic.noop.enqueue({}, queue="marker")
        seen: list[str] = []
        for note in self.conn.notifies(timeout=20):
            seen.append(note.payload)
            if note.payload == "marker":
                return seen
        raise AssertionError(f"the marker's wake-up never arrived; saw {seen}")

    def close(self) -> None:
        self.conn.close()


@pytest.fixture
def listener(app: Forklift, dsn: str) -> Iterator[_Listener]:
    heard = _Listener(dsn)
    try:
        yield heard
    finally:
        heard.close()


def test_a_rolled_back_enqueue_leaves_no_job_and_wakes_no_one(
    app: Forklift, dsn: str, conn: psycopg.Connection[Any], listener: _Listener
) -> None:
    with psycopg.connect(dsn) as own:
        job = basic.noop.enqueue({}, conn=own, queue="txq")
        assert stored_in(own, job.id)
        own.rollback()
    assert one(conn, "SELECT count(*) FROM forklift.jobs WHERE queue = 'txq'") == 0
    assert listener.until_marker() == ["marker"]


def stored_in(c: psycopg.Connection[Any], job_id: int) -> bool:
    return c.execute("SELECT 1 FROM forklift.jobs WHERE id = %s", (job_id,)).fetchone() is not None


def test_a_committed_enqueue_appears_and_wakes_workers_at_commit(
    app: Forklift, dsn: str, conn: psycopg.Connection[Any], listener: _Listener
) -> None:
    with psycopg.connect(dsn) as own:
        job = basic.echo.enqueue({"name": "tx"}, conn=own, queue="txq")
        basic.echo.enqueue_many([{"name": "tx2"}], conn=own, queue="txq")
        # Before commit: other sessions see nothing and no worker has been told.
        assert not stored_in(conn, job.id)
        assert listener.until_marker() == ["marker"]
        own.commit()
    assert stored_in(conn, job.id)
    # One wake-up for the transaction and queue, however many jobs it enqueued.
    assert listener.until_marker() == ["txq", "marker"]


def test_a_job_enqueued_in_a_committed_transaction_is_run(
    app: Forklift, dsn: str, conn: psycopg.Connection[Any]
) -> None:
    # A poll interval of an hour: the wake-up at commit is what brings the worker to the job.
    with basic.running_worker(app, poll_interval=3600) as worker:
        wait_until(lambda: worker.listener.connected.is_set(), timeout=30,
                   message="the worker is listening")
        with psycopg.connect(dsn) as own, own.transaction():
            job = basic.echo.enqueue({"name": "committed"}, conn=own)
        wait_until(lambda: state_of(conn, job.id) == "completed", timeout=30,
                   message="the committed job ran")
    assert basic.job_row(conn, job.id)["result"] == {"text": "hello committed"}


# -- whose clock ------------------------------------------------------------------------------
class _SkewedClock(datetime):
    """A client clock an hour fast: nothing forklift stores may depend on it."""

    @classmethod
    def now(cls, tz: Any = None) -> Any:
        return datetime.now(tz) + timedelta(hours=1)


@pytest.mark.parametrize("bulk", ["copy", "unique"])
def test_enqueue_many_decides_state_and_run_at_by_the_servers_clock(
    app: Forklift, conn: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch, bulk: str
) -> None:
    import forklift._jobs.bulk
    import forklift._jobs.insert

    for module in (forklift._jobs.insert, forklift._jobs.bulk):  # one job; many
        monkeypatch.setattr(module, "datetime", _SkewedClock, raising=False)
    server_now = one(conn, "SELECT now()")
    soon = server_now + timedelta(minutes=30)  # in the future for the server, past for the skew
    key = {"unique_key": "k"} if bulk == "unique" else {}
    ids = app.enqueue_many([
        ("basic.noop", {"n": 1}, {"at": soon, **key}),
        ("basic.noop", {"n": 2}, {"delay": 60}),
    ])
    rows = conn.execute(
        "SELECT state, run_at - now() FROM forklift.jobs WHERE id = ANY(%s) ORDER BY id", (ids,)
    ).fetchall()
    assert [r[0] for r in rows] == ["scheduled", "scheduled"]
    assert rows[1][1] < timedelta(minutes=5)  # now + 60 s by the server, not an hour later
    # The same as one at a time.
    single = basic.noop.enqueue({}, delay=60)
    assert single.run_at - server_now < timedelta(minutes=5)
