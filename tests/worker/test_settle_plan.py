"""The statements that find a batch of a worker's jobs by id read them by primary key.

Settle, complete, heartbeat, start, progress and release each join an array of (id, fence) to
the jobs they name, running ones only. Their sessions keep generic plans (the claim's and the
lanes' by setting, the others once PostgreSQL's plan cache picks one), planned from whatever the
statistics said. Statistics taken while almost nothing ran made the generic plan walk every
running job of the fleet through ``jobs_running_idx`` and join the batch's array to each of
them: a settle of 1,000 beside 1,326 running jobs took 214 ms (seen in ``forklift bench``'s
``claim_backlog``). Here the statistics are taken with nothing running, then 3,000 jobs run and
each statement's generic plan is EXPLAIN ANALYZEd for a batch of 500 of them: it must read the
batch by primary key and nothing more.
"""

from __future__ import annotations

import json
import re
from typing import Any

import psycopg
import pytest
from test_claim_plan import nodes

from forklift._db.sqltext import render
from forklift._worker import claim, leases, settle

RUNNING = 3_000
BATCH = 500


@pytest.fixture
def busy(conn: psycopg.Connection[Any]) -> psycopg.Connection[Any]:
    conn.execute("INSERT INTO forklift.jobs (queue, kind, args) SELECT 'default', 'plan.job',"
                 " '{}' FROM generate_series(1, 20000)")
    conn.execute("ANALYZE forklift.jobs")  # taken while nothing runs
    conn.execute("UPDATE forklift.jobs SET state = 'running', attempt = 1, worker_id = 'w',"
                 " fence = id, lease_expires_at = now() + interval '1 hour'"
                 " WHERE id <= %s", (RUNNING,))
    return conn


def _batch() -> tuple[list[int], list[int]]:
    ids = list(range(RUNNING - BATCH + 1, RUNNING + 1))
    return ids, ids


def _cases() -> list[tuple[str, str, list[tuple[str, Any]]]]:
    ids, fences = _batch()
    n = len(ids)
    return [
        ("COMPLETE_SQL", settle.COMPLETE_SQL,
         [("bigint[]", ids), ("bigint[]", fences), ("jsonb[]", ["null"] * n)]),
        ("SETTLE_SQL", settle.SETTLE_SQL,
         [("bigint[]", ids), ("bigint[]", fences), ("text[]", ["retryable"] * n),
          ("float8[]", [1.0] * n), ("int4[]", [0] * n), ("jsonb[]", [None] * n),
          ("jsonb[]", ['{"code": "x"}'] * n), ("jsonb[]", [None] * n), ("jsonb[]", [None] * n)]),
        ("HEARTBEAT_SQL", leases.HEARTBEAT_SQL,
         [("bigint[]", ids), ("bigint[]", fences), ("float8", 30.0)]),
        ("START_SQL", leases.START_SQL,
         [("bigint[]", ids), ("bigint[]", fences), ("float8[]", [0.0] * n)]),
        ("PROGRESS_SQL", leases.PROGRESS_SQL,
         [("bigint[]", ids), ("bigint[]", fences), ("jsonb[]", ['{"p": 1}'] * n),
          ("jsonb[]", [None] * n)]),
        ("RELEASE_SQL", claim.RELEASE_SQL, [("bigint[]", ids), ("bigint[]", fences)]),
    ]


def _generic_plan(conn: psycopg.Connection[Any], sql: str,
                  params: list[tuple[str, Any]]) -> dict[str, Any]:
    counter = iter(range(1, len(params) + 1))
    text = re.sub(r"%[sb]", lambda _: f"${next(counter)}", render(sql, "forklift"))
    with conn.transaction(force_rollback=True):
        conn.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        conn.execute(f"PREPARE by_id ({', '.join(t for t, _ in params)}) AS {text}")
        row = psycopg.ClientCursor(conn).execute(  # EXECUTE takes literals
            "EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE by_id ("
            + ", ".join(f"%s::{t}" for t, _ in params) + ")", [v for _, v in params]).fetchone()
    assert row is not None
    return dict((row[0] if not isinstance(row[0], str) else json.loads(row[0]))[0]["Plan"])


def _problems(plan: dict[str, Any]) -> list[str]:
    found = []
    for node in nodes(plan):
        loops = max(1, node.get("Actual Loops", 1))
        joined_away = node.get("Rows Removed by Join Filter", 0)
        if joined_away > BATCH:
            found.append(f"{node.get('Node Type')} threw away {joined_away} rows in its join")
        if node.get("Relation Name") == "jobs":
            read = (node.get("Actual Rows", 0) + node.get("Rows Removed by Filter", 0)) * loops
            if read > 2 * BATCH:
                found.append(f"{node.get('Node Type')} on jobs via {node.get('Index Name')}"
                             f" read {read} rows for a batch of {BATCH}")
    return found


@pytest.mark.parametrize("name", [c[0] for c in _cases()])
def test_a_batch_found_by_id_is_read_by_primary_key(
    busy: psycopg.Connection[Any], name: str
) -> None:
    if name == "START_SQL":  # it stamps buffered jobs, whose start is not recorded yet
        busy.execute("UPDATE forklift.jobs SET attempted_at = NULL WHERE state = 'running'")
    _, sql, params = next(c for c in _cases() if c[0] == name)
    plan = _generic_plan(busy, sql, params)
    bad = _problems(plan)
    assert not bad, f"{name}: {bad}\n{json.dumps(plan, indent=1)[:6000]}"
    assert "jobs_pkey" in {n.get("Index Name") for n in nodes(plan)}, name
