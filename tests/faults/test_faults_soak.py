"""The soak: several worker processes, a few thousand jobs with random failures, random SIGKILLs
and restarts, workers paused past their leases (SIGSTOP/SIGCONT), one graceful restart. Afterwards every job is in exactly one terminal state,
and the ledger the handlers wrote shows that no job ever ran under two valid leases at once."""

from __future__ import annotations

import random
import signal
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from apps import faults
from apps.faults import registered
from helpers import wait_until

pytestmark = pytest.mark.slow
db, procs = faults.db, faults.procs  # fixtures

JOBS = 1_500  # to begin with; topped up so that every chaos event meets work in flight
WORKERS = 4
EVERY = 150  # finished jobs between two chaos events


def terminal(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute(
        "SELECT count(*) FROM forklift.jobs WHERE state IN ('completed', 'dead', 'cancelled')"
    ).fetchone()
    return int(row[0]) if row else 0


def rescued(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute(
        "SELECT count(*) FROM forklift.jobs, jsonb_array_elements(errors) e"
        " WHERE e->>'code' = 'lease_expired'"
    ).fetchone()
    return int(row[0]) if row else 0


def _holds(conn: psycopg.Connection[Any], w: faults.WorkerProc) -> bool:
    worker_id = w.worker_id(conn)
    row = conn.execute("SELECT count(*) FROM forklift.jobs WHERE state = 'running'"
                       " AND worker_id = %s AND lease_expires_at > now()", (worker_id,)).fetchone()
    return bool(row and row[0])


def _frozen_state(conn: psycopg.Connection[Any], w: faults.WorkerProc) -> str:
    """What a failed rescue wait saw: the victim's running rows, the leader, open transactions."""
    worker_id = w.worker_id(conn)
    rows = conn.execute(
        "SELECT id, fence, lease_expires_at - now(), attempted_at IS NOT NULL, lost"
        " FROM forklift.jobs WHERE state = 'running' AND worker_id = %s ORDER BY id",
        (worker_id,)).fetchall()
    leader = conn.execute("SELECT worker_id, expires_at - now() FROM forklift.leader").fetchall()
    open_tx = conn.execute(
        "SELECT application_name, state, now() - xact_start, left(query, 120)"
        " FROM pg_stat_activity WHERE datname = current_database() AND xact_start IS NOT NULL"
        " AND pid <> pg_backend_pid()").fetchall()
    return (f"victim {worker_id} running rows (id, fence, lease left, started, lost): {rows}\n"
            f"leader: {leader}\nopen transactions: {open_tx}")


def _after_freeze(conn: psycopg.Connection[Any], worker_id: str, before: int) -> str | None:
    """'rescued' once every running job of the frozen worker is gone and one was rescued;
    'empty' once they are gone and none was: the settles it sent as it froze landed, so nothing
    of it is left to rescue. (One statement: one snapshot for both counts.)"""
    row = conn.execute(
        "SELECT (SELECT count(*) FROM forklift.jobs, jsonb_array_elements(errors) e"
        "        WHERE e->>'worker' = %(w)s AND e->>'code' IN ('lease_expired', 'worker_lost')),"
        "       (SELECT count(*) FROM forklift.jobs WHERE state = 'running' AND worker_id = %(w)s)",
        {"w": worker_id}).fetchone()
    assert row is not None
    if row[1]:
        return None
    return "rescued" if row[0] > before else "empty"


def freeze(conn: psycopg.Connection[Any], procs: faults.Procs, victim: faults.WorkerProc,
           top_up: Callable[[], None]) -> None:
    """Pause ``victim`` past its lease until its jobs are rescued, then wake it.

    A worker seen holding jobs may have finished them all by the time SIGSTOP lands (its jobs
    take milliseconds, and its last settle may already be on its way to the server): such a
    freeze leaves nothing to rescue, so it is undone and tried again, never waited out; each
    try first tops the backlog up (the others drain it meanwhile).
    """
    worker_id = faults.registered(conn, victim)
    for _ in range(5):
        top_up()
        # Only a worker that holds jobs can have any rescued (a worker just thawed from an
        # earlier freeze may not have claimed again yet on a loaded machine).
        wait_until(lambda: _holds(conn, victim), timeout=60,
                   message="the victim holds no running job")
        row = conn.execute(
            "SELECT count(*) FROM forklift.jobs, jsonb_array_elements(errors) e"
            " WHERE e->>'worker' = %s AND e->>'code' IN ('lease_expired', 'worker_lost')",
            (worker_id,)).fetchone()
        before = int(row[0]) if row else 0
        victim.signal(signal.SIGSTOP)
        try:
            seen = wait_until(
                lambda b=before: _after_freeze(conn, worker_id, b), timeout=60,  # type: ignore[misc]
                message=lambda: "the frozen worker's jobs were not rescued\n"
                                f"{_frozen_state(conn, victim)}\n{procs.logs()}")
        finally:
            victim.signal(signal.SIGCONT)
        if seen == "rescued":
            return
        print(f"soak: freezing {worker_id} left nothing to rescue; freezing it again")
    raise AssertionError(f"five freezes of {worker_id} found it holding nothing")


def test_soak_with_random_failures_kills_and_restarts(
    db: psycopg.Connection[Any], procs: faults.Procs
) -> None:
    rng = random.Random(20_240_229)
    options = {"concurrency": 8, "lease": 2.0, "drain_timeout": 5.0}
    live = [procs.start(**options) for _ in range(WORKERS)]
    for w in live:
        registered(db, w)
    ids: list[int] = []

    def more(n: int) -> None:
        start = len(ids)
        ids.extend(faults.app.kind("faults.soak").enqueue_many(
            [{"seed": start + i, "fail": 0.15, "fatal": 0.02, "work_ms": 40} for i in range(n)],
            conn=db))

    more(JOBS)

    def top_up() -> None:
        if len(ids) - terminal(db) < 3 * EVERY:
            more(2 * EVERY)  # every event happens with work in flight

    killed = []
    events = ["kill", "kill", "kill", "freeze", "freeze", "term"]
    rng.shuffle(events)
    for event in events:
        floor = terminal(db)
        top_up()
        wait_until(lambda f=floor: terminal(db) >= f + EVERY,  # type: ignore[misc]
                   timeout=60, message=lambda: f"no progress\n{procs.logs()}")
        victim = live[rng.randrange(len(live))]
        if event == "freeze":
            # Paused past its lease: its jobs are rescued and run elsewhere; when it wakes up,
            # whatever it still writes must be refused.
            # Only a worker that holds jobs can have any rescued (a worker just thawed from an
            # earlier freeze may not have claimed again yet on a loaded machine).
            freeze(db, procs, victim, top_up)
            continue
        live.remove(victim)
        if event == "term":
            victim.signal(signal.SIGTERM)  # one graceful restart among the crashes
            assert victim.popen.wait(30) == 0
        else:
            victim.signal(signal.SIGKILL)
            killed.append(victim)
        live.append(procs.start(**options))
        registered(db, live[-1])  # up and handling signals before it may be picked

    wait_until(lambda: terminal(db) == len(ids), timeout=120,
               message=lambda: f"{len(ids) - terminal(db)} jobs not terminal: "
                               f"{faults.states(db, ids)}")
    for w in live:
        assert w.stop() == 0
    for w in killed:
        assert w.popen.wait(10) == -signal.SIGKILL

    counts = dict(db.execute(
        "SELECT state, count(*) FROM forklift.jobs GROUP BY state").fetchall())
    assert set(counts) <= {"completed", "dead"} and sum(counts.values()) == len(ids), counts
    report = faults.assert_ledger_sound(db)

    # Every dead job either failed terminally (Fail: attempts unspent) or used every attempt.
    for attempt, max_attempts, errors in db.execute(
        "SELECT attempt, max_attempts, errors FROM forklift.jobs WHERE state = 'dead'"
    ):
        assert errors and (errors[-1]["code"] == "fatal" or attempt == max_attempts), errors
    # A completed job's result names the attempt whose write was accepted.
    mismatched = db.execute(
        "SELECT count(*) FROM forklift.jobs WHERE state = 'completed'"
        " AND ((result->>'fence')::bigint <> fence OR (result->>'attempt')::int <> attempt)"
    ).fetchone()
    assert mismatched == (0,)
    assert rescued(db) > 0, "the kills rescued nothing: not a soak"
    print(f"soak: {counts}, ledger {report}, rescued attempts {rescued(db)}")
