"""The worker's edges that need no process to die: claim order of the local buffer,
pauses and limits against buffered jobs, undecodable rows, the signal deciding an outcome,
rescue in bounded batches, and the history of exited workers."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from apps import faults
from apps.basic import running_worker
from helpers import wait_until

from forklift import Forklift
from forklift._db.connections import aconnect
from forklift._worker.maintenance import rescuer, workers
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


def _warm(conn: psycopg.Connection[Any], queue: str = "default", n: int = 30) -> None:
    """Quick jobs, so the worker learns a completion rate and keeps a local buffer."""
    ids = [faults.enqueue(conn, "faults.quick", {}, queue=queue) for _ in range(n)]
    wait_until(lambda: faults.all_in(conn, ids, "completed"), timeout=30, message="not warm")


def _starts(conn: psycopg.Connection[Any], ids: list[int]) -> list[int]:
    rows = conn.execute("SELECT job_id FROM public.notes WHERE job_id = ANY(%s) AND what = 'start'"
                        " ORDER BY id", (ids,)).fetchall()
    return [r[0] for r in rows]


def _buffered(conn: psycopg.Connection[Any], ids: list[int]) -> bool:
    """Claimed (running) and not started: held in the worker's local buffer."""
    n = conn.execute("SELECT count(*) FROM forklift.jobs WHERE id = ANY(%s) AND state = 'running'",
                     (ids,)).fetchone()
    return n == (len(ids),) and not _starts(conn, ids)


# -- the buffer------ -----------------------------------------------------------------------------
def test_buffered_jobs_start_in_claim_order(app: Forklift, conn: psycopg.Connection[Any]) -> None:
    with running_worker(app, concurrency=1, **PREFETCH):
        _warm(conn)
        with conn.transaction():
            first = faults.enqueue(conn, "faults.hold", {"gate": "go"}, priority=-1)
            # Inserted late-first: id order is the reverse of run_at order.
            late = faults.enqueue(conn, "faults.hold", {"gate": "open"})
            mid = faults.enqueue(conn, "faults.hold", {"gate": "open"})
            early = faults.enqueue(conn, "faults.hold", {"gate": "open"})
            conn.execute("UPDATE forklift.jobs SET run_at = now() - make_interval(secs => s)"
                         " FROM unnest(%s::bigint[], %s::int[]) AS x(id, s)"
                         " WHERE jobs.id = x.id", ([late, mid, early], [10, 20, 30]))
        ids = [late, mid, early]
        wait_until(lambda: _buffered(conn, ids), timeout=30, message="not buffered")
        faults.open_gate(conn, "open")
        faults.open_gate(conn, "go")
        wait_until(lambda: faults.all_in(conn, [first, *ids], "completed"), timeout=30)
    assert _starts(conn, [first, *ids]) == [first, early, mid, late]


def test_a_pause_gives_buffered_jobs_back(
    app: Forklift, conn: psycopg.Connection[Any], dsn: str
) -> None:
    with running_worker(app, concurrency=1, **PREFETCH), Operator(dsn) as op:
        _warm(conn)
        with conn.transaction():
            blocker = faults.enqueue(conn, "faults.hold", {"gate": "go"}, priority=-1)
            ids = [faults.enqueue(conn, "faults.hold", {"gate": "open"}) for _ in range(3)]
        wait_until(lambda: _buffered(conn, ids), timeout=30, message="not buffered")
        op.pause("default", reason="test")
        wait_until(lambda: faults.all_in(conn, ids, "available"), timeout=30,
                   message=lambda: f"not given back: {faults.states(conn, ids)}")
        faults.open_gate(conn, "open")
        faults.open_gate(conn, "go")
        wait_until(lambda: faults.all_in(conn, [blocker], "completed"), timeout=30)
        assert _starts(conn, ids) == []  # none started while the queue was paused
        assert [faults.job(conn, i)["attempt"] for i in ids] == [0, 0, 0]
        op.resume("default")
        wait_until(lambda: faults.all_in(conn, ids, "completed"), timeout=30)


def test_a_limited_queue_gets_no_buffer_so_an_idle_worker_takes_its_share(
    app: Forklift, conn: psycopg.Connection[Any], dsn: str
) -> None:
    with Operator(dsn) as op:
        op.set_concurrency("lim", 2, create=True)
    with running_worker(app, concurrency=1, queues=["lim"], **PREFETCH) as a:
        _warm(conn, "lim")
        ids = [faults.enqueue(conn, "faults.hold", {"gate": "go"}, queue="lim") for _ in range(3)]
        wait_until(lambda: len(_starts(conn, ids)) == 1, timeout=30)
        with running_worker(app, concurrency=1, queues=["lim"]) as b:
            # B's slot is free and the limit has room: it runs the second job, A buffers none.
            wait_until(lambda: len(_starts(conn, ids)) == 2, timeout=30,
                       message=lambda: f"states {faults.states(conn, ids)}")
            holders = {faults.job(conn, i)["worker_id"] for i in ids
                       if faults.job(conn, i)["state"] == "running"}
            assert holders == {a.id, b.id}
            faults.open_gate(conn, "go")
            wait_until(lambda: faults.all_in(conn, ids, "completed"), timeout=30)


# -- a row the worker cannot decode ---------------------------------------------------------------
def test_an_undecodable_row_fails_alone(app: Forklift, conn: psycopg.Connection[Any]) -> None:
    bad = conn.execute(
        "INSERT INTO forklift.jobs (kind, args) VALUES"
        " ('faults.quick', ('{\"n\": ' || repeat('7', 5000) || '}')::jsonb) RETURNING id"
    ).fetchone()[0]  # type: ignore[index]
    with conn.transaction():
        mates = [faults.enqueue(conn, "faults.quick", {}) for _ in range(4)]
    with running_worker(app, concurrency=8) as worker:
        wait_until(lambda: faults.all_in(conn, [bad, *mates], "completed", "dead"), timeout=30,
                   message=lambda: f"{faults.states(conn, [bad, *mates])}")
        after = faults.enqueue(conn, "faults.quick", {})
        wait_until(lambda: faults.all_in(conn, [after], "completed"), timeout=30)
        assert worker.supervisor.restarts == {}
    state, errors = conn.execute("SELECT state, errors FROM forklift.jobs WHERE id = %s",
                                 (bad,)).fetchone()  # type: ignore[misc]
    assert (state, [e["code"] for e in errors]) == ("dead", ["invalid_payload"])
    assert "cannot be decoded" in errors[0]["message"]
    assert faults.all_in(conn, mates, "completed")
    assert [faults.job(conn, i)["attempt"] for i in mates] == [1, 1, 1, 1]


# -- the signal decides ---------------------------------------------------------------------------
def test_a_handler_that_returns_after_its_timeout_fails_timeout(
    app: Forklift, conn: psycopg.Connection[Any]
) -> None:
    with running_worker(app):
        job_id = faults.enqueue(conn, "faults.coop_timeout", {"gate": "never"})
        wait_until(lambda: faults.job(conn, job_id)["state"] == "retryable", timeout=30)
    job = faults.job(conn, job_id)
    assert [e["code"] for e in job["errors"]] == ["timeout"]
    assert job["partial"]["stopped"] is True and job["result"] is None


def test_raise_if_cancelled_ends_cancelled_when_an_operator_cancels(
    app: Forklift, conn: psycopg.Connection[Any], dsn: str
) -> None:
    with running_worker(app), Operator(dsn) as op:
        job_id = faults.enqueue(conn, "faults.coop", {"gate": "never", "how": "raise"})
        wait_until(lambda: len(faults.notes(conn, job_id)) == 1, timeout=30)
        op.cancel(job_id)
        wait_until(lambda: faults.job(conn, job_id)["state"] == "cancelled", timeout=30)
    job = faults.job(conn, job_id)
    assert [e["code"] for e in job["errors"]] == ["cancelled"]
    assert [w for _, _, w in faults.notes(conn, job_id)] == ["start", "saw-cancel:cancelled"]


# -- the rescue statement -------------------------------------------------------------------------
EXPIRED = """
INSERT INTO forklift.jobs (kind, state, attempt, lost, worker_id, fence, lease_expires_at,
                           attempted_at, retry)
SELECT 'faults.quick', 'running', 1, %s, 'gone', nextval('forklift.fence_seq'),
       now() - interval '1 second', CASE WHEN %s THEN now() END,
       '{"kind": "fixed", "base": 60, "jitter": "none"}'
FROM generate_series(1, %s) RETURNING id
"""


def _rescue(dsn: str, **options: Any) -> list[tuple[int, str]]:
    async def go() -> list[tuple[int, str]]:
        c = await aconnect(dsn, "rescue")
        try:
            return [(r.id, r.state) for r in await rescuer.rescue(c, "forklift", **options)]
        finally:
            await c.close()

    return asyncio.run(go())


def test_rescue_works_in_bounded_batches(dsn: str, conn: psycopg.Connection[Any]) -> None:
    conn.execute(EXPIRED, (0, True, 5))
    assert len(_rescue(dsn, batch=2, batches=1)) == 2  # one statement, LIMIT 2
    assert len(_rescue(dsn, batch=2, batches=10)) == 3  # the rest, two statements
    rows = conn.execute("SELECT state, attempt, lost, run_at > now() + interval '59 seconds'"
                        " FROM forklift.jobs").fetchall()
    assert rows == [("retryable", 1, 1, True)] * 5  # charged, counted, by the row's backoff


def test_rescue_refunds_an_unstarted_attempt_once_in_a_row(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    fresh = conn.execute(EXPIRED, (0, False, 1)).fetchone()[0]  # type: ignore[index]
    again = conn.execute(EXPIRED, (1, False, 1)).fetchone()[0]  # type: ignore[index]
    _rescue(dsn)
    got = {r[0]: r[1:] for r in conn.execute(
        "SELECT id, attempt, lost, run_at <= now() FROM forklift.jobs").fetchall()}
    # Never started: attempt back, no backoff. Unrecorded twice in a row: charged (a job that
    # kills its process before its start is recorded must not loop for ever).
    assert got[fresh] == (0, 1, True)
    assert got[again] == (1, 2, False)


# -- exited workers stay listed -------------------------------------------------------------------
def test_a_silent_worker_is_marked_killed_and_history_is_pruned_after_its_window(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    conn.execute(
        "INSERT INTO forklift.workers (id, host, pid, queues, slots, heartbeat_at, kinds)"
        " VALUES ('w-gone', 'h', 1, '{default}', 4, now() - interval '5 minutes', '{}'),"
        "        ('w-live', 'h', 2, '{default}', 4, now(), '{\"faults.quick\": {}}')")

    async def prune(history: float) -> None:
        c = await aconnect(dsn, "prune-workers")
        try:
            await workers.prune_workers(c, "forklift", 60.0, history)
        finally:
            await c.close()

    asyncio.run(prune(3600.0))
    with Operator(dsn) as op:
        listed = {w.id: w for w in op.workers()}
        gone = listed["w-gone"]
        assert (gone.state, gone.exit_reason, gone.live, gone.stale) == (
            "exited", "killed", False, False)
        assert listed["w-live"].live and listed["w-live"].kinds == ["faults.quick"]
        assert gone.to_json()["exit_reason"] == "killed"
        assert [w.id for w in op.stats().workers] == ["w-live"]
    asyncio.run(prune(0.0))
    with Operator(dsn) as op:
        assert [w.id for w in op.workers()] == ["w-live"]
