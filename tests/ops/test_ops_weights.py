"""Weighted jobs seen through the operator API: a job's weight in the list summary (1 for a job
that names none), a kind's weight in kind_stats, a queue's ``weighted`` flag, and the
``weighted`` reason of ``explain`` for an available job that takes more than one slot, and
``behind_weighted`` for a job behind one in claim order."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from apps.ops import register_worker

from forklift import Forklift
from forklift.ops import JobFilter, Operator

app = Forklift()


@app.job(name="opw.export", queue="opw")
def export(ctx: Any, payload: dict[str, Any]) -> None:
    """A big export: given its weight at enqueue."""


@app.job(name="opw.mail", queue="opw")
def mail(ctx: Any, payload: dict[str, Any]) -> None:
    """A small mail: one slot."""


@pytest.fixture
def bound(dsn: str) -> Iterator[Forklift]:
    app.use(dsn)
    try:
        yield app
    finally:
        app.close()


@pytest.fixture
def op(dsn: str) -> Iterator[Operator]:
    with Operator(dsn, actor="carol") as operator:
        yield operator


def test_reads_carry_the_weight(bound: Forklift, op: Operator) -> None:
    big = export.enqueue({}, weight=3)
    small = mail.enqueue({})
    page = op.jobs(JobFilter(queues=["opw"]))
    weights = {j.id: j.weight for j in page.jobs}
    assert weights == {big.id: 3, small.id: 1}
    assert {j["id"]: j["weight"] for j in page.to_json()["jobs"]} == {big.id: 3, small.id: 1}
    assert op.job(big.id).job.weight == 3 and op.job(small.id).job.weight is None
    rows = {r.kind: r for r in op.kind_stats().rows}
    assert rows["opw.export"].weight == 3 and rows["opw.mail"].weight is None
    assert {r["kind"]: r["weight"] for r in op.kind_stats().to_json()["rows"]
            if r["queue"] == "opw"} == {"opw.export": 3, "opw.mail": None}
    queue = op.queues.get("opw")
    assert queue is not None and queue.weighted and queue.to_json()["weighted"] is True


def test_a_kind_shows_its_heaviest_job_until_it_has_none(
    bound: Forklift, op: Operator, conn: psycopg.Connection[Any]
) -> None:
    first = export.enqueue({}, weight=2)
    export.enqueue({}, weight=7)
    export.enqueue({})
    assert next(r for r in op.kind_stats().rows if r.kind == "opw.export").weight == 7
    # Finished in the window, it still counts; deleted, the kind weighs one again.
    conn.execute("UPDATE forklift.jobs SET state = 'completed', finished_at = now(),"
                 " attempted_at = now() WHERE kind = 'opw.export' AND weight = 7")
    assert next(r for r in op.kind_stats().rows if r.kind == "opw.export").weight == 7
    conn.execute("DELETE FROM forklift.jobs WHERE kind = 'opw.export' AND weight = 7")
    assert next(r for r in op.kind_stats().rows if r.kind == "opw.export").weight == 2
    conn.execute("DELETE FROM forklift.jobs WHERE id = %s", (first.id,))
    assert next(r for r in op.kind_stats().rows if r.kind == "opw.export").weight is None


def test_an_unweighted_queue_says_so(bound: Forklift, op: Operator) -> None:
    op.queues.set_concurrency("opw.plain", 4, create=True)
    mail.enqueue({}, queue="opw.plain")
    queue = op.queues.get("opw.plain")
    assert queue is not None and not queue.weighted


def test_explain_says_a_heavy_job_waits_for_room(
    bound: Forklift, op: Operator, conn: psycopg.Connection[Any]
) -> None:
    job = export.enqueue({}, weight=3)
    ex = op.explain(job.id)
    reason = next(r for r in ex.reasons if r.code == "weighted")
    assert reason.text.startswith(f"job {job.id} weighs 3 slots: it starts once a worker has 3"
                                  " free, and nothing behind it in claim order takes them")
    assert reason.facts == {"weight": 3, "needs_free": 3, "most_free": None,
                            "queue_limit": None}
    # A worker with 2 slots, 1 busy: the job needs both (it runs alone there).
    register_worker(conn, "w-small", ["opw"], slots=2, in_use=1)
    reason = next(r for r in op.explain(job.id).reasons if r.code == "weighted")
    assert "more than any live worker's 2 slots: it runs alone on one" in reason.text
    assert "the most free on a live worker of the queue now: 1" in reason.text
    assert (reason.facts["needs_free"], reason.facts["most_free"]) == (2, 1)
    # Under a queue limit smaller than its weight, it runs alone under it.
    op.queues.set_concurrency("opw", 2)
    reason = next(r for r in op.explain(job.id).reasons if r.code == "weighted")
    assert "concurrency limit of 2: it runs alone under it" in reason.text
    assert reason.facts["queue_limit"] == 2
    # A job of one slot has no such reason, but behind the heavy one it is told why it waits.
    light = mail.enqueue({})
    codes = op.explain(light.id).codes
    assert "weighted" not in codes and "behind_weighted" in codes
    behind = next(r for r in op.explain(light.id).reasons if r.code == "behind_weighted")
    assert behind.facts == {"job_id": job.id, "weight": 3}
    assert f"job {job.id} ahead of it in claim order weighs 3 slots" in behind.text
    assert "behind_weighted" not in op.explain(job.id).codes  # nothing heavy ahead of it
    # A heavy job no longer waiting: neither reason.
    conn.execute("UPDATE forklift.jobs SET state = 'completed', finished_at = now()"
                 " WHERE id = %s", (job.id,))
    assert "weighted" not in op.explain(job.id).codes
    assert "behind_weighted" not in op.explain(light.id).codes
