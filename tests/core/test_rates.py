"""Rate limits (token buckets in the database, forklift._features.flow.claim): per key value and per
queue, at most the burst at once and then one start per 1/rate seconds across the fleet; a
limited job waits (the claim says for how long), never fails."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from apps import flow_keys
from apps.flow_keys import Work, claim_once

from forklift import Forklift
from forklift._features.flow import declare
from forklift._features.flow.claim import FlowClaim


@pytest.fixture
def app(dsn: str, conn: psycopg.Connection[Any]) -> Iterator[Forklift]:
    flow_keys.setup(conn)
    flow_keys.app.use(dsn)
    declare.record_sync(conn, "forklift", flow_keys.app)
    try:
        yield flow_keys.app
    finally:
        flow_keys.app.close()


def test_a_kinds_rate_admits_its_burst_then_says_when_the_next_token_is_due(
    app: Forklift, conn: psycopg.Connection[Any], dsn: str
) -> None:
    flow_keys.rated.enqueue_many([Work("x") for _ in range(30)])
    fc = FlowClaim("w-test", 30.0, queues=["rated"], kinds=["flow.keys.rated"])
    first = claim_once(dsn, fc, 30)
    assert len(first.jobs) == 5  # Rate(20, per=1, burst=5)
    assert first.retry_in is not None and 0 < first.retry_in <= 1 / 20
    (tokens,) = conn.execute("SELECT tokens FROM forklift.flow_values WHERE key = %s",
                             ("flow.keys.rated\x1f*",)).fetchone() or (None,)
    assert tokens is not None and tokens < 1
    # Nothing failed or moved: the other 25 wait, available.
    assert conn.execute("SELECT state, count(*) FROM forklift.jobs GROUP BY state ORDER BY 1"
                        ).fetchall() == [("available", 25), ("running", 5)]


def test_a_keys_rate_holds_per_value_and_a_queue_rate_for_the_whole_queue(
    app: Forklift, conn: psycopg.Connection[Any], dsn: str
) -> None:
    flow_keys.vendor.enqueue_many([Work(t) for t in ("v1", "v2") for _ in range(6)])
    fc = FlowClaim("w-test", 30.0, queues=["rated"], kinds=["flow.keys.vendor"])
    got = claim_once(dsn, fc, 20)  # burst 2 per vendor value
    assert sorted(j.args["tenant"] for j in got.jobs) == ["v1", "v1", "v2", "v2"]
    conn.execute("UPDATE forklift.flow_values SET tokens = 2, refilled_at = now()")
    conn.execute("UPDATE forklift.queues SET rate_limit = 1, rate_per = 60, rate_burst = 1"
                 " WHERE name = 'rated'")
    conn.execute("INSERT INTO forklift.flow_values (key) VALUES ('@rated')")
    again = claim_once(dsn, fc, 20)
    assert len(again.jobs) == 1  # the queue's bucket: one, then a minute per token
    assert again.retry_in is not None and 59 < again.retry_in <= 60


def test_rated_jobs_are_claimed_only_for_the_slots_that_start_now(
    app: Forklift, conn: psycopg.Connection[Any], dsn: str
) -> None:
    """A token is taken when a job is claimed, so a rated job never waits in a buffer: a
    claim for 30 with 2 slots free takes 2 of the burst of 5, both started."""
    flow_keys.rated.enqueue_many([Work("x") for _ in range(30)])
    fc = FlowClaim("w-test", 30.0, queues=["rated"], kinds=["flow.keys.rated"])
    got = claim_once(dsn, fc, 30, start=2)
    assert [j.started for j in got.jobs] == [True, True] and got.strict
    (tokens,) = conn.execute("SELECT tokens FROM forklift.flow_values WHERE key = %s",
                             ("flow.keys.rated\x1f*",)).fetchone() or (None,)
    assert tokens == pytest.approx(3)  # two of the burst taken, for the two that started


@pytest.mark.slow
def test_a_rate_is_never_exceeded_over_any_window_across_worker_processes(
    app: Forklift, conn: psycopg.Connection[Any], dsn: str, tmp_path: Any
) -> None:
    from apps import faults
    from helpers import wait_until

    procs = faults.Procs(dsn, tmp_path)
    try:
        workers = [procs.start(app="apps.flow_keys:app", concurrency=4, queues="rated")
                   for _ in range(3)]
        for w in workers:
            faults.registered(conn, w)
        ids = flow_keys.rated.enqueue_many([Work("x") for _ in range(60)])
        wait_until(lambda: faults.all_in(conn, ids, "completed"), timeout=120,
                   message=lambda: f"left: {faults.states(conn, ids)}\n{procs.logs()}")
    finally:
        procs.close()
    # The bucket admits a job when a claim takes it (stamping attempted_at with the server clock
    # its arithmetic reads); the handler's first line follows by however long its worker takes
    # to get there, which on a loaded machine can bunch runs admitted apart. So the windows are
    # over the admissions, and the ledger shows that each of the 60 runs began after its own.
    rows = conn.execute(
        "SELECT extract(epoch FROM j.attempted_at)::float8, extract(epoch FROM l.started_at)::float8"
        " FROM public.key_ledger l JOIN forklift.jobs j ON j.id = l.job_id ORDER BY 1").fetchall()
    assert len(rows) == 60 and all(admitted <= began for admitted, began in rows), rows
    starts = [admitted for admitted, _ in rows]
    rate, burst = 20.0, 5  # flow.keys.rated: Rate(20, per=1, burst=5)
    for window in (0.25, 0.5, 1.0, 2.0):
        # A token bucket admits at most burst + rate * window in any window; one more for claims
        # whose transactions overlap (each stamps the time it began).
        bound = burst + rate * window + 1
        worst = max(sum(1 for t in starts[i:] if t - s <= window) for i, s in enumerate(starts))
        assert worst <= bound, (window, worst, bound, starts)
    assert len({r[0] for r in conn.execute("SELECT worker FROM public.key_ledger")}) > 1
