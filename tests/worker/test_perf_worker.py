"""The worker's fast path keeps every guarantee: the lock-free claim never overfills a limited
queue, and jobs claimed into the local buffer are renewed, cancellable, dropped when their lease
is lost, and given back untouched by a drain."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest
from apps import basic, perf
from helpers import wait_until

from forklift import Forklift
from forklift._db.connections import connect_kwargs
from forklift._db.sqltext import render
from forklift._worker import leases, settle
from forklift._worker.claim import CLAIM_FREE_SQL, CLAIM_SQL, Claimed, claim_batch, release
from forklift.ops import actions
from forklift.ops.context import OpsContext


@pytest.fixture
def app(dsn: str) -> Iterator[Forklift]:
    perf.reset()
    perf.app.use(dsn)
    try:
        yield perf.app
    finally:
        perf.GATE.set()
        perf.app.close()


def _insert(conn: psycopg.Connection[Any], queue: str, count: int) -> list[int]:
    rows = conn.execute(
        "INSERT INTO forklift.jobs (queue, kind) SELECT %s, 'perf.noop'"
        " FROM generate_series(1, %s) RETURNING id", (queue, count),
    ).fetchall()
    return [r[0] for r in rows]


async def _claim(dsn: str, n: int, *, locked: bool, queues: list[str]) -> tuple[list[Any], bool]:
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as ac:
        answer = await claim_batch(
            ac, "forklift", worker_id="w-test", queues=queues, n=n, lease=30.0, locked=locked,
            kinds=["perf.noop"],
        )
        return answer.jobs, answer.limited


# -- the claim ----------------------------------------------------------------------------------
def test_the_lock_free_claim_leaves_limited_queues_to_the_locked_one(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    _insert(conn, "open", 3)
    _insert(conn, "lim", 3)
    conn.execute("UPDATE forklift.queues SET concurrency = 1 WHERE name = 'lim'")
    queues = ["lim", "open"]

    got, limited = asyncio.run(_claim(dsn, 10, locked=False, queues=queues))
    assert sorted(j.queue for j in got) == ["open"] * 3 and limited

    got, limited = asyncio.run(_claim(dsn, 10, locked=True, queues=queues))
    assert [j.queue for j in got] == ["lim"] and limited
    got, limited = asyncio.run(_claim(dsn, 10, locked=True, queues=queues))
    assert got == [] and limited  # the limit of one holds

    conn.execute("UPDATE forklift.queues SET concurrency = NULL WHERE name = 'lim'")
    got, limited = asyncio.run(_claim(dsn, 10, locked=True, queues=queues))
    assert [j.queue for j in got] == ["lim", "lim"] and not limited


def test_the_lock_free_claim_respects_a_pause(dsn: str, conn: psycopg.Connection[Any]) -> None:
    _insert(conn, "open", 2)
    conn.execute("UPDATE forklift.queues SET paused = true WHERE name = 'open'")
    assert asyncio.run(_claim(dsn, 10, locked=False, queues=["open"])) == ([], False)


def test_release_gives_jobs_back_untouched_and_wakes_listeners(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    ids = _insert(conn, "open", 3)
    got, _ = asyncio.run(_claim(dsn, 3, locked=False, queues=["open"]))
    conn.execute("UPDATE forklift.jobs SET cancel_requested_at = now() WHERE id = %s", (ids[2],))
    conn.execute("LISTEN forklift_wake")

    async def give_back() -> set[int]:
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as ac:
            stale = [(ids[0], got[0].fence + 1000)]  # a fence that is not ours: refused
            assert await release(ac, "forklift", stale) == set()
            return await release(ac, "forklift", [(j.id, j.fence) for j in got])

    assert asyncio.run(give_back()) == set(ids)
    rows = conn.execute(
        "SELECT id, state, attempt, worker_id, errors, finished_at IS NOT NULL"
        " FROM forklift.jobs ORDER BY id"
    ).fetchall()
    assert rows == [
        (ids[0], "available", 0, None, [], False),
        (ids[1], "available", 0, None, [], False),
        (ids[2], "cancelled", 0, None, [], True),
    ]
    assert [n.payload for n in conn.notifies(timeout=5, stop_after=1)] == ["open"]


def test_the_claim_session_plans_once_and_reads_jobs_only_through_indexes(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    conn.execute("INSERT INTO forklift.queues (name, concurrency) VALUES ('lim', 5)")

    def generic_plans(session: psycopg.Connection[Any]) -> list[str]:
        plans = []
        for sql in (CLAIM_FREE_SQL, CLAIM_SQL):
            text = render(sql, "forklift")
            for k, name in enumerate(("n", "start", "queues", "kinds", "w", "lease"), start=1):
                text = text.replace(f"%({name})s", f"${k}")
            rows = session.execute("EXPLAIN (GENERIC_PLAN) " + text).fetchall()
            plans.append("\n".join(r[0] for r in rows))
        return plans

    async def claims(rounds: int) -> list[tuple[int, int, str]]:
        async with await psycopg.AsyncConnection.connect(**connect_kwargs(dsn, "claim", "w")) as ac:
            for _ in range(rounds):
                for locked in (False, True):
                    await claim_batch(ac, "forklift", worker_id="w", queues=["open", "lim"],
                                      n=3, lease=30.0, locked=locked, kinds=["perf.noop"])
            cur = await ac.execute("SELECT generic_plans, custom_plans, statement"
                                   " FROM pg_prepared_statements")
            return list(await cur.fetchall())

    with psycopg.Connection.connect(**connect_kwargs(dsn, "claim", "w")) as session:
        empty = generic_plans(session)
        _insert(conn, "open", 20_000)
        _insert(conn, "lim", 2_000)
        conn.execute("ANALYZE forklift.jobs")
        session.execute("DISCARD PLANS")
        full = generic_plans(session)
    for plan in empty + full:
        assert "Seq Scan on jobs" not in plan, plan
        assert "jobs_claim_idx" in plan and "jobs_pkey" in plan, plan
    prepared = asyncio.run(claims(8))
    claim_plans = [(g, c) for g, c, text in prepared if "WITH q AS" in text]
    assert len(claim_plans) == 2 and all(g > 0 and c == 0 for g, c in claim_plans), prepared


def test_the_completions_only_statement_writes_what_the_general_one_writes(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    _insert(conn, "open", 4)
    conn.execute("UPDATE forklift.jobs SET progress = '{\"done\": 1}', partial = '[1]'")

    async def settle_both() -> list[dict[int, str]]:
        got, _ = await _claim(dsn, 4, locked=False, queues=["open"])
        done = [settle.Outcome(j.id, j.fence, "completed", result='{"r": 1}') for j in got]
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as ac:
            fast = await settle.write(ac, "forklift", done[:2])  # all plain: COMPLETE_SQL
            failed = settle.Outcome(got[0].id, got[0].fence, "dead", error={"code": "x"})
            general = await settle.write(ac, "forklift", [*done[2:], failed])  # SETTLE_SQL
            return [fast, general]

    fast, general = asyncio.run(settle_both())
    assert list(fast.values()) == ["completed"] * 2 and list(general.values()) == ["completed"] * 2
    rows = conn.execute(
        "SELECT state, result, partial, progress, errors, attempt, finished_at IS NOT NULL,"
        " lease_expires_at FROM forklift.jobs ORDER BY id"
    ).fetchall()
    assert rows[0] == rows[1] == rows[2] == rows[3] == (
        "completed", {"r": 1}, None, {"done": 1}, [], 1, True, None)


# -- the local buffer ---------------------------------------------------------------------------
def _buffered(conn: psycopg.Connection[Any]) -> list[int]:
    """Jobs this test's worker claimed but has not started (running in the table only)."""
    rows = conn.execute(
        "SELECT id FROM forklift.jobs WHERE state = 'running' ORDER BY id"
    ).fetchall()
    started = set(perf.STARTED)
    return [r[0] for r in rows if r[0] not in started]


def _hold_with_a_buffer(conn: psycopg.Connection[Any]) -> tuple[int, list[int]]:
    """Fast jobs first (so the worker buffers), then one that holds its only slot, then more."""
    perf.noop.enqueue_many([{"n": i} for i in range(600)])
    held = perf.hold.enqueue({"n": 0}, priority=1).id
    later = perf.noop.enqueue_many([{"n": i} for i in range(300)], priority=2)
    return held, later


def test_fast_jobs_are_claimed_more_than_free_slots_at_a_time(
    app: Forklift, conn: psycopg.Connection[Any]
) -> None:
    ids = perf.noop.enqueue_many([{"n": i} for i in range(2000)])
    with basic.running_worker(app, concurrency=2):
        wait_until(lambda: len(perf.STARTED) == len(ids), timeout=60,
                   message=lambda: f"{len(perf.STARTED)} of {len(ids)} started")
    biggest = conn.execute(
        "SELECT max(n) FROM (SELECT count(*) AS n FROM forklift.jobs GROUP BY attempted_at) c"
    ).fetchone()
    assert biggest is not None and biggest[0] > 2
    assert sorted(perf.STARTED) == ids  # each exactly once
    states = conn.execute("SELECT DISTINCT state, attempt FROM forklift.jobs").fetchall()
    assert states == [("completed", 1)]


def test_a_drain_gives_back_claimed_jobs_that_had_not_started(
    app: Forklift, conn: psycopg.Connection[Any]
) -> None:
    held, later = _hold_with_a_buffer(conn)
    with basic.running_worker(app, concurrency=1, drain_timeout=0.2):
        wait_until(lambda: held in perf.STARTED, timeout=60, message="the holding job started")
        buffered = wait_until(lambda: _buffered(conn), timeout=30, message="jobs were buffered")
    assert set(buffered) <= set(later)
    rows = conn.execute(
        "SELECT id, state, attempt, worker_id, errors FROM forklift.jobs WHERE id = ANY(%s)",
        (later,),
    ).fetchall()
    started = set(perf.STARTED)
    for job_id, state, attempt, worker, errors in rows:
        if job_id in started:
            assert (state, attempt) == ("completed", 1)
        else:
            assert (state, attempt, worker, errors) == ("available", 0, None, [])
    assert {r[0] for r in rows if r[1] == "available"} >= set(buffered)
    # The held job was interrupted by the drain: released with its attempt refunded.
    state, attempt = conn.execute(
        "SELECT state, attempt FROM forklift.jobs WHERE id = %s", (held,)
    ).fetchone() or ("", -1)
    assert (state, attempt) == ("retryable", 0)


def test_a_buffered_job_cancelled_by_an_operator_never_starts(
    app: Forklift, dsn: str, conn: psycopg.Connection[Any]
) -> None:
    held, _ = _hold_with_a_buffer(conn)
    with basic.running_worker(app, concurrency=1):
        wait_until(lambda: held in perf.STARTED, timeout=60, message="the holding job started")
        victim = wait_until(lambda: _buffered(conn), timeout=30, message="jobs were buffered")[-1]
        ops_conn = psycopg.Connection.connect(dsn, autocommit=True)
        with ops_conn:
            actions.act(ops_conn, OpsContext(schema="forklift", actor="tester"), "cancel", victim)

        def cancelled() -> bool:
            row = conn.execute("SELECT state FROM forklift.jobs WHERE id = %s", (victim,)).fetchone()
            return row is not None and row[0] == "cancelled"

        wait_until(cancelled, timeout=30, message="the buffered job ended cancelled")
        perf.GATE.set()
        wait_until(lambda: not conn.execute(
            "SELECT 1 FROM forklift.jobs WHERE state IN ('available', 'running') LIMIT 1"
        ).fetchone(), timeout=60, message="every other job finished")
    assert victim not in perf.STARTED
    errors = conn.execute("SELECT errors FROM forklift.jobs WHERE id = %s", (victim,)).fetchone()
    assert errors is not None and [e["code"] for e in errors[0]] == ["cancelled"]


def test_a_buffered_job_whose_lease_is_lost_is_not_started(
    app: Forklift, conn: psycopg.Connection[Any]
) -> None:
    held, _ = _hold_with_a_buffer(conn)
    with basic.running_worker(app, concurrency=1, lease=3.0) as worker:
        wait_until(lambda: held in perf.STARTED, timeout=60, message="the holding job started")
        victim = wait_until(lambda: _buffered(conn), timeout=30, message="jobs were buffered")[-1]
        # Another holder took it (as after a rescue and a new claim): a newer fence.
        conn.execute(
            "UPDATE forklift.jobs SET fence = nextval('forklift.fence_seq'), worker_id = 'other'"
            " WHERE id = %s", (victim,),
        )
        wait_until(lambda: worker.stats.lease_lost >= 1, timeout=30,
                   message="the heartbeat noticed the lost lease")
        perf.GATE.set()
        wait_until(lambda: not conn.execute(
            "SELECT 1 FROM forklift.jobs WHERE state IN ('available', 'running')"
            " AND id <> %s LIMIT 1", (victim,)
        ).fetchone(), timeout=60, message="every other job finished")
    assert victim not in perf.STARTED
    row = conn.execute("SELECT state, worker_id FROM forklift.jobs WHERE id = %s", (victim,)).fetchone()
    assert row == ("running", "other")  # untouched: the other holder's to finish


def test_a_stalled_flush_holds_the_claims_back(
    app: Forklift, conn: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from forklift._worker.producer import FLUSH_MAX

    gate = threading.Event()
    real = settle.write

    async def stalled(*args: Any, **kwargs: Any) -> dict[int, str]:
        await asyncio.to_thread(gate.wait, 60)
        return await real(*args, **kwargs)

    monkeypatch.setattr(settle, "write", stalled)
    ids = perf.noop.enqueue_many([{"n": i} for i in range(FLUSH_MAX * 3)])
    try:
        with basic.running_worker(app, concurrency=2, prefetch_max=50) as worker:
            wait_until(lambda: len(perf.STARTED) >= FLUSH_MAX, timeout=60,
                       message=lambda: f"only {len(perf.STARTED)} started")
            wait_until(lambda: worker.in_flight == 0 and not worker.producer.waiting, timeout=30,
                       message="the worker settled down to wait for its flush")
            # Claims stopped once FLUSH_MAX outcomes were unwritten; the last claim could add
            # at most the slots and the buffer.
            assert len(perf.STARTED) <= FLUSH_MAX + 2 + 50
            gate.set()
            wait_until(lambda: len(perf.STARTED) == len(ids), timeout=60,
                       message=lambda: f"{len(perf.STARTED)} of {len(ids)} started")
    finally:
        gate.set()
    rows = conn.execute("SELECT state, count(*) FROM forklift.jobs GROUP BY state").fetchall()
    assert rows == [("completed", len(ids))]


# -- recording buffered starts ------------------------------------------------------------------
def _running(conn: psycopg.Connection[Any], queue: str, count: int) -> list[tuple[int, int]]:
    """Jobs held by a worker whose starts are not recorded yet: (id, fence)."""
    ids = _insert(conn, queue, count)
    conn.execute(
        "UPDATE forklift.jobs SET state = 'running', attempt = 1, worker_id = 'w-test',"
        " fence = id, lease_expires_at = now() + interval '30 seconds', attempted_at = NULL"
        " WHERE id = ANY(%s)", (ids,))
    return [(i, i) for i in ids]


def test_recording_starts_skips_a_locked_row_instead_of_waiting(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    # Waiting for the row lock of the worker's own settle in flight could deadlock with it.
    (a, fa), (b, fb) = _running(conn, "open", 2)

    async def record(starts: list[tuple[int, int, float]]) -> set[int]:
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as ac:
            await ac.execute("SET statement_timeout = '5s'")
            return await leases.record_starts(ac, "forklift", starts)

    with psycopg.connect(dsn) as other:
        other.execute("SELECT 1 FROM forklift.jobs WHERE id = %s FOR UPDATE", (b,))
        assert asyncio.run(record([(a, fa, 1.0), (b, fb, 1.0)])) == {fa}
    assert asyncio.run(record([(b, fb, 1.0)])) == {fb}  # the lock is gone: recorded now
    stamped = conn.execute("SELECT count(*) FROM forklift.jobs WHERE attempted_at IS NOT NULL"
                           " AND id = ANY(%s)", ([a, b],)).fetchone()
    assert stamped == (2,)


# -- decoding a claimed row ---------------------------------------------------------------------
def test_a_claimed_row_decodes_to_the_same_frozen_job_as_the_constructor_builds() -> None:
    # from_row fills the instance's __dict__ at once instead of a setattr per field: every
    # field must be there (one added to the dataclass must be added there too), and frozen.
    at = datetime.now(UTC)
    row = (7, "default", "perf.noop", '{"n": 1}', 1, 25, 9, None, '{}', None, 0, at, False,
           "00-ab-cd-01", 0.5, "acme", "user:1", None, 2, 3)
    job = Claimed.from_row(row)
    assert job == Claimed(7, "default", "perf.noop", {"n": 1}, 1, 25, 9, None, {}, None, 0, at,
                          started=False, traceparent="00-ab-cd-01", lag=0.5, tenant="acme",
                          enqueued_by="user:1", payload_version=2, weight=3)
    assert set(vars(job)) == {f.name for f in dataclasses.fields(Claimed)}
    with pytest.raises(dataclasses.FrozenInstanceError):
        job.fence = 10  # type: ignore[misc]
    meta = Claimed.from_row((*row[:8], '{"tenant": "a"}', *row[9:])).meta
    assert meta == {"tenant": "a"}
    broken = Claimed.from_row((*row[:3], "[1" + "0" * 5000 + "]", *row[4:]))
    assert broken.args is None and broken.undecodable


def test_a_heartbeat_skips_a_locked_row_and_reports_it_held_not_renewed(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    # Waiting for the row lock of the worker's own settle in flight could deadlock with it.
    (a, fa), (b, fb) = _running(conn, "open", 2)
    conn.execute("UPDATE forklift.jobs SET cancel_requested_at = now() WHERE id = %s", (a,))

    async def beat() -> dict[int, bool | None]:
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as ac:
            await ac.execute("SET statement_timeout = '5s'")
            return await leases.renew(ac, "forklift", {fa: a, fb: b, fb + 1000: b}, 60.0)

    def expiry(job_id: int) -> Any:
        return conn.execute("SELECT lease_expires_at FROM forklift.jobs WHERE id = %s",
                            (job_id,)).fetchone()

    before = expiry(b)
    with psycopg.connect(dsn) as other:
        other.execute("SELECT 1 FROM forklift.jobs WHERE id = %s FOR UPDATE", (b,))
        # a: renewed, its cancel request reported; b: locked, held but not renewed; a fence
        # that is not the row's: lost.
        assert asyncio.run(beat()) == {fa: True, fb: None}
    assert expiry(b) == before
    assert asyncio.run(beat()) == {fa: True, fb: False}
    assert expiry(b) > before


# -- the buffer's size: the completion rate it is read from ------------------------------------
def test_a_burst_that_ends_inside_one_window_counts_at_once() -> None:
    """Thirty instant jobs that all end within 50 ms of a reading, the worker then idle: the
    next claim must see a rate (and keep a buffer), not the zero of the last closed window."""
    from forklift._worker.producer import CompletionRate

    rate = CompletionRate()
    assert rate.observe(100.0, 0) == 0.0  # the first reading opens a window
    assert rate.observe(100.04, 30) == 30 / CompletionRate.WINDOW  # before it closes
    assert rate.observe(100.045, 30) == 30 / CompletionRate.WINDOW  # nothing new: kept
    # The window closes over the same 30 jobs: a slower reading halves the gap, no more.
    slower = 30 / 0.06
    assert rate.observe(100.06, 30) == pytest.approx(0.5 * (30 / 0.05 + slower))
    # Idle windows decay it; a faster window is taken at once.
    idle = rate.observe(101.06, 30)
    assert 0 < idle < slower
    assert rate.observe(101.16, 530) == pytest.approx(5000.0)


# -- runners: attempts that never suspend share a task, never a context ---------------------------
def test_jobs_run_back_to_back_in_one_task_never_see_each_others_context(
    app: Forklift, conn: psycopg.Connection[Any]
) -> None:
    ids = perf.context.enqueue_many([{"n": i} for i in range(500)])
    with basic.running_worker(app, concurrency=4):
        wait_until(lambda: len(perf.SEEN) == len(ids), timeout=60,
                   message=lambda: f"{len(perf.SEEN)} of {len(ids)} ran")
    assert set(perf.SEEN) == set(ids)
    assert set(perf.SEEN.values()) == {None}  # no job saw what an earlier one set
    states = conn.execute("SELECT DISTINCT state, attempt FROM forklift.jobs").fetchall()
    assert states == [("completed", 1)]


def test_the_event_loop_turns_every_burst_of_attempts_however_many_runners_run_them(
    app: Forklift
) -> None:
    """Instant jobs run back to back in runners, at most BURST in one turn of the event loop
    by all runners together: outcome writes, claims and heartbeats get their turn. Each of ten
    runners counting only its own ran up to 640 in one turn."""
    from forklift._worker.runner import BURST

    turns = [0]
    ended: dict[int, int] = {}  # turn of the event loop -> attempts that ended in it

    def count(rec: Any, outcome: settle.Outcome) -> None:
        ended[turns[0]] = ended.get(turns[0], 0) + 1

    total = 3000
    with basic.running_worker(app, concurrency=10) as worker:
        loop = worker._loop
        assert loop is not None

        def tick() -> None:  # once per turn: a callback that schedules itself again
            turns[0] += 1
            if len(perf.SEEN) < total:
                loop.call_soon(tick)

        worker.attempts.hooks.on_settle.append(count)
        loop.call_soon_threadsafe(tick)
        ids = perf.context.enqueue_many([{"n": i} for i in range(total)])
        wait_until(lambda: len(perf.SEEN) == len(ids), timeout=60,
                   message=lambda: f"{len(perf.SEEN)} of {len(ids)} ran")
    assert sum(ended.values()) == total
    assert max(ended.values()) <= BURST, sorted(ended.values())[-5:]


def test_asyncio_timeout_inside_a_handler_cancels_only_its_own_await(
    app: Forklift, conn: psycopg.Connection[Any]
) -> None:
    """Between instant jobs (which share a runner) the timing-out ones: each is cancelled by
    its own ``asyncio.timeout``, in a real task, and completes; the instant jobs complete too."""
    first = perf.context.enqueue_many([{"n": i} for i in range(50)])
    timed = perf.timed.enqueue_many([{"n": i} for i in range(20)])
    last = perf.context.enqueue_many([{"n": i} for i in range(50)])
    with basic.running_worker(app, concurrency=3):
        wait_until(lambda: len(perf.TIMED) == len(timed) and len(perf.SEEN) == 100, timeout=60,
                   message=lambda: f"{len(perf.TIMED)} timed, {len(perf.SEEN)} instant")
    assert {job for job, _, _ in perf.TIMED} == set(timed)
    assert all(task is not None and out for _, task, out in perf.TIMED)
    # A runner retires after an attempt that suspended: no two timed jobs shared a task.
    assert len({id(task) for _, task, _ in perf.TIMED}) == len(timed)
    rows = conn.execute(
        "SELECT state, attempt, count(*) FROM forklift.jobs GROUP BY 1, 2").fetchall()
    assert rows == [("completed", 1, len(first) + len(timed) + len(last))]


def test_a_runner_outlives_an_error_in_the_bookkeeping_after_an_attempt(
    app: Forklift, conn: psycopg.Connection[Any]
) -> None:
    """A settle hook that raises once (an integration's bug) costs that job its outcome; the
    runner it ran in goes on, and every later job still runs and completes."""
    raised: list[int] = []

    def broken(rec: Any, outcome: settle.Outcome) -> None:
        if not raised:
            raised.append(rec.job.id)
            raise RuntimeError("a broken hook")

    with basic.running_worker(app, concurrency=1, lease=30.0) as worker:
        worker.attempts.hooks.on_settle.append(broken)
        ids = perf.context.enqueue_many([{"n": i} for i in range(200)])
        wait_until(lambda: len(perf.SEEN) == len(ids), timeout=60,
                   message=lambda: f"{len(perf.SEEN)} of {len(ids)} ran")
        rest = [i for i in ids if i not in raised]
        wait_until(lambda: conn.execute(
            "SELECT count(*) FROM forklift.jobs WHERE id = ANY(%s) AND state = 'completed'",
            (rest,)).fetchone() == (len(rest),), timeout=30, message="the rest completed")
    assert len(raised) == 1
