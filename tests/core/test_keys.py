"""Per-key concurrency (forklift._features.flow.keys, the flow claim): key values computed at enqueue and
refused when a key function misbehaves, declarations recorded by workers and overridden by
operators, and across many worker processes never more jobs of one key value running than its
limit (an external ledger of handler starts and ends)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from apps import flow_keys
from apps.flow_keys import Work, claim_once
from typer.testing import CliRunner

from forklift import Callback, ConfigError, Forklift, InvalidKey, InvalidOption, Key, Rate
from forklift._features.flow import declare
from forklift.cli.main import app as cli
from forklift.ops import Operator

SEP = "\x1f"


@pytest.fixture
def app(dsn: str, conn: psycopg.Connection[Any]) -> Iterator[Forklift]:
    flow_keys.setup(conn)
    flow_keys.app.use(dsn)
    try:
        yield flow_keys.app
    finally:
        flow_keys.app.close()


def keys_of(conn: psycopg.Connection[Any], ids: list[int]) -> list[Any]:
    rows = conn.execute("SELECT id, keys FROM forklift.jobs WHERE id = ANY(%s) ORDER BY id",
                        (ids,)).fetchall()
    return [r[1] for r in rows]


def flagged(conn: psycopg.Connection[Any], queue: str) -> bool:
    row = conn.execute("SELECT flow FROM forklift.queues WHERE name = %s", (queue,)).fetchone()
    return bool(row and row[0])


def run(dsn: str, *args: str) -> Any:
    return CliRunner().invoke(cli, list(args), env={"FORKLIFT_DSN": dsn, "FORKLIFT_ACTOR": "ann"})


# -- enqueue ----------------------------------------------------------------------------------------
def test_key_values_are_computed_at_enqueue_by_every_path(
    app: Forklift, conn: psycopg.Connection[Any]
) -> None:
    k = flow_keys.keyed
    ids = [
        k.enqueue(Work("acme", "a1")).id,
        k.enqueue(Work("acme", "a2"), delay=60).id,
        k.enqueue(Work("zeta", "a3"), unique_key="u1").id,
        *k.enqueue_many([Work("acme", "a4"), Work("beta", "a5")]),
        *k.enqueue_many([Work("beta", "a6")], unique_key="u2"),
    ]
    ids.append(k.enqueue(Work("gamma", "a7"), after=[ids[0]]).id)  # held until ids[0] settles
    batch, _ = app.batch(k, [Work("delta", "b1"), Work("delta", "b2")], caller="t",
                         max_parallel=1)  # one target released, one held
    ids += [r[0] for r in conn.execute("SELECT id FROM forklift.jobs WHERE batch_id = %s"
                                       " ORDER BY batch_index", (batch.id,))]
    want = [[f"tenant{SEP}{t}", f"account{SEP}{a}"] for t, a in
            [("acme", "a1"), ("acme", "a2"), ("zeta", "a3"), ("acme", "a4"), ("beta", "a5"),
             ("beta", "a6"), ("gamma", "a7"), ("delta", "b1"), ("delta", "b2")]]
    with pytest.raises(InvalidOption, match=r"on_complete: kind flow\.keys\.sync declares keys"):
        app.batch(flow_keys.plain, [Work("x")], caller="t",  # the callback could not carry them
                  on_complete=Callback(k, args={"tenant": "t", "account": "a"}))
    assert keys_of(conn, ids) == want
    # replace: the new payload's keys with it
    k.enqueue(Work("omega", "a9"), unique_key="u1", on_conflict="replace")
    assert keys_of(conn, [ids[2]]) == [[f"tenant{SEP}omega", f"account{SEP}a9"]]
    # The insert trigger made a value row for every key value and flagged the queue.
    values = {r[0] for r in conn.execute("SELECT key FROM forklift.flow_values")}
    assert {e for w in want for e in w} <= values
    assert flagged(conn, "keyed")


def test_kinds_without_keys_store_none_and_leave_their_queue_alone(
    app: Forklift, conn: psycopg.Connection[Any]
) -> None:
    plain = Forklift(app.dsn)

    @plain.job(name="plain.one", queue="plain")
    def one(ctx: Any, args: dict[str, Any]) -> None: ...

    try:
        ids = [one.enqueue({}).id, *one.enqueue_many([{}, {}]), one.enqueue({}, delay=5).id]
    finally:
        plain.close()
    assert keys_of(conn, ids) == [None] * 4
    assert not flagged(conn, "plain")
    assert conn.execute("SELECT count(*) FROM forklift.flow_values").fetchone() == (0,)


def test_a_worker_claims_unkeyed_queues_without_the_flow_claim_until_a_keyed_job_arrives(
    app: Forklift, conn: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A queue that uses no key pays nothing: its claims are the plain ones (with the local
    buffer) until its first keyed job flags it."""
    from apps.basic import running_worker
    from helpers import wait_until

    flow_runs = flow_keys.count_flow_claims(monkeypatch)

    def done(ids: list[int]) -> bool:
        row = conn.execute("SELECT count(*) FROM forklift.jobs WHERE id = ANY(%s)"
                           " AND state = 'completed'", (ids,)).fetchone()
        return row == (len(ids),)

    with running_worker(app, queues=["keyed"], concurrency=4) as w:
        plain = flow_keys.plain.enqueue_many([Work("p") for _ in range(200)])
        wait_until(lambda: done(plain), timeout=60, message="the plain jobs did not finish")
        assert flow_runs == [] and w.producer.flow.queues == [] and not flagged(conn, "keyed")
        keyed = [flow_keys.solo.enqueue(Work("k")).id]
        wait_until(lambda: done(keyed), timeout=60, message="the keyed job did not finish")
    assert flow_runs and flagged(conn, "keyed")


@pytest.mark.parametrize(("args", "reason"), [
    ({}, "raised KeyError"), ({"tenant": 5}, "returned int, not a string"),
    ({"tenant": ""}, "is empty"), ({"tenant": "a\u200bb"}, "U+200B"),
    ({"tenant": " padded"}, "whitespace"),
])
def test_a_misbehaving_key_function_refuses_the_enqueue_naming_the_kind(
    app: Forklift, conn: psycopg.Connection[Any], args: dict[str, Any], reason: str
) -> None:
    for attempt in (lambda: flow_keys.loose.enqueue(args),
                    lambda: flow_keys.loose.enqueue_many([{"tenant": "ok"}, args])):
        with pytest.raises(InvalidKey) as refused:
            attempt()
        err = refused.value
        assert err.code == "invalid_key" and isinstance(err, Exception)
        assert (err.detail["kind"], err.detail["key"]) == ("flow.keys.loose", "loose")
        assert reason in err.message and "flow.keys.loose" in err.message
    assert conn.execute("SELECT count(*) FROM forklift.jobs").fetchone() == (0,)


@pytest.mark.parametrize("declaration", [
    lambda: Key(str, limit=0), lambda: Key(str, limit=-1), lambda: Key(str, limit=True),
    lambda: Key(str, limit="2"), lambda: Key("tenant"), lambda: Key(str, name=""),
    lambda: Key(str, rate=100), lambda: Rate(0), lambda: Rate(10, per=0),
    lambda: Rate(10, per=float("inf")), lambda: Rate(10, burst=0), lambda: Rate(2.5),
    lambda: Rate.parse("fast"), lambda: Rate.parse("10/0s"), lambda: Rate.parse("-1/s"),
])
def test_bad_declarations_are_refused(declaration: Any) -> None:
    with pytest.raises(ConfigError) as refused:
        declaration()
    assert refused.value.code == "config_error"


def test_a_kind_refuses_the_same_key_twice_and_too_many_keys() -> None:
    app = Forklift("postgresql://unused")
    with pytest.raises(ConfigError, match="twice"):
        app.job(name="twice", concurrency=[Key(str, name="k"), Key(str, name="k")])(
            lambda ctx, p: None)
    with pytest.raises(ConfigError, match="at most 8"):
        app.job(name="many", concurrency=[Key(str) for _ in range(9)])(lambda ctx, p: None)
    with pytest.raises(ConfigError, match="list of Key"):
        app.job(name="notkeys", concurrency=["tenant"])(lambda ctx, p: None)  # type: ignore[list-item]


def test_rates_parse_as_n_per_period() -> None:
    assert [str(Rate.parse(t)) for t in ("100/s", "10/5s", "600/m", "2/h", "50/250ms")] == [
        "100/s", "10/5s", "600/60s", "2/3600s", "50/0.25s"]
    assert Rate.parse("10/5s").to_json() == {"limit": 10, "per": 5.0, "burst": 10}


# -- declarations and operators ------------------------------------------------------------------
def test_workers_record_declarations_and_an_operators_override_sticks(
    app: Forklift, conn: psycopg.Connection[Any], dsn: str
) -> None:
    assert declare.record_sync(conn, "forklift", app) >= 4
    assert declare.record_sync(conn, "forklift", app) == 0  # unchanged: nothing rewritten
    data = json.loads(run(dsn, "keys", "list", "--json").stdout)
    by = {k["name"]: k for k in data}
    assert by["tenant"]["concurrency"] == 2 and by["tenant"]["kinds"] == ["flow.keys.sync"]
    assert by["flow.keys.rated"]["rate"] == {"limit": 20, "per_seconds": 1.0, "burst": 5,
                                             "text": "20/s"}
    assert by["vendor"]["concurrency"] is None and by["vendor"]["rate"]["burst"] == 2

    assert run(dsn, "keys", "limit", "tenant", "5", "--reason", "big tenant").exit_code == 0
    declare.record_sync(conn, "forklift", app)  # a worker starting again keeps the override
    conn.execute("UPDATE forklift.flow_keys SET declared = '{}' WHERE name = 'tenant'")
    declare.record_sync(conn, "forklift", app)
    shown = json.loads(run(dsn, "keys", "show", "tenant", "--json").stdout)["key"]
    assert (shown["concurrency"], shown["overridden"], shown["set_by"]) == (5, True, "ann")
    assert run(dsn, "keys", "rate", "tenant", "3/s", "--burst", "1").exit_code == 0
    reset = json.loads(run(dsn, "keys", "reset", "tenant", "--json").stdout)
    assert (reset["concurrency"], reset["rate"], reset["overridden"]) == (2, None, False)
    audit = conn.execute("SELECT actor, action, target->>'key', reason FROM forklift.audit"
                         " ORDER BY id").fetchall()
    assert audit == [("ann", "key_limit", "tenant", "big tenant"),
                     ("ann", "key_rate", "tenant", None), ("ann", "key_reset", "tenant", None)]


def test_key_commands_refuse_bad_input_clearly(app: Forklift, conn: psycopg.Connection[Any],
                                               dsn: str) -> None:
    declare.record_sync(conn, "forklift", app)
    for args, code in [(["keys", "limit", "tenant", "0"], 2), (["keys", "limit", "tenant", "x"], 2),
                       (["keys", "rate", "tenant", "fast"], 2), (["keys", "show", "nope"], 1),
                       (["keys", "limit", "nope", "2"], 1), (["queues", "rate", "nowhere", "5/s"], 1),
                       (["queues", "fair", "keyed", "maybe"], 2)]:
        got = run(dsn, *args, "--json")
        assert got.exit_code == code, (args, got.stdout, got.stderr)
        assert "Traceback" not in got.stderr
    missing = json.loads(run(dsn, "keys", "show", "nope", "--json").stdout)["error"]
    assert missing["code"] == "key_not_found" and "tenant" in missing["message"]


def test_queue_rate_and_fair_share_are_set_live_and_audited(
    app: Forklift, conn: psycopg.Connection[Any], dsn: str
) -> None:
    data = json.loads(run(dsn, "queues", "rate", "mail", "100/s", "--create", "--json").stdout)
    assert (data["rate_limit"], data["rate_per"], data["rate_burst"]) == (100, 1.0, 100)
    assert flagged(conn, "mail")
    assert json.loads(run(dsn, "queues", "fair", "mail", "on", "--json").stdout)["fair"] is True
    with Operator(dsn) as op:
        flow = op.queue_flow("mail")
        assert flow.rate is not None and flow.rate.text == "100/s"
        assert flow.bucket is not None and flow.bucket.tokens == 100
    lifted = json.loads(run(dsn, "queues", "rate", "mail", "none", "--json").stdout)
    assert lifted["rate_limit"] is None
    assert conn.execute("SELECT action, target FROM forklift.audit ORDER BY id").fetchall() == [
        ("queue_rate", {"queue": "mail", "rate": "100/s"}),
        ("queue_fair", {"queue": "mail", "fair": True}),
        ("queue_rate", {"queue": "mail", "rate": None})]


# -- the flow claim (in-process) ------------------------------------------------------------------
def test_the_flow_claim_admits_within_every_limit_and_passes_blocked_partitions(
    app: Forklift, conn: psycopg.Connection[Any], dsn: str
) -> None:
    from forklift._features.flow.claim import FlowClaim

    declare.record_sync(conn, "forklift", app)
    k = flow_keys.keyed
    k.enqueue_many([Work("t1", f"a{i}") for i in range(50)])  # a backlog ahead of t2
    k.enqueue_many([Work("t2", "b1"), Work("t2", "b1"), Work("t2", "b2")])
    fc = FlowClaim("w-test", 30.0, queues=["keyed"], kinds=["flow.keys.sync"])
    first = claim_once(dsn, fc, 10)
    got = sorted(f"{j.args['tenant']}:{j.args['account']}" for j in first.jobs)
    # t1 is at its limit after two; t2's head is taken despite the 48 of t1 ahead of it.
    assert got == ["t1:a0", "t1:a1", "t2:b1"]
    second = claim_once(dsn, fc, 10)  # t2 has room for one more: b1 is busy, b2 is free
    assert [f"{j.args['tenant']}:{j.args['account']}" for j in second.jobs] == ["t2:b2"]
    third = claim_once(dsn, fc, 10)
    assert third.jobs == [] and third.retry_in is None  # full, not waiting on a clock
    assert fc.cursors  # the walk left a cursor for the next claim


def test_the_flow_claim_takes_keyed_jobs_for_a_buffer_beyond_the_slots_that_start_now(
    app: Forklift, conn: psycopg.Connection[Any], dsn: str
) -> None:
    """A per-key limit counts claimed jobs, buffered or not: a worker may hold keyed jobs in
    its buffer (only fair, rated or limited queues' jobs must start at once)."""
    from forklift._features.flow.claim import FlowClaim

    declare.record_sync(conn, "forklift", app)
    flow_keys.solo.enqueue_many([Work(f"t{i}") for i in range(10)] + [Work("t0")])
    fc = FlowClaim("w-test", 30.0, queues=["keyed"], kinds=["flow.keys.tenant"])
    first = claim_once(dsn, fc, 12, start=2)
    assert len(first.jobs) == 10 and not first.strict  # one per tenant: t0's second waits
    assert sorted(j.started for j in first.jobs) == [False] * 8 + [True] * 2
    assert claim_once(dsn, fc, 12).jobs == []  # the buffered jobs hold their keys


def test_a_flow_claim_that_finds_its_picks_locked_by_another_claim_says_to_retry_soon(
    app: Forklift, conn: psycopg.Connection[Any], dsn: str
) -> None:
    """Two workers on one busy partition pick the same heads; the one that finds them locked
    (FOR UPDATE SKIP LOCKED) claims again soon instead of waiting out its poll."""
    from forklift._features.flow.claim import RETRY_SOON, FlowClaim

    declare.record_sync(conn, "forklift", app)
    flow_keys.solo.enqueue_many([Work(f"t{i}") for i in range(3)])
    fc = FlowClaim("w-test", 30.0, queues=["keyed"], kinds=["flow.keys.tenant"])
    with psycopg.connect(dsn) as other:  # a claim in flight elsewhere, holding the rows
        other.execute("SELECT id FROM forklift.jobs WHERE queue = 'keyed' FOR UPDATE")
        held = claim_once(dsn, fc, 3)
    assert held.jobs == [] and held.retry_in == pytest.approx(RETRY_SOON)
    free = claim_once(dsn, fc, 3)
    assert len(free.jobs) == 3 and free.retry_in is None


# -- through real workers --------------------------------------------------------------------------
def most_at_once(intervals: list[tuple[Any, Any]]) -> int:
    """The most intervals (start, end) overlapping at any instant (ends before starts on ties:
    a slot given back and taken again at the same microsecond is not an overlap)."""
    events = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals],
                    key=lambda x: (x[0], x[1]))
    now = top = 0
    for _, step in events:
        now += step
        top = max(top, now)
    return top


def ledger_by(conn: psycopg.Connection[Any], column: str) -> dict[str, list[tuple[Any, Any]]]:
    out: dict[str, list[tuple[Any, Any]]] = {}
    for value, start, end in conn.execute(
            f"SELECT {column}, started_at, ended_at FROM public.key_ledger"):
        assert end is not None, "a run never ended"
        out.setdefault(str(value), []).append((start, end))
    return out


def test_a_blocked_key_does_not_block_free_jobs_behind_it(
    app: Forklift, conn: psycopg.Connection[Any]
) -> None:
    from apps.basic import running_worker
    from helpers import wait_until

    holder = flow_keys.solo.enqueue(Work("busy", gate="g")).id
    flow_keys.solo.enqueue_many([Work("busy") for _ in range(200)])  # all behind the holder
    free = flow_keys.solo.enqueue(Work("free")).id
    with running_worker(app, queues=["keyed"], concurrency=4):
        wait_until(lambda: conn.execute("SELECT state FROM forklift.jobs WHERE id = %s",
                                        (free,)).fetchone() == ("completed",), timeout=30,
                   message="the free job waited behind the blocked key")
        states = dict(conn.execute("SELECT state, count(*) FROM forklift.jobs"
                                   " WHERE args->>'tenant' = 'busy' GROUP BY state").fetchall())
        assert states == {"running": 1, "available": 200}  # the limit of 1 held meanwhile
        conn.execute("INSERT INTO public.gates VALUES ('g')")
        wait_until(lambda: conn.execute("SELECT count(*) FROM forklift.jobs WHERE state ="
                                        " 'completed'").fetchone() == (202,), timeout=120)
    assert most_at_once(ledger_by(conn, "tenant")["busy"]) == 1
    assert holder


@pytest.mark.slow
def test_limits_are_never_exceeded_across_many_worker_processes(
    app: Forklift, conn: psycopg.Connection[Any], dsn: str, tmp_path: Any
) -> None:
    from apps import faults
    from helpers import wait_until

    procs = faults.Procs(dsn, tmp_path)
    try:
        workers = [procs.start(app="apps.flow_keys:app", concurrency=4, queues="keyed")
                   for _ in range(4)]
        for w in workers:
            faults.registered(conn, w)
        ids = flow_keys.keyed.enqueue_many([
            Work(f"t{i % 3}", f"a{i % 5}", work=0.02) for i in range(150)])
        wait_until(lambda: faults.all_in(conn, ids, "completed"), timeout=180,
                   message=lambda: f"left: {faults.states(conn, ids)}\n{procs.logs()}")
    finally:
        procs.close()
    tenants, accounts = ledger_by(conn, "tenant"), ledger_by(conn, "account")
    assert sum(len(v) for v in tenants.values()) == 150
    busiest = {t: most_at_once(v) for t, v in tenants.items()}
    assert max(busiest.values()) == 2 and all(n <= 2 for n in busiest.values()), busiest
    assert all(most_at_once(v) <= 1 for v in accounts.values()), {
        a: most_at_once(v) for a, v in accounts.items()}
    workers_used = conn.execute("SELECT count(DISTINCT worker) FROM public.key_ledger").fetchone()
    assert workers_used is not None and workers_used[0] > 1


def test_explain_names_the_holders_the_rate_window_and_the_fair_share_position(
    app: Forklift, conn: psycopg.Connection[Any], dsn: str
) -> None:
    declare.record_sync(conn, "forklift", app)
    ids = flow_keys.keyed.enqueue_many([Work("acme", f"a{i}") for i in range(4)])
    held = ids[:2]
    conn.execute("UPDATE forklift.jobs SET state = 'running', attempt = 1, worker_id = 'w1',"
                 " fence = nextval('forklift.fence_seq'), attempted_at = now(),"
                 " lease_expires_at = now() + interval '1 minute' WHERE id = ANY(%s)", (held,))
    got = json.loads(run(dsn, "jobs", "explain", str(ids[3]), "--json").stdout)
    full = next(r for r in got["reasons"] if r["code"] == "key_full")
    assert full["text"].startswith("key tenant=acme is at its limit: 2 running of 2")
    assert [h["job_id"] for h in full["facts"]["holders"]] == held
    assert f"job {held[0]} on w1" in full["text"]

    rated = flow_keys.rated.enqueue(Work("x")).id
    conn.execute("UPDATE forklift.flow_values SET tokens = 0.5, refilled_at = now() + interval"
                 " '1 hour' WHERE key = %s", ("flow.keys.rated\x1f*",))
    why = json.loads(run(dsn, "jobs", "explain", str(rated), "--json").stdout)["reasons"]
    limited = next(r for r in why if r["code"] == "rate_limited")
    assert limited["text"].startswith("rate limit of key flow.keys.rated=* (20/s): next slot in")
    assert limited["facts"]["next_slot_seconds"] == pytest.approx(0.025, abs=0.001)

    with Operator(dsn, actor="t") as op:
        op.set_fair("keyed", True)
    why = json.loads(run(dsn, "jobs", "explain", str(ids[3]), "--json").stdout)["reasons"]
    fair = next(r for r in why if r["code"] == "fair_share")
    assert fair["facts"] == {"partition": "tenant=acme", "ahead_in_partition": 1,
                             "partitions": 1}
    queue = json.loads(run(dsn, "queues", "explain", "keyed", "--json").stdout)["reasons"]
    assert {"key_full", "fair_share"} <= {r["code"] for r in queue}


def test_a_worker_buffers_keyed_jobs_and_never_runs_a_key_over_its_limit(
    app: Forklift, conn: psycopg.Connection[Any]
) -> None:
    """A flow queue without fair share or rates has a local buffer (claims larger than the free
    slots), and the keys still hold (the ledger)."""
    from apps.basic import running_worker
    from helpers import wait_until

    sizes: list[int] = []
    ids = flow_keys.solo.enqueue_many([Work(f"t{i % 40}") for i in range(400)])
    with running_worker(app, queues=["keyed"], concurrency=2, prefetch_horizon=1.0) as w:
        w.attempts.hooks.on_claim.append(sizes.append)
        wait_until(lambda: conn.execute("SELECT count(*) FROM forklift.jobs WHERE id = ANY(%s)"
                                        " AND state = 'completed'", (ids,)).fetchone()
                   == (len(ids),), timeout=120, message="the keyed jobs did not finish")
    assert max(sizes) > 2, sizes  # more than the free slots: a buffer
    assert max(most_at_once(runs) for runs in ledger_by(conn, "tenant").values()) == 1


def test_a_starting_worker_sends_its_first_claim_once_its_keys_are_recorded(
    app: Forklift, conn: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Keyed jobs wait for their keys' rows (flow_keys): a starting worker records its kinds'
    keys before its first claim, which then finds the backlog instead of nothing."""
    from apps.basic import running_worker
    from helpers import wait_until

    from forklift._worker import producer as claim_round

    events: list[str] = []
    record, claim_once = declare.record, claim_round.Producer._claim_once

    async def recording(*args: Any) -> int:
        changed = await record(*args)
        events.append(f"recorded {changed}")
        return changed

    async def claiming(self: Any, n: int) -> Any:
        events.append("claim")
        return await claim_once(self, n)

    monkeypatch.setattr(declare, "record", recording)
    monkeypatch.setattr(claim_round.Producer, "_claim_once", claiming)
    job = flow_keys.solo.enqueue(Work("one")).id
    with running_worker(app, queues=["keyed"], poll_interval=30.0):
        wait_until(lambda: conn.execute("SELECT state FROM forklift.jobs WHERE id = %s",
                                        (job,)).fetchone() == ("completed",),
                   timeout=30, message="the keyed job did not finish")
    assert events[0].startswith("recorded") and events[0] != "recorded 0", events
    assert events[1] == "claim", events


def test_a_flushed_keyed_outcome_triggers_the_next_claim(
    app: Forklift, conn: psycopg.Connection[Any]
) -> None:
    """One key at limit 1: each job's successor is claimed once its outcome is written (the
    flush triggers the claim; no poll could, at 30 s), not tried for at every slot that frees
    before (claims that find the key still held by our own unwritten outcome)."""
    from apps.basic import running_worker
    from helpers import wait_until

    sizes: list[int] = []
    jobs = 20
    ids = flow_keys.solo.enqueue_many([Work("one") for _ in range(jobs)])
    with running_worker(app, queues=["keyed"], concurrency=2, poll_interval=30.0) as w:
        w.attempts.hooks.on_claim.append(sizes.append)
        wait_until(lambda: conn.execute("SELECT count(*) FROM forklift.jobs WHERE id = ANY(%s)"
                                        " AND state = 'completed'", (ids,)).fetchone()
                   == (jobs,), timeout=60, message="the key's jobs did not finish")
    # One claim a job, and a few that find nothing (the idle mark's barrier, the last one).
    assert sizes.count(0) <= 3 and len(sizes) <= jobs + 3, sizes
