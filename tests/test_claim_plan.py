"""The claim's plan does not grow with the backlog (DESIGN.md, PostgreSQL discipline).

On a half-drained table -- the older half of the jobs finished, the newer half waiting, and at
the head of every queue a large backlog of a kind this worker has no handler for -- the claim is
EXPLAIN ANALYZEd before and after ANALYZE, and fails on any of: a sequential scan of jobs, a
Sort fed by more rows than the walks can return (2 x batch per queue and kind: a sort of the
backlog), a scan of jobs that reads and throws away rows (a primary-key walk that filters out
the finished ones, or a walk that filters out the unknown kind), or more rows locked than the
batch takes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from forklift._sqltext import render
from forklift._worker import claim

BATCH = 10
QUEUES = ["alpha", "beta", "gamma"]
KINDS = ["plan.job", "plan.other"]  # the worker's kinds; "plan.foreign" it does not have
PER_QUEUE = 6_000
FOREIGN = 4_000


def nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from nodes(child)


def statements() -> list[tuple[str, str]]:
    """Every claim statement the worker may send (the lock-free one where there is one)."""
    found = [("CLAIM_SQL", claim.CLAIM_SQL)]
    free = getattr(claim, "CLAIM_FREE_SQL", None)
    if isinstance(free, str):
        found.append(("CLAIM_FREE_SQL", free))
    return found


def problems(plan: dict[str, Any], queues: int) -> list[str]:
    found = []
    bound = 2 * BATCH * queues * len(KINDS)
    for node in nodes(plan):
        kind, rel = node.get("Node Type"), node.get("Relation Name")
        rows = node.get("Actual Rows", 0) * max(1, node.get("Actual Loops", 1))
        removed = node.get("Rows Removed by Filter", 0) + node.get("Rows Removed by Index Recheck", 0)
        if rel == "jobs" and kind == "Seq Scan":
            found.append("a sequential scan of jobs")
        if kind == "Sort" and rows > bound:
            found.append(f"a Sort of {rows} rows (more than 2 x batch x queues x kinds = {bound})")
        if rel == "jobs" and removed > 0:
            found.append(f"{kind} on jobs via {node.get('Index Name')} filtered out {removed} rows")
        if kind == "LockRows" and rows > BATCH:
            found.append(f"{rows} rows locked for a batch of {BATCH}")
    return found


@pytest.fixture
def half_drained(conn: psycopg.Connection[Any]) -> psycopg.Connection[Any]:
    conn.execute(
        "INSERT INTO forklift.jobs (queue, kind, run_at, created_at)"
        " SELECT q, 'plan.job', now() - make_interval(secs => %s - i), now()"
        " FROM unnest(%s::text[]) AS q, generate_series(1, %s) AS i",
        (PER_QUEUE, QUEUES, PER_QUEUE),
    )
    # At the head of every queue: a backlog of a kind no worker here knows (a rolling deploy).
    conn.execute(
        "INSERT INTO forklift.jobs (queue, kind, priority, run_at)"
        " SELECT q, 'plan.foreign', -1, now() - interval '1 day'"
        " FROM unnest(%s::text[]) AS q, generate_series(1, %s) AS i", (QUEUES, FOREIGN),
    )
    # The older half of every queue is done, as on a busy system some way into its backlog.
    conn.execute(
        "UPDATE forklift.jobs SET state = 'completed', attempt = 1, finished_at = now()"
        " WHERE run_at < now() - make_interval(secs => %s)", (PER_QUEUE // 2,)
    )
    conn.execute("UPDATE forklift.queues SET concurrency = 50 WHERE name = %s", (QUEUES[-1],))
    return conn


PARAMS = {"n": BATCH, "start": BATCH // 2, "queues": QUEUES, "kinds": KINDS,
          "w": "plan-test", "lease": 30.0}


def claimed_kinds(conn: psycopg.Connection[Any], sql: str) -> set[str]:
    with conn.transaction(force_rollback=True):
        rows = conn.execute(render(sql, "forklift"), PARAMS).fetchall()
    return {r[2] for r in rows if r[0] is not None}


def explain(conn: psycopg.Connection[Any], sql: str) -> dict[str, Any]:
    params = PARAMS
    with conn.transaction(force_rollback=True):
        row = conn.execute(
            "EXPLAIN (ANALYZE, FORMAT JSON) " + render(sql, "forklift"), params
        ).fetchone()
    assert row is not None
    doc = row[0] if not isinstance(row[0], str) else json.loads(row[0])
    return dict(doc[0]["Plan"])


@pytest.mark.parametrize("analyzed", [False, True], ids=["before-analyze", "after-analyze"])
def test_the_claim_reads_only_what_it_takes(
    half_drained: psycopg.Connection[Any], analyzed: bool
) -> None:
    conn = half_drained
    if analyzed:
        conn.execute("ANALYZE forklift.jobs")
    for name, sql in statements():
        plan = explain(conn, sql)
        taken = plan.get("Actual Rows", 0)
        assert taken == BATCH or name == "CLAIM_FREE_SQL", (name, taken)
        bad = problems(plan, len(QUEUES))
        assert not bad, f"{name}: {bad}\n{json.dumps(plan, indent=1)[:6000]}"
        assert claimed_kinds(conn, sql) == {"plan.job"}, name
