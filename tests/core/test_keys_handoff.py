"""The hand-off (forklift._features.flow.handoff): a settled keyed job's slots pass to its key values'
next job in the settle statement itself, never past a limit, and never where a flow claim
would not have admitted that job (paused, fair or rated queues, rated or unrecorded keys)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from apps import flow_keys
from apps.flow_keys import Work, claim_once

from forklift import Forklift
from forklift._features.flow import declare
from forklift._features.flow.claim import FlowClaim
from forklift._features.flow.handoff import Handoff
from forklift._worker import settle
from forklift.ops import Operator

WORKER = "w-test"


@pytest.fixture
def app(dsn: str, conn: psycopg.Connection[Any]) -> Iterator[Forklift]:
    flow_keys.setup(conn)
    flow_keys.app.use(dsn)
    declare.record_sync(conn, "forklift", flow_keys.app)
    try:
        yield flow_keys.app
    finally:
        flow_keys.app.close()


def claim(dsn: str, queue: str, kind: str, n: int) -> list[Any]:
    return list(claim_once(dsn, FlowClaim(WORKER, 30.0, queues=[queue], kinds=[kind]), n).jobs)


def complete(dsn: str, jobs: list[Any], budget: int = 100) -> tuple[dict[int, str], list[Any]]:
    """Write these jobs' completions with a hand-off: (fence -> state, the jobs handed on)."""
    async def go() -> tuple[dict[int, str], list[Any]]:
        handoff = Handoff(WORKER, 30.0, sorted(flow_keys.app.kinds), budget)
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as c:
            accepted = await settle.write(c, "forklift", [
                settle.Outcome(j.id, j.fence, "completed", result="null") for j in jobs],
                handoff)
        return accepted, handoff.jobs

    return asyncio.run(go())


def state(conn: psycopg.Connection[Any], ids: list[int]) -> list[str]:
    return [r[0] for r in conn.execute(
        "SELECT state FROM forklift.jobs WHERE id = ANY(%s) ORDER BY id", (ids,))]


def test_a_settled_jobs_slot_passes_to_its_values_next_job_in_the_same_statement(
    app: Forklift, conn: psycopg.Connection[Any], dsn: str
) -> None:
    ids = flow_keys.solo.enqueue_many([Work(t) for t in ["a", "b", "a", "a", "b"]])
    first = claim(dsn, "keyed", "flow.keys.tenant", 10)
    assert sorted(j.id for j in first) == [ids[0], ids[1]]  # one per tenant at limit 1
    accepted, handed = complete(dsn, first)
    assert sorted(accepted.values()) == ["completed", "completed"]
    # each tenant's next job, in claim order, now ours: fenced, leased, waiting in the buffer
    assert sorted(j.id for j in handed) == [ids[2], ids[4]]
    assert all(not j.started and j.fence for j in handed)
    row = conn.execute("SELECT count(*) FROM forklift.jobs WHERE id = ANY(%s) AND state ="
                       " 'running' AND worker_id = %s AND lease_expires_at > now()",
                       ([j.id for j in handed], WORKER)).fetchone()
    assert row == (2,)
    # the slots stayed taken: a flow claim finds both tenants at their limit
    assert claim(dsn, "keyed", "flow.keys.tenant", 10) == []
    # the budget caps what one batch takes; a stale fence passes nothing on
    accepted, handed = complete(dsn, [*handed, first[0]], budget=1)
    assert len(accepted) == 2 and [j.id for j in handed] == [ids[3]]
    assert state(conn, ids) == ["completed", "completed", "completed", "running", "completed"]


def test_only_a_job_with_the_same_values_that_is_next_for_its_first_value_takes_the_slots(
    app: Forklift, conn: psycopg.Connection[Any], dsn: str
) -> None:
    k = flow_keys.keyed  # tenant (limit 2) and account (limit 1)
    ids = k.enqueue_many([Work("t", "a1"), Work("t", "a2"), Work("t", "a1")])
    first = claim(dsn, "keyed", "flow.keys.sync", 1)
    assert [j.id for j in first] == [ids[0]]
    # tenant t's next job is ids[1] with another account: the slots do not skip it
    _, handed = complete(dsn, first)
    assert handed == []
    second = claim(dsn, "keyed", "flow.keys.sync", 1)
    assert [j.id for j in second] == [ids[1]]
    k.enqueue_many([Work("t", "a2")])
    _, handed = complete(dsn, second)  # now the next of t is ids[2] (a1): not the same values
    assert handed == []


def test_a_lowered_limit_passes_nothing_until_the_running_jobs_are_within_it(
    app: Forklift, conn: psycopg.Connection[Any], dsn: str
) -> None:
    with Operator(dsn, actor="t") as op:
        op.set_key_limit("solo", 2)
    ids = flow_keys.solo.enqueue_many([Work("a") for _ in range(4)])
    first = claim(dsn, "keyed", "flow.keys.tenant", 10)
    assert [j.id for j in first] == ids[:2]  # a at its limit of 2
    with Operator(dsn, actor="t") as op:
        op.set_key_limit("solo", 1)
    _, handed = complete(dsn, first[:1])  # 2 running of 1: nothing passes
    assert handed == []
    _, handed = complete(dsn, first[1:])  # 1 running of 1 (the settled one): it passes
    assert [j.id for j in handed] == [ids[2]]


def lowered(conn: psycopg.Connection[Any]) -> dict[str, bool]:
    return {r[0]: r[1] for r in conn.execute(
        "SELECT name, lowered_at IS NOT NULL FROM forklift.flow_keys ORDER BY name")}


def test_a_key_is_marked_for_counting_only_when_its_limit_falls(
    app: Forklift, conn: psycopg.Connection[Any], dsn: str
) -> None:
    # recorded with nothing running, raised, or given a rate: no value can be above its limit
    assert not any(lowered(conn).values())
    with Operator(dsn, actor="t") as op:
        op.set_key_limit("solo", 3)
        op.set_key_rate("tenant", "100/s")
        assert not any(lowered(conn).values())
        op.set_key_limit("solo", 2)  # lowered
        op.set_key_limit("t", 5)  # a limit where there was none (the fair queue's key)
    assert {k for k, v in lowered(conn).items() if v} == {"solo", "t"}
    # raising it again does not unmark it: values may still be above the lower limit
    with Operator(dsn, actor="t") as op:
        op.set_key_limit("solo", 4)
    assert lowered(conn)["solo"]


def test_a_key_recorded_again_while_its_jobs_run_counts_them(
    app: Forklift, conn: psycopg.Connection[Any], dsn: str
) -> None:
    with Operator(dsn, actor="t") as op:
        op.set_key_limit("solo", 2)
    conn.execute("UPDATE forklift.flow_keys SET lowered_at = NULL")
    ids = flow_keys.solo.enqueue_many([Work("a") for _ in range(3)])
    first = claim(dsn, "keyed", "flow.keys.tenant", 10)
    assert [j.id for j in first] == ids[:2]
    # the row is lost and recorded again, at the declared limit of 1, while 2 run
    conn.execute("DELETE FROM forklift.flow_keys WHERE name = 'solo'")
    declare.record_sync(conn, "forklift", flow_keys.app)
    assert lowered(conn)["solo"]
    _, handed = complete(dsn, first[:1])
    assert handed == []  # 2 running of 1: nothing passes
    _, handed = complete(dsn, first[1:])
    assert [j.id for j in handed] == [ids[2]]


def test_the_leader_unmarks_a_lowered_key_once_every_value_is_within_its_limit(
    app: Forklift, conn: psycopg.Connection[Any], dsn: str
) -> None:
    from forklift._worker.maintenance.flow_recount import MARGIN, recount

    def clear(margin: float) -> list[str]:
        async def go() -> list[str]:
            async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as c:
                return await recount(c, "forklift", margin)
        return asyncio.run(go())

    with Operator(dsn, actor="t") as op:
        op.set_key_limit("solo", 2)
    ids = flow_keys.solo.enqueue_many([Work("a"), Work("a"), Work("b"), Work("a")])
    first = claim(dsn, "keyed", "flow.keys.tenant", 10)
    assert sorted(j.id for j in first) == ids[:3]  # a twice, b once
    with Operator(dsn, actor="t") as op:
        op.set_key_limit("solo", 1)
    assert lowered(conn)["solo"]
    assert clear(MARGIN) == []  # too recent: a claim that read the old limit may be in flight
    assert clear(0.0) == []  # a holds 2 of 1
    _, handed = complete(dsn, [j for j in first if j.id == ids[0]])
    assert handed == []
    assert clear(0.0) == ["solo"]  # a holds 1, b 1: within the limit
    assert not lowered(conn)["solo"]
    # from now on the hand-off does not count, and the limit still holds
    _, handed = complete(dsn, [j for j in first if j.id == ids[1]])
    assert [j.id for j in handed] == [ids[3]]
    assert claim(dsn, "keyed", "flow.keys.tenant", 10) == []


@pytest.mark.parametrize("change", ["paused", "fair", "queue rate", "key rate", "unrecorded"])
def test_no_slot_passes_where_a_claim_must_start_its_jobs_at_once_or_admit_nothing(
    app: Forklift, conn: psycopg.Connection[Any], dsn: str, change: str
) -> None:
    ids = flow_keys.solo.enqueue_many([Work("a"), Work("a")])
    first = claim(dsn, "keyed", "flow.keys.tenant", 10)
    assert [j.id for j in first] == ids[:1]
    with Operator(dsn, actor="t") as op:
        if change == "paused":
            op.pause("keyed")
        elif change == "fair":
            op.set_fair("keyed", True)
        elif change == "queue rate":
            op.set_queue_rate("keyed", "100/s")
        elif change == "key rate":
            op.set_key_rate("solo", "100/s")
        else:
            conn.execute("DELETE FROM forklift.flow_keys WHERE name = 'solo'")
    _, handed = complete(dsn, first)
    assert handed == [] and state(conn, ids) == ["completed", "available"]


def test_a_next_job_locked_by_a_claim_elsewhere_is_left_to_it(
    app: Forklift, conn: psycopg.Connection[Any], dsn: str
) -> None:
    ids = flow_keys.solo.enqueue_many([Work("a"), Work("a")])
    first = claim(dsn, "keyed", "flow.keys.tenant", 10)
    with psycopg.connect(dsn) as other, other.transaction():
        other.execute("SELECT id FROM forklift.jobs WHERE id = %s FOR UPDATE", (ids[1],))
        accepted, handed = complete(dsn, first)
    assert list(accepted.values()) == ["completed"] and handed == []
    assert state(conn, ids) == ["completed", "available"]


def test_a_worker_hands_a_keys_slot_on_instead_of_claiming_for_each_job(
    app: Forklift, conn: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """One key at limit 1, a poll far away: each job's successor comes with its predecessor's
    outcome write, not from a flow claim sent after it (one a job before the hand-off)."""
    from apps.basic import running_worker
    from helpers import wait_until

    flow_runs = flow_keys.count_flow_claims(monkeypatch)
    jobs = 30
    ids = flow_keys.solo.enqueue_many([Work("one") for _ in range(jobs)])
    with running_worker(app, queues=["keyed"], concurrency=2, poll_interval=30.0):
        wait_until(lambda: conn.execute("SELECT count(*) FROM forklift.jobs WHERE id = ANY(%s)"
                                        " AND state = 'completed'", (ids,)).fetchone()
                   == (jobs,), timeout=60, message="the key's jobs did not finish")
    assert len(flow_runs) <= 5, flow_runs
    from test_keys import ledger_by, most_at_once

    assert most_at_once(ledger_by(conn, "tenant")["one"]) == 1


def test_a_flow_workers_outcome_write_does_not_wait_behind_one_in_flight(
    app: Forklift, conn: psycopg.Connection[Any], dsn: str
) -> None:
    """Keyed slots free (or pass on) only as outcomes are written: with one write stuck (its
    row locked here), the next outcome is written beside it, not after it."""
    from apps.basic import running_worker
    from helpers import wait_until

    stuck, free = flow_keys.solo.enqueue_many([Work("a", gate="ga"), Work("b", gate="gb")])

    def states() -> dict[int, str]:
        return dict(conn.execute("SELECT id, state FROM forklift.jobs WHERE id = ANY(%s)",
                                 ([stuck, free],)).fetchall())

    with running_worker(app, queues=["keyed"], concurrency=4, poll_interval=30.0) as w:
        wait_until(lambda: conn.execute("SELECT count(*) FROM public.key_ledger").fetchone()
                   == (2,), timeout=30, message="the two jobs did not start")
        with psycopg.connect(dsn) as locker, locker.transaction():
            locker.execute("SELECT 1 FROM forklift.jobs WHERE id = %s FOR UPDATE", (stuck,))
            conn.execute("INSERT INTO public.gates VALUES ('ga')")
            wait_until(lambda: conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                " AND application_name LIKE %s", (f"%{w.id}:complete%",)).fetchone() == (1,),
                timeout=30, message="the first outcome's write did not start")
            conn.execute("INSERT INTO public.gates VALUES ('gb')")
            wait_until(lambda: states()[free] == "completed", timeout=30,
                       message="the second outcome waited behind the first write")
            assert states()[stuck] == "running"
        wait_until(lambda: states() == {stuck: "completed", free: "completed"}, timeout=30)


def test_a_flow_claim_asks_for_about_what_the_keys_have_room_for(
    app: Forklift, conn: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Five keys at limit 1 and a buffer sized for a second of work: the flow claim asks for
    at most twice what the one before it found (at least the slots), never the hundreds the
    buffer would take (its cost grows with what it asks for)."""
    from apps.basic import running_worker
    from helpers import wait_until

    flow_runs = flow_keys.count_flow_claims(monkeypatch)
    ids = flow_keys.solo.enqueue_many([Work(f"t{i % 5}") for i in range(300)])
    with running_worker(app, queues=["keyed"], concurrency=4, prefetch_horizon=1.0,
                        poll_interval=0.1):
        wait_until(lambda: conn.execute("SELECT count(*) FROM forklift.jobs WHERE id = ANY(%s)"
                                        " AND state = 'completed'", (ids,)).fetchone()
                   == (len(ids),), timeout=120, message="the keyed jobs did not finish")
    assert flow_runs and max(flow_runs) <= 2 * 5, flow_runs


def test_a_worker_of_a_plain_backlog_and_keyed_jobs_moves_both_within_the_limits(
    app: Forklift, conn: psycopg.Connection[Any]
) -> None:
    """One worker, a plain queue with a deep backlog and a keyed queue beside it, its jobs newer
    than the backlog: once claimed (they hold their values' slots), the keyed jobs start before
    the plain jobs claimed after them and run to the end while the backlog lasts, one at a time
    per key value; the plain outcomes, written on the flow worker's outcome lanes beside the
    keyed ones (and in the same statements as their hand-offs), are all accepted."""
    from apps.basic import running_worker
    from helpers import wait_until
    from test_keys import ledger_by, most_at_once

    conn.execute("INSERT INTO forklift.jobs (queue, kind, args) SELECT 'default',"
                 " 'flow.keys.plain', '{\"tenant\": \"plain\"}' FROM generate_series(1, 20000)")
    # Newer than the whole backlog: in claim order (run_at) they would come after it.
    ids = flow_keys.solo.enqueue_many([Work(t, work=0.002) for t in ("a", "b") * 15])

    def backlog() -> int:
        row = conn.execute("SELECT count(*) FROM forklift.jobs WHERE queue = 'default'"
                           " AND state = 'available'").fetchone()
        return int(row[0]) if row else 0

    with running_worker(app, queues=["default", "keyed"], concurrency=4, poll_interval=0.2) as w:
        wait_until(lambda: state(conn, ids) == ["completed"] * len(ids), timeout=90,
                   message=lambda: f"keyed jobs: {sorted(set(state(conn, ids)))}")
        left = backlog()
    assert left > 0, "the keyed jobs ran only once the plain backlog was gone"
    runs = ledger_by(conn, "tenant")
    assert {t: len(runs[t]) for t in ("a", "b")} == {"a": 15, "b": 15}
    assert most_at_once(runs["a"]) == 1 and most_at_once(runs["b"]) == 1
    assert w.stats.stale_writes == 0
    bad = conn.execute("SELECT count(*) FROM forklift.jobs WHERE queue = 'default'"
                       " AND state NOT IN ('available', 'completed')").fetchone()
    assert bad == (0,), "a plain job was left neither waiting nor done"
