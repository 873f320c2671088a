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
import re
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from forklift._db.sqltext import render
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


# -- the flow claim (forklift._features.flow.claim): keys, rates, fair share ---------------------------------
PARTITIONS = 300  # tenants per queue
PLAIN_RUNNING = 3_000  # the fleet's other running and buffered jobs
# The running indexes, whose scans may filter (a key value's holders among the running keyed
# jobs; the settled rows among the running ones): bounded by what runs, never by the backlog.
RUNNING = ("jobs_running_idx", "jobs_holders_idx")
# HOLDERS_UNSEEN: a table never analyzed gives the planner no way to tell jobs_holders_idx (the
# running keyed jobs) from jobs_running_idx (every running job): both partial indexes look the
# same size, and a plan made then may count holders over every running job (seen once in a
# soak beside a CPU hog). The leader's planner-stats chore analyzes such a table within
# seconds, and the sessions plan again; from then on the holders' index is the one.


@pytest.fixture
def keyed_half_drained(conn: psycopg.Connection[Any]) -> psycopg.Connection[Any]:
    """The same shape with keyed jobs: every queue flagged for the flow claim, its jobs spread
    over many tenants (the partition) and a few rated accounts (a second key), the head tenant
    of each queue at its limit with a backlog, a rated queue and a fair one."""
    conn.execute(  # the second key has a rate too: a bucket per account value
        "INSERT INTO forklift.flow_keys (name, concurrency, rate_limit, rate_per, rate_burst)"
        " VALUES ('tenant', 2, NULL, NULL, NULL), ('account', 50, 1000, 1, 1000)")
    conn.execute(
        "INSERT INTO forklift.jobs (queue, kind, run_at, keys)"
        " SELECT q, 'plan.job', now() - make_interval(secs => %s - i),"
        " ARRAY['tenant' || chr(31) || 't' || (i %% %s), 'account' || chr(31) || 'a' || (i %% 7)]"
        " FROM unnest(%s::text[]) AS q, generate_series(1, %s) AS i",
        (PER_QUEUE, PARTITIONS, QUEUES, PER_QUEUE),
    )
    conn.execute(  # the head tenant's backlog, ahead of everyone
        "INSERT INTO forklift.jobs (queue, kind, priority, run_at, keys)"
        " SELECT q, 'plan.job', -1, now() - interval '1 day',"
        " ARRAY['tenant' || chr(31) || 'head', 'account' || chr(31) || 'a0']"
        " FROM unnest(%s::text[]) AS q, generate_series(1, %s) AS i", (QUEUES, FOREIGN),
    )
    conn.execute(
        "UPDATE forklift.jobs SET state = 'completed', attempt = 1, finished_at = now()"
        " WHERE run_at < now() - make_interval(secs => %s) AND priority = 0", (PER_QUEUE // 2,)
    )
    conn.execute(  # the head tenant is at its limit in every queue
        "UPDATE forklift.jobs SET state = 'running', attempt = 1, worker_id = 'w', fence = id,"
        " attempted_at = now(), lease_expires_at = now() + interval '1 hour'"
        " WHERE id IN (SELECT id FROM forklift.jobs WHERE priority = -1 ORDER BY id LIMIT 2)")
    conn.execute("UPDATE forklift.queues SET rate_limit = 1000, rate_per = 1, rate_burst = 1000"
                 " WHERE name = %s", (QUEUES[0],))
    conn.execute("UPDATE forklift.queues SET fair = true WHERE name = %s", (QUEUES[1],))
    conn.execute("INSERT INTO forklift.flow_values (key) VALUES (%s) ON CONFLICT DO NOTHING",
                 ("@" + QUEUES[0],))
    # The rest of the fleet: plain jobs running or waiting in workers' local buffers (state
    # running), many more than the keyed jobs running. Counting a value's holders must not
    # read them (migration 0016).
    conn.execute(
        "INSERT INTO forklift.jobs (queue, kind, state, attempt, worker_id, fence,"
        " lease_expires_at) SELECT 'elsewhere', 'plan.job', 'running', 1, 'other', -i,"
        " now() + interval '1 hour' FROM generate_series(1, %s) AS i", (PLAIN_RUNNING,))
    return conn


def read_plain_running(plan: dict[str, Any]) -> list[str]:
    """Scans of jobs that read the fleet's plain running jobs (more rows than every keyed
    job running here could make)."""
    found = []
    for node in nodes(plan):
        if node.get("Relation Name") != "jobs" or "Index Name" not in node:
            continue
        loops = max(1, node.get("Actual Loops", 1))
        read = (node.get("Actual Rows", 0) + node.get("Rows Removed by Filter", 0)) * loops
        if read >= PLAIN_RUNNING // 2:
            found.append(f"{node.get('Node Type')} via {node.get('Index Name')} read {read} rows")
    return found


def flow_problems(plan: dict[str, Any], params: dict[str, Any]) -> list[str]:
    found = []
    pairs = len(params["pq"])
    # What the walks can return: the window (room) and the rotation's heads (about the batch
    # plus one per partition visited) per (queue, kind).
    bound = (2 * BATCH + params["visit"]) * pairs
    for node in nodes(plan):
        kind, rel = node.get("Node Type"), node.get("Relation Name")
        rows = node.get("Actual Rows", 0) * max(1, node.get("Actual Loops", 1))
        removed = node.get("Rows Removed by Filter", 0) + node.get("Rows Removed by Index Recheck", 0)
        if rel == "jobs" and kind == "Seq Scan":
            found.append("a sequential scan of jobs")
        if kind == "Sort" and rows > bound:
            found.append(f"a Sort of {rows} rows (more than the walks return, {bound}):"
                         f" {node.get('Sort Key')}")
        # Counting a key value's running jobs reads the running keyed jobs (jobs_holders_idx):
        # bounded by what runs, never by the backlog. So does a bitmap over a running index
        # (HOLDERS_UNSEEN: a custom plan made before any ANALYZE may take one), as in the
        # hand-off's test below.
        through = node.get("Index Name") or next(
            (c.get("Index Name") for c in nodes(node) if c.get("Index Name") in RUNNING), None)
        if rel == "jobs" and removed > 0 and through not in RUNNING:
            found.append(f"{kind} on jobs via {node.get('Index Name')} filtered out {removed} rows")
        if kind == "LockRows" and any(n.get("Relation Name") == "jobs" for n in nodes(node)) \
                and rows > BATCH:
            found.append(f"{rows} jobs locked for a batch of {BATCH}")
    return found


# The flow claim's parameters and their types, for a prepared statement of it.
FLOW_TYPES = {"queues": "text[]", "kinds": "text[]", "pq": "text[]", "pk": "text[]",
              "pc": "text[]", "n": "int", "start": "int", "visit": "int", "w": "text",
              "lease": "float8", "soon": "float8", "cap": "int"}


def explain_flow(conn: psycopg.Connection[Any], sql: str, params: dict[str, Any],
                 generic: bool, types: dict[str, str] = FLOW_TYPES) -> dict[str, Any]:
    """EXPLAIN ANALYZE a flow statement with these parameters: planned for them (a custom
    plan), or as the worker runs it, the generic plan of its prepared statement."""
    with conn.transaction(force_rollback=True):
        if not generic:
            row = conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, params).fetchone()
        else:
            names = list(types)
            text = re.sub(r"%\((\w+)\)[sb]", lambda m: f"${names.index(m.group(1)) + 1}", sql)
            conn.execute("SET LOCAL plan_cache_mode = force_generic_plan")
            conn.execute(f"PREPARE flow_plan ({', '.join(types.values())}) AS "
                         + text.replace("%%", "%"))
            row = psycopg.ClientCursor(conn).execute(  # EXECUTE takes literals
                "EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE flow_plan ("
                + ", ".join(["%s"] * len(names)) + ")", [params[k] for k in names]).fetchone()
            conn.execute("DEALLOCATE flow_plan")
    assert row is not None
    return dict((row[0] if not isinstance(row[0], str) else json.loads(row[0]))[0]["Plan"])


@pytest.mark.parametrize("generic", [False, True], ids=["custom", "generic"])
@pytest.mark.parametrize("analyzed", [False, True], ids=["before-analyze", "after-analyze"])
def test_the_flow_claim_reads_only_what_it_takes(
    keyed_half_drained: psycopg.Connection[Any], analyzed: bool, generic: bool
) -> None:
    from forklift._features.flow.claim import FLOW_CLAIM_SQL, FlowClaim

    conn = keyed_half_drained
    if analyzed:
        conn.execute("ANALYZE forklift.jobs")
    params = FlowClaim("plan-test", 30.0, queues=QUEUES, kinds=KINDS).params(BATCH, BATCH // 2)
    assert set(params) == set(FLOW_TYPES)
    plan = explain_flow(conn, render(FLOW_CLAIM_SQL, "forklift"), params, generic)
    bad = flow_problems(plan, params)
    assert not bad, f"{bad}\n{json.dumps(plan, indent=1)[:8000]}"
    indexes = {n.get("Index Name") for n in nodes(plan)}
    # Partitions by the keyed index; once the table has statistics, the values' holders by
    # the running keyed jobs' btree, never by a pass over every running job of the fleet
    # (HOLDERS_UNSEEN: before any, the planner cannot tell the two partial indexes apart).
    assert "jobs_keyed_idx" in indexes, indexes
    if analyzed:
        assert "jobs_holders_idx" in indexes, indexes
        assert not read_plain_running(plan), read_plain_running(plan)
    # Every job here is rated (its account key) or in a fair or rated queue: none may wait in
    # a buffer, so a batch whose jobs all start now.
    params = FlowClaim("plan-test", 30.0, queues=QUEUES, kinds=KINDS).params(BATCH, BATCH)
    with conn.transaction(force_rollback=True):
        rows = conn.execute(render(FLOW_CLAIM_SQL, "forklift"), params).fetchall()
        ids = [r[0] for r in rows if r[0] is not None]
        head = conn.execute("SELECT count(*) FROM forklift.jobs WHERE id = ANY(%s)"
                            " AND keys[1] LIKE '%%head'", (ids,)).fetchone()
    # A full batch from the free tenants: the head tenant's backlog, at its limit and ahead of
    # everyone, held nobody back.
    assert len(ids) == BATCH and head == (0,)


# -- the hand-off (forklift._features.flow.handoff): the settle statement that claims the next jobs ---------
HANDOFF_TYPES = {"p0": "bigint[]", "p1": "bigint[]", "p2": "jsonb[]", "budget": "int",
                 "kinds": "text[]", "w": "text", "lease": "float8"}


@pytest.mark.parametrize("generic", [False, True], ids=["custom", "generic"])
@pytest.mark.parametrize("analyzed", [False, True], ids=["before-analyze", "after-analyze"])
@pytest.mark.parametrize("lowered", [False, True], ids=["limits-as-set", "limits-lowered"])
def test_the_handoff_reads_only_what_it_takes(
    keyed_half_drained: psycopg.Connection[Any], analyzed: bool, generic: bool, lowered: bool
) -> None:
    """A batch of settled keyed jobs, each with a backlog of jobs of the same values behind it
    (and the half-drained backlogs of every other tenant around them): the hand-off finds each
    one's next job by the keyed index and locks no more than it takes. It counts the values'
    holders only for keys whose limit fell (flow_keys.lowered_at, migration 0017)."""
    from forklift._features.flow.handoff import Handoff, statement
    from forklift._worker import settle

    conn = keyed_half_drained
    queue = QUEUES[2]  # neither rated nor fair
    conn.execute("UPDATE forklift.flow_keys SET rate_limit = NULL, rate_per = NULL,"
                 " rate_burst = NULL WHERE name = 'account'")
    conn.execute("UPDATE forklift.flow_keys SET lowered_at = CASE WHEN %s THEN now() END",
                 (lowered,))
    conn.execute(
        "INSERT INTO forklift.jobs (queue, kind, run_at, keys)"
        " SELECT %s, 'plan.job', now() - interval '1 hour' + make_interval(secs => i),"
        " ARRAY['tenant' || chr(31) || 'hx' || (i %% %s), 'account' || chr(31) || 'hx' || (i %% %s)]"
        " FROM generate_series(1, %s) AS i", (queue, BATCH, BATCH, BATCH * 50))
    held = [r[0] for r in conn.execute(
        "UPDATE forklift.jobs SET state = 'running', attempt = 1, worker_id = 'plan-test',"
        " fence = id, attempted_at = now(), lease_expires_at = now() + interval '1 hour'"
        " WHERE id IN (SELECT DISTINCT ON (keys) id FROM forklift.jobs WHERE queue = %s"
        " AND state = 'available' AND keys[1] LIKE %s ORDER BY keys, run_at, id)"
        " RETURNING id", (queue, "tenant\x1fhx%"))]
    assert len(held) == BATCH
    if analyzed:
        conn.execute("ANALYZE forklift.jobs")
    handoff = Handoff("plan-test", 30.0, KINDS, BATCH)
    params = handoff.params((sorted(held), sorted(held), ["null"] * BATCH))
    assert set(params) == set(HANDOFF_TYPES)
    sql = statement(settle.COMPLETE_SQL, "forklift")
    plan = explain_flow(conn, sql, params, generic, HANDOFF_TYPES)
    # Reading running jobs by a running index (the values' holders, or the settled rows) is
    # bounded by what runs, never by the backlog, as in the flow claim.
    running = [n for n in nodes(plan) if n.get("Index Name") in RUNNING or (
        n.get("Node Type") == "Bitmap Heap Scan" and any(
            c.get("Index Name") in RUNNING for c in nodes(n)))]
    allowed = {f"{n.get('Node Type')} on jobs via {n.get('Index Name')} filtered out"
               for n in running}
    bad = [p for p in problems(plan, 1) if p.rsplit(" ", 2)[0] not in allowed]
    assert not bad, f"{bad}\n{json.dumps(plan, indent=1)[:8000]}"
    indexes = {n.get("Index Name") for n in nodes(plan)}
    assert "jobs_keyed_idx" in indexes and "jobs_claim_idx" not in indexes, indexes
    # Once the table has statistics, the holders are counted by the running keyed jobs' btree
    # (migration 0016), and neither they nor the settled rows are found by a pass over every
    # running job of the fleet (HOLDERS_UNSEEN).
    if analyzed:
        assert "jobs_holders_idx" in indexes, indexes
        assert not read_plain_running(plan), read_plain_running(plan)
    # the holders' scan runs for lowered keys only (the settled rows are read by primary key)
    counted = [n for n in nodes(plan) if n.get("Index Name") in RUNNING and n.get("Actual Loops")]
    assert bool(counted) == lowered, counted
    # every settled job handed its slots on: as many rows back as settled and taken
    assert plan.get("Actual Rows") == 2 * BATCH
    with conn.transaction(force_rollback=True):
        rows = conn.execute(sql, params).fetchall()
    taken = [r[0] for r in rows if r[0] is not None]
    assert len(taken) == BATCH and not set(taken) & set(held)


# -- fair share by tenant: unkeyed jobs that name a tenant (jobs_tenant_fair_idx, migration 0024)
@pytest.fixture
def tenant_half_drained(conn: psycopg.Connection[Any]) -> psycopg.Connection[Any]:
    """Unkeyed jobs spread over many tenants in every queue, the head tenant's backlog ahead of
    everyone, the older half done; the first queue fair, the second an unfair flow queue (a
    rate), the third fair with keyed jobs whose tenant column names one tenant for all."""
    conn.execute(
        "INSERT INTO forklift.jobs (queue, kind, run_at, tenant)"
        " SELECT q, 'plan.job', now() - make_interval(secs => %s - i), 't' || (i %% %s)"
        " FROM unnest(%s::text[]) AS q, generate_series(1, %s) AS i",
        (PER_QUEUE, PARTITIONS, QUEUES[:2], PER_QUEUE))
    conn.execute(
        "INSERT INTO forklift.jobs (queue, kind, priority, run_at, tenant)"
        " SELECT q, 'plan.job', -1, now() - interval '1 day', 'head'"
        " FROM unnest(%s::text[]) AS q, generate_series(1, %s) AS i", (QUEUES[:2], FOREIGN))
    conn.execute("INSERT INTO forklift.flow_keys (name) VALUES ('account')")
    conn.execute(
        "INSERT INTO forklift.jobs (queue, kind, priority, run_at, tenant, keys)"
        " SELECT %s, 'plan.job', -(i %% 2), now() - make_interval(secs => %s - i), 'one',"
        " ARRAY['account' || chr(31) || 'a' || (i %% %s)] FROM generate_series(1, %s) AS i",
        (QUEUES[2], PER_QUEUE, PARTITIONS, PER_QUEUE))
    conn.execute(
        "UPDATE forklift.jobs SET state = 'completed', attempt = 1, finished_at = now()"
        " WHERE run_at < now() - make_interval(secs => %s) AND priority = 0", (PER_QUEUE // 2,))
    conn.execute("INSERT INTO forklift.queues (name, flow, fair) VALUES (%s, true, true),"
                 " (%s, true, false), (%s, true, true) ON CONFLICT (name) DO UPDATE"
                 " SET flow = true, fair = excluded.fair", QUEUES)
    conn.execute("UPDATE forklift.queues SET rate_limit = 1000, rate_per = 1, rate_burst = 1000"
                 " WHERE name = %s", (QUEUES[1],))
    conn.execute("INSERT INTO forklift.flow_values (key) VALUES (%s)", ("@" + QUEUES[1],))
    return conn


def loops_on(plan: dict[str, Any], index: str) -> int:
    return sum(n.get("Actual Loops", 0) for n in nodes(plan) if n.get("Index Name") == index)


@pytest.mark.parametrize("generic", [False, True], ids=["custom", "generic"])
@pytest.mark.parametrize("analyzed", [False, True], ids=["before-analyze", "after-analyze"])
def test_a_fair_queue_walks_its_tenants_by_index(
    tenant_half_drained: psycopg.Connection[Any], analyzed: bool, generic: bool
) -> None:
    """A fair queue's unkeyed jobs take turns by tenant, found by a loose scan of
    jobs_tenant_fair_idx; an unfair queue never starts that scan; a keyed kind in a fair queue
    takes turns by its first key, whatever its tenant column says."""
    from forklift._features.flow.claim import FLOW_CLAIM_SQL, FlowClaim

    conn = tenant_half_drained
    if analyzed:
        conn.execute("ANALYZE forklift.jobs")
    sql = render(FLOW_CLAIM_SQL, "forklift")
    for queue, fair in zip(QUEUES, [True, False, True], strict=True):
        params = FlowClaim("plan-test", 30.0, queues=[queue], kinds=KINDS).params(BATCH, BATCH)
        plan = explain_flow(conn, sql, params, generic)
        bad = flow_problems(plan, params)
        assert not bad, f"{queue}: {bad}\n{json.dumps(plan, indent=1)[:8000]}"
        walked = loops_on(plan, "jobs_tenant_fair_idx")
        assert (walked > 0) == fair, (queue, walked)  # an empty probe beside keyed partitions
        with conn.transaction(force_rollback=True):
            rows = conn.execute(sql, params).fetchall()
            ids = [r[0] for r in rows if r[0] is not None]
            parts = conn.execute(
                "SELECT coalesce(keys[1], tenant) FROM forklift.jobs WHERE id = ANY(%s)",
                (ids,)).fetchall()
        assert len(ids) == BATCH, queue
        if fair:
            # each partition's first before any second: the head tenant's backlog, ahead of
            # everyone in claim order, gets one turn like every other tenant
            assert len({p for (p,) in parts}) == BATCH, (queue, parts)
        else:
            assert {p for (p,) in parts} == {"head"}, parts  # claim order
