"""Weighted jobs: a job of weight N takes N of a worker's slots, of its queue's limit and of
its keys' limits, and N tokens of a rate; a heavy job waiting for room reserves it, so it never
starves behind light ones; a queue without weighted jobs keeps the claim it had.

Claims are checked statement by statement (the flow claim, on a connection of the test's), and
real workers (in-process, and two worker processes) are checked against an external ledger of
handler starts and ends (tests/apps/weights.py)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from apps import weights
from apps.flow_keys import claim_once
from apps.weights import Load

from forklift import Forklift
from forklift._features.flow import declare
from forklift._features.flow.claim import FlowClaim
from forklift.ops import Operator

HEAVY, LIGHT = "weights.heavy", "weights.light"


@pytest.fixture
def app(dsn: str, conn: psycopg.Connection[Any]) -> Iterator[Forklift]:
    weights.setup(conn)
    weights.app.use(dsn)
    try:
        yield weights.app
    finally:
        weights.app.close()


def claimer(queue: str, kinds: list[str], cap: int) -> FlowClaim:
    return FlowClaim("weights-test", 30.0, cap=cap, queues=[queue], kinds=kinds)


def queue_flags(conn: psycopg.Connection[Any], queue: str) -> tuple[bool, bool] | None:
    row = conn.execute("SELECT flow, weighted FROM forklift.queues WHERE name = %s",
                       (queue,)).fetchone()
    return None if row is None else (bool(row[0]), bool(row[1]))


def ids(answer: Any) -> list[int]:
    return sorted(j.id for j in answer.jobs)


# -- the claim -----------------------------------------------------------------------------------
def test_a_heavy_job_takes_its_weight_in_slots(app: Forklift, dsn: str) -> None:
    heavy = weights.heavy.enqueue(Load()).id
    lights = [weights.light.enqueue(Load()).id for _ in range(3)]
    fc = claimer("weighted", [HEAVY, LIGHT], cap=4)
    first = claim_once(dsn, fc, n=4, start=4)
    assert ids(first) == [heavy, lights[0]]  # 3 + 1 slots: the other lights wait
    assert first.need is None
    assert ids(claim_once(dsn, fc, n=4, start=4)) == lights[1:]


def test_a_heavy_job_reserves_the_slots_it_waits_for(app: Forklift, dsn: str) -> None:
    heavy = weights.heavy.enqueue(Load()).id
    for _ in range(5):
        weights.light.enqueue(Load())
    fc = claimer("weighted", [HEAVY, LIGHT], cap=4)
    held_back = claim_once(dsn, fc, n=2, start=2)
    # 2 slots free: the heavy job does not fit, and no light job behind it takes them
    assert held_back.jobs == [] and held_back.need == 3
    got = claim_once(dsn, fc, n=3, start=3)
    assert ids(got) == [heavy] and got.need is None


def test_a_weight_above_the_workers_slots_runs_the_job_alone(app: Forklift, dsn: str) -> None:
    big = weights.light.enqueue(Load(), weight=50).id
    light = weights.light.enqueue(Load()).id
    fc = claimer("weighted", [HEAVY, LIGHT], cap=4)
    assert claim_once(dsn, fc, n=3, start=3).need == 4  # counted as all 4 slots
    assert ids(claim_once(dsn, fc, n=4, start=4)) == [big]
    assert ids(claim_once(dsn, fc, n=4, start=4)) == [light]


def test_a_queue_limit_counts_the_weights_of_its_running_jobs(
        app: Forklift, dsn: str) -> None:
    Operator(dsn=dsn).queues.set_concurrency("weighted", 4, create=True)
    heavy = weights.heavy.enqueue(Load()).id
    lights = [weights.light.enqueue(Load()).id for _ in range(3)]
    fc = claimer("weighted", [HEAVY, LIGHT], cap=10)
    assert ids(claim_once(dsn, fc, n=10, start=10)) == [heavy, lights[0]]
    # running: 3 + 1 of the queue's 4; the worker's 6 free slots do not matter
    again = claim_once(dsn, fc, n=10, start=10)
    assert again.jobs == [] and again.need is None


def test_a_key_limit_counts_weights_and_a_heavy_job_reserves_its_key(
        app: Forklift, conn: psycopg.Connection[Any], dsn: str) -> None:
    declare.record_sync(conn, "forklift", app)
    first = weights.keyed.enqueue(Load("acme")).id  # weight 2 of the tenant's 3
    second = weights.keyed.enqueue(Load("acme")).id
    light = weights.keyed_light.enqueue(Load("acme")).id
    other = weights.keyed.enqueue(Load("beta")).id
    fc = claimer("wkeyed", ["weights.keyed", "weights.keyed_light"], cap=20)
    assert ids(claim_once(dsn, fc, n=20, start=20)) == [first, other]
    # acme has 1 of 3 left: its second heavy job does not fit, and the light one behind it
    # does not take that room
    assert claim_once(dsn, fc, n=20, start=20).jobs == []
    assert second and light


def test_a_job_heavier_than_its_workers_slots_takes_its_whole_weight_of_a_key_and_a_queue(
        app: Forklift, conn: psycopg.Connection[Any], dsn: str) -> None:
    declare.record_sync(conn, "forklift", app)
    first = weights.keyed.enqueue(Load("acme")).id  # weight 2 of the tenant's 3
    second = weights.keyed.enqueue(Load("acme")).id
    one_slot = claimer("wkeyed", ["weights.keyed", "weights.keyed_light"], cap=1)
    # a worker of one slot runs a job of weight 2 alone, yet the job holds 2 of acme's 3
    assert ids(claim_once(dsn, one_slot, n=1, start=1)) == [first]
    assert claim_once(dsn, one_slot, n=1, start=1).jobs == []  # 2 more would make acme 4
    assert second
    Operator(dsn=dsn).queues.set_concurrency("weighted", 4, create=True)
    light = weights.light.enqueue(Load()).id
    big = weights.light.enqueue(Load(), weight=4).id
    fc = claimer("weighted", [HEAVY, LIGHT], cap=2)
    assert ids(claim_once(dsn, fc, n=2, start=2)) == [light]
    # the job of weight 4 fits the worker (2 slots) but not the queue's 3 left of its 4
    assert claim_once(dsn, fc, n=2, start=2).jobs == []
    assert big


def test_a_rate_takes_a_token_per_unit_of_weight(
        app: Forklift, conn: psycopg.Connection[Any], dsn: str) -> None:
    declare.record_sync(conn, "forklift", app)
    a, b = (weights.rated.enqueue(Load()).id for _ in range(2))
    fc = claimer("wrated", ["weights.rated"], cap=10)
    first = claim_once(dsn, fc, n=10, start=10)
    assert ids(first) == [a]  # 3 of the bucket's 4 tokens
    second = claim_once(dsn, fc, n=10, start=10)
    assert second.jobs == []
    # a token every 10 s: 1 is left, and the 2 the next job lacks are due in about 20 s (one
    # token short of a light job's, which would go at once)
    assert second.retry_in is not None and 15 < second.retry_in <= 20
    assert b


# -- real workers ----------------------------------------------------------------------------------
def slots_at_once(rows: list[tuple[Any, Any, int]]) -> int:
    """The most weight running at any instant over (start, end, weight) (ends first on ties)."""
    events = sorted([(s, 1, w) for s, _, w in rows] + [(e, -1, w) for _, e, w in rows],
                    key=lambda x: (x[0], x[1]))
    now = top = 0
    for _, sign, w in events:
        now += sign * w
        top = max(top, now)
    return top


def ledger(conn: psycopg.Connection[Any], where: str = "true") -> list[tuple[Any, ...]]:
    rows = conn.execute("SELECT worker, started_at, ended_at, weight, job_id"
                        " FROM public.weight_ledger WHERE " + where).fetchall()
    assert all(r[2] is not None for r in rows), "a run never ended"
    return rows


def test_nothing_behind_a_heavy_job_in_claim_order_starts_before_it(
        app: Forklift, conn: psycopg.Connection[Any]) -> None:
    from apps.basic import running_worker
    from helpers import wait_until

    ahead = weights.light.enqueue_many([Load(work=0.02)] * 20)
    heavy = weights.heavy.enqueue(Load(work=0.02)).id
    behind = weights.light.enqueue_many([Load(work=0.02)] * 20)
    with running_worker(app, queues=["weighted"], concurrency=4):
        wait_until(lambda: conn.execute("SELECT count(*) FROM public.weight_ledger"
                                        " WHERE ended_at IS NOT NULL").fetchone() == (41,),
                   timeout=60)
    rows = ledger(conn)
    # when each was claimed to start (a claim's transaction time: a light job taken in the
    # heavy one's own claim, beside it, counts as not before it)
    started = dict(conn.execute("SELECT id, attempted_at FROM forklift.jobs").fetchall())
    assert all(started[j] >= started[heavy] for j in behind), "a light job took its slots"
    assert slots_at_once([(r[1], r[2], r[3]) for r in rows]) <= 4
    assert ahead


def test_a_heavy_job_is_not_starved_by_a_plain_queue_on_the_same_worker(
        app: Forklift, conn: psycopg.Connection[Any]) -> None:
    from apps.basic import running_worker
    from helpers import wait_until

    weights.plain.enqueue_many([Load(work=0.01)] * 400)
    with running_worker(app, queues=["plain", "weighted"], concurrency=4):
        wait_until(lambda: conn.execute("SELECT count(*) FROM public.weight_ledger"
                                        ).fetchone()[0] >= 20, timeout=30)
        heavy = weights.heavy.enqueue(Load()).id
        wait_until(lambda: conn.execute("SELECT state FROM forklift.jobs WHERE id = %s",
                                        (heavy,)).fetchone() == ("completed",), timeout=60)
        left = conn.execute("SELECT count(*) FROM forklift.jobs WHERE queue = 'plain'"
                            " AND state = 'available'").fetchone()
    # the plain backlog's free slots went to the heavy job once it waited: it did not wait
    # for the backlog to drain
    assert left is not None and left[0] > 0


@pytest.mark.slow
def test_two_worker_processes_never_run_more_than_their_slots_or_the_queue_limit(
        app: Forklift, conn: psycopg.Connection[Any], dsn: str, tmp_path: Any) -> None:
    from apps import faults
    from helpers import wait_until

    Operator(dsn=dsn).queues.set_concurrency("weighted", 6, create=True)
    procs = faults.Procs(dsn, tmp_path)
    try:
        workers = [procs.start(app="apps.weights:app", concurrency=4, queues="weighted")
                   for _ in range(2)]
        for w in workers:
            faults.registered(conn, w)
        made = []
        for i in range(60):
            if i % 4 == 0:
                made.append(weights.heavy.enqueue(Load(work=0.03)).id)
            elif i % 7 == 0:
                made.append(weights.light.enqueue(Load(work=0.03), weight=2).id)
            else:
                made.append(weights.light.enqueue(Load(work=0.02)).id)
        wait_until(lambda: faults.all_in(conn, made, "completed"), timeout=180,
                   message=lambda: f"left: {faults.states(conn, made)}\n{procs.logs()}")
    finally:
        procs.close()
    rows = ledger(conn)
    assert len(rows) == 60
    by_worker: dict[str, list[tuple[Any, Any, int]]] = {}
    for worker, start, end, weight, _ in rows:
        by_worker.setdefault(worker, []).append((start, end, weight))
    assert len(by_worker) == 2, "one worker ran everything"
    assert all(slots_at_once(v) <= 4 for v in by_worker.values()), {
        k: slots_at_once(v) for k, v in by_worker.items()}
    assert slots_at_once([(r[1], r[2], r[3]) for r in rows]) <= 6


def test_a_worker_counts_a_weighted_jobs_slots_while_it_runs(
        app: Forklift, conn: psycopg.Connection[Any]) -> None:
    from apps.basic import running_worker
    from helpers import wait_until

    gate = threading.Event()

    @app.job(name="weights.gated", queue="gated", weight=3)
    def gated(ctx: Any, args: dict[str, Any]) -> None:
        gate.wait(30)

    try:
        job = gated.enqueue({}).id
        with running_worker(app, queues=["gated"], concurrency=4, lease=3) as worker:
            wait_until(lambda: worker.state.busy == 3, timeout=30,
                       message=lambda: f"busy {worker.state.busy}")
            # the heartbeat reports slots in use, not jobs
            wait_until(lambda: conn.execute("SELECT in_use FROM forklift.workers WHERE id = %s",
                                            (worker.state.id,)).fetchone() == (3,), timeout=30)
            gate.set()
            wait_until(lambda: conn.execute("SELECT state FROM forklift.jobs WHERE id = %s",
                                            (job,)).fetchone() == ("completed",), timeout=30)
            wait_until(lambda: worker.state.busy == 0, timeout=30)
    finally:
        gate.set()
        del app.kinds["weights.gated"]
