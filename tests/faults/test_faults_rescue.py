"""Crash safety and rescue: SIGKILLed workers lose nothing; the leader role moves; the rescue
statement is guarded against every race it can meet."""

from __future__ import annotations

import asyncio
import signal
from typing import Any

import psycopg
import pytest
from apps import faults
from apps.faults import all_in, registered
from helpers import wait_until

from forklift._worker import settle
from forklift._worker.maintenance import rescuer as leader

pytestmark = pytest.mark.slow
db, procs = faults.db, faults.procs  # fixtures


def test_sigkilled_worker_jobs_are_rescued_and_finished_elsewhere(
    db: psycopg.Connection[Any], procs: faults.Procs
) -> None:
    a = procs.start(concurrency=4, lease=2.0)
    a_id = registered(db, a)
    wait_until(lambda: leader_of(db) == a_id, timeout=30, message="A never led")
    # Attempt 1 holds forever; attempt 2 (after the rescue) returns at once.
    held = [faults.enqueue(db, "faults.hold", {"hold_attempts": 1}) for _ in range(3)]
    last = faults.enqueue(db, "faults.hold", {"hold_attempts": 1}, max_attempts=1)
    ids = [*held, last]
    wait_until(lambda: all(faults.job(db, i)["worker_id"] == a_id for i in ids)
               and all_in(db, ids, "running"), timeout=30, message="A did not claim all four")

    b = procs.start(concurrency=4, lease=2.0)
    b_id = registered(db, b)
    a.signal(signal.SIGKILL)

    wait_until(lambda: leader_of(db) == b_id, timeout=30, message="leadership did not move")
    wait_until(lambda: all_in(db, held, "completed") and all_in(db, [last], "dead"),
               timeout=30, message=lambda: f"not rescued: {faults.states(db, ids)}")
    for i in held:
        j = faults.job(db, i)
        assert j["attempt"] == 2, j
        assert [e["code"] for e in j["errors"]] == ["lease_expired"]
        assert j["errors"][0]["worker"] == a_id and j["errors"][0]["attempt"] == 1
        assert j["result"]["worker"] == b_id
        assert [(w, what) for _, w, what in faults.notes(db, i)] == [(a_id, "start"),
                                                                     (b_id, "start")]
    dead = faults.job(db, last)
    assert dead["attempt"] == 1 and dead["finished_at"] is not None
    assert [e["code"] for e in dead["errors"]] == ["lease_expired"]
    assert a.popen.wait(10) == -signal.SIGKILL
    assert b.stop() == 0


def leader_of(conn: psycopg.Connection[Any]) -> str | None:
    row = conn.execute(
        "SELECT worker_id FROM forklift.leader WHERE name = 'leader' AND expires_at > now()"
    ).fetchone()
    return str(row[0]) if row else None


# -- the rescue statement against the races it can meet -------------------------------------------
def _running(conn: psycopg.Connection[Any], *, expired: bool, attempt: int = 1,
             max_attempts: int = 5, cancel: bool = False) -> tuple[int, int]:
    row = conn.execute(
        """
        INSERT INTO forklift.jobs (kind, state, attempt, max_attempts, worker_id, fence,
                                   lease_expires_at, attempted_at, cancel_requested_at)
        VALUES ('faults.quick', 'running', %s, %s, 'w-1', nextval('forklift.fence_seq'),
                now() + CASE WHEN %s THEN interval '-1 second' ELSE interval '1 minute' END,
                now(), CASE WHEN %s THEN now() END)
        RETURNING id, fence
        """,
        (attempt, max_attempts, expired, cancel),
    ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def _rescue(dsn: str) -> list[tuple[int, str]]:
    async def go() -> list[tuple[int, str]]:
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as c:
            return [(r.id, r.state) for r in await leader.rescue(c, "forklift")]

    return asyncio.run(go())


def _settle(dsn: str, outcome: settle.Outcome) -> dict[int, str]:
    async def go() -> dict[int, str]:
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as c:
            return await settle.write(c, "forklift", [outcome])

    return asyncio.run(go())


def test_rescue_takes_only_expired_leases_and_counts_the_attempt(
    db: psycopg.Connection[Any], dsn: str
) -> None:
    live = _running(db, expired=False)
    expired = _running(db, expired=True, attempt=2)
    exhausted = _running(db, expired=True, attempt=5, max_attempts=5)
    cancelled = _running(db, expired=True, cancel=True)
    got = dict(_rescue(dsn))
    assert got == {expired[0]: "retryable", exhausted[0]: "dead", cancelled[0]: "cancelled"}
    assert faults.job(db, live[0])["state"] == "running"
    j = faults.job(db, expired[0])
    assert j["attempt"] == 2 and j["lease_expires_at"] is None
    assert [(e["code"], e["attempt"], e["worker"]) for e in j["errors"]] == [
        ("lease_expired", 2, "w-1")
    ]
    assert j["errors"][0]["message"].startswith("the lease of worker w-1 expired at 20")
    assert faults.job(db, exhausted[0])["finished_at"] is not None
    assert _rescue(dsn) == []  # nothing is rescued twice


def test_rescue_and_a_late_ack_never_both_win(db: psycopg.Connection[Any], dsn: str) -> None:
    # Rescue first: the worker's late outcome is refused and changes nothing.
    job_id, fence = _running(db, expired=True)
    assert dict(_rescue(dsn)) == {job_id: "retryable"}
    before = faults.job(db, job_id)
    assert _settle(dsn, settle.Outcome(job_id, fence, "completed", result='"late"')) == {}
    assert faults.job(db, job_id) == before

    # The ack holds the row (its transaction still open): the rescue skips it, and once the ack
    # commits there is nothing left to rescue.
    job_id, fence = _running(db, expired=True)
    with psycopg.connect(dsn) as acking:
        acking.execute(
            "UPDATE forklift.jobs SET state = 'completed', finished_at = now(),"
            " lease_expires_at = NULL WHERE id = %s AND fence = %s AND state = 'running'",
            (job_id, fence),
        )
        assert _rescue(dsn) == []
        acking.commit()
    assert _rescue(dsn) == []
    j = faults.job(db, job_id)
    assert j["state"] == "completed" and j["errors"] == []
