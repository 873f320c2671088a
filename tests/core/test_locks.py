"""Locks with fencing tokens (forklift._features.flow.locks): one holder per key across processes, tokens
that only grow, leases renewed together and lost when they run out, and a downstream store that
refuses the late write of a holder that was paused past its lease."""

from __future__ import annotations

import asyncio
import itertools
import json
import signal
import threading
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from apps import faults, flow_locks
from apps.basic import running_worker
from apps.faults import registered
from helpers import wait_until
from typer.testing import CliRunner

from forklift import Forklift, InvalidName, InvalidOption, LockLost, LockNotAcquired

KEY = "account:42"


@pytest.fixture
def app(dsn: str, conn: psycopg.Connection[Any]) -> Iterator[Forklift]:
    flow_locks.setup(conn)
    flow_locks.app.use(dsn)
    try:
        yield flow_locks.app
    finally:
        flow_locks.app.close()


def lock_rows(conn: psycopg.Connection[Any]) -> list[dict[str, Any]]:
    cur = conn.execute("SELECT * FROM forklift.locks ORDER BY key")
    assert cur.description is not None
    return [{d.name: v for d, v in zip(cur.description, r, strict=True)} for r in cur]


def job(conn: psycopg.Connection[Any], job_id: int) -> dict[str, Any]:
    return faults.job(conn, job_id)


def held_token(conn: psycopg.Connection[Any], job_id: int) -> int:
    def token() -> int | None:
        row = conn.execute("SELECT token FROM public.lock_ledger WHERE job_id = %s ORDER BY id"
                           " DESC LIMIT 1", (job_id,)).fetchone()
        return int(row[0]) if row else None

    return wait_until(token, timeout=30, message=f"job {job_id} never held its lock")


def open_gate(conn: psycopg.Connection[Any], name: str) -> None:
    conn.execute("INSERT INTO public.gates VALUES (%s) ON CONFLICT DO NOTHING", (name,))


def take_over(app: Forklift, conn: psycopg.Connection[Any], key: str) -> int:
    """What a new holder does once a lease ran out: here the lease is made to run out now."""
    conn.execute("UPDATE forklift.locks SET expires_at = now() - interval '1 second'"
                 " WHERE key = %s", (key,))
    with app.lock(key, ttl=30) as token:
        return token


# -- outside jobs: app.lock -----------------------------------------------------------------------
def test_each_grant_takes_a_greater_token_and_leaving_releases(
    app: Forklift, conn: psycopg.Connection[Any]
) -> None:
    tokens = []
    for key in (KEY, KEY, "account:7", KEY):
        with app.lock(key, ttl=10) as token:
            row = lock_rows(conn)[0]
            assert (row["key"], row["token"], row["job_id"]) == (key, token, None)
            assert row["owner"].count(":") == 2  # host:pid:tag of this process
            tokens.append(token)
        assert lock_rows(conn) == []
    assert tokens == sorted(tokens) and len(set(tokens)) == len(tokens)


def test_a_held_key_is_refused_after_wait_naming_the_holder(
    app: Forklift, conn: psycopg.Connection[Any]
) -> None:
    with app.lock(KEY, ttl=10) as first:
        with pytest.raises(LockNotAcquired) as refused, app.lock(KEY, ttl=10, wait=0.2):
            pytest.fail("granted twice")
        assert refused.value.code == "lock_not_acquired"
        detail = refused.value.detail
        assert detail["holder_token"] == first and detail["holder_job"] is None
        assert detail["holder_owner"] in refused.value.message
        assert "after waiting 0.2s" in refused.value.message


def test_wait_takes_the_lock_as_soon_as_the_holder_lets_go(
    app: Forklift, conn: psycopg.Connection[Any]
) -> None:
    got: list[int] = []
    release = threading.Event()

    def hold() -> None:
        with app.lock(KEY, ttl=10) as token:
            got.append(token)
            release.wait(30)

    holder = threading.Thread(target=hold)
    holder.start()
    wait_until(lambda: got, message="the first holder never got the lock")
    def take() -> None:
        with app.lock(KEY, ttl=10, wait=30) as token:
            got.append(token)

    waiter = threading.Thread(target=take)
    waiter.start()
    # Every try draws a token (the grant's nextval runs before the conflict is seen): the
    # waiter has been refused at least twice once the sequence moved two past the holder's.
    wait_until(lambda: conn.execute("SELECT last_value FROM forklift.lock_token_seq"
                                    ).fetchone()[0] >= got[0] + 2,  # type: ignore[index]
               message="the waiter never tried")
    release.set()
    holder.join(30)
    waiter.join(30)
    assert len(got) == 2 and got[1] > got[0]
    assert lock_rows(conn) == []


def test_renewals_extend_every_lease_of_a_process_in_one_statement(
    app: Forklift, conn: psycopg.Connection[Any]
) -> None:
    with app.lock("short", ttl=1.5), app.lock("long", ttl=600):
        first = {r["key"]: r["expires_at"] for r in lock_rows(conn)}
        wait_until(lambda: lock_rows(conn)[1]["expires_at"] != first["short"], timeout=10,
                   message="the short lease was never renewed")
        rows = {r["key"]: r for r in lock_rows(conn)}
    # Both moved in one statement: the same now() plus each lease's own ttl.
    short, long_ = rows["short"], rows["long"]
    assert long_["expires_at"] != first["long"]
    assert (long_["expires_at"] - short["expires_at"]).total_seconds() == pytest.approx(598.5)


def test_a_lost_app_lock_cancels_its_async_block_and_raises_lock_lost(
    app: Forklift, conn: psycopg.Connection[Any]
) -> None:
    inside = threading.Event()

    async def block() -> str:
        lock = app.lock(KEY, ttl=1.5)
        try:
            async with lock:
                inside.set()
                await asyncio.sleep(60)
        except LockLost as exc:
            assert lock.lost.is_set() and isinstance(exc.__cause__, asyncio.CancelledError)
            return str(exc.detail["token"])
        finally:
            await app.aclose()
        return "not lost"

    result: list[str] = []
    runner = threading.Thread(target=lambda: result.append(asyncio.run(block())))
    runner.start()
    wait_until(inside.is_set, message="the block never started")
    newer = take_over(app, conn, KEY)
    runner.join(30)
    assert result and result[0] != "not lost" and int(result[0]) < newer


def test_leaving_a_sync_block_whose_lock_was_lost_raises_even_if_it_returned(
    app: Forklift, conn: psycopg.Connection[Any]
) -> None:
    lock = app.lock(KEY, ttl=1.5)
    with pytest.raises(LockLost) as lost, lock as token:
        take_over(app, conn, KEY)
        wait_until(lock.lost.is_set, timeout=10, message="the renewer never noticed")
    assert lost.value.code == "lock_lost" and lost.value.detail["token"] == token


@pytest.mark.parametrize(("key", "ttl", "wait", "field"), [
    ("", 10, 0, "key"), (" padded", 10, 0, "key"), ("zero\u200bwidth", 10, 0, "key"),
    ("x" * 501, 10, 0, "key"), (42, 10, 0, "key"), (KEY, 0.5, 0, "ttl"), (KEY, "10", 0, "ttl"),
    (KEY, float("nan"), 0, "ttl"), (KEY, 10, -1, "wait"), (KEY, True, 0, "ttl"),
])
def test_bad_lock_requests_are_refused_with_a_code(
    app: Forklift, key: Any, ttl: Any, wait: Any, field: str
) -> None:
    """A bad key is refused as any bad identifier is (invalid_name), a bad ttl or wait as any
    bad option (invalid_option)."""
    expected = InvalidName if field == "key" else InvalidOption
    with pytest.raises(expected) as refused:
        app.lock(key, ttl=ttl, wait=wait)
    code = "invalid_name" if field == "key" else "invalid_option"
    assert refused.value.code == code and refused.value.detail["field"] == field
    assert type(refused.value) is expected


def test_a_bad_lock_key_names_its_hidden_character_as_other_names_do(app: Forklift) -> None:
    with pytest.raises(InvalidName) as refused:
        app.lock("zero\u200bwidth")
    assert refused.value.detail["value"] == "'zero\\u200bwidth'"
    assert "U+200B" in refused.value.detail["reason"]


# -- inside jobs: ctx.lock ------------------------------------------------------------------------
def test_a_job_holding_a_lock_is_named_by_the_refusal(
    app: Forklift, conn: psycopg.Connection[Any]
) -> None:
    job_id = flow_locks.held.enqueue(flow_locks.Held(KEY, gate="g1", ttl=10)).id
    with running_worker(app, queues=["locks"]) as worker:
        token = held_token(conn, job_id)
        with pytest.raises(LockNotAcquired) as refused, app.lock(KEY, ttl=10):
            pass
        d = refused.value.detail
        assert (d["holder_job"], d["holder_worker"], d["holder_token"]) == (job_id, worker.id, token)
        assert f"job {job_id} on worker {worker.id}" in refused.value.message
        open_gate(conn, "g1")
        wait_until(lambda: job(conn, job_id)["state"] == "completed", timeout=30)
    assert lock_rows(conn) == []


@pytest.mark.parametrize("catch", [False, True], ids=["raised", "caught"])
def test_a_lost_lock_cancels_the_async_handler(
    app: Forklift, conn: psycopg.Connection[Any], catch: bool
) -> None:
    job_id = flow_locks.held.enqueue(flow_locks.Held(KEY, gate="never", ttl=1.5, catch=catch)).id
    with running_worker(app, queues=["locks"]):
        held_token(conn, job_id)
        take_over(app, conn, KEY)
        wait_until(lambda: job(conn, job_id)["state"] in ("dead", "completed"), timeout=30)
    done = job(conn, job_id)
    if catch:  # the handler decided what its job's outcome is
        assert (done["state"], done["result"]) == (
            "completed", "caught: cancelled=True reason=lock_lost")
    else:
        assert done["state"] == "dead"
        assert [e["code"] for e in done["errors"]] == ["lock_lost"]


def test_a_sync_handler_that_returns_after_losing_its_lock_fails_lock_lost(
    app: Forklift, conn: psycopg.Connection[Any]
) -> None:
    job_id = flow_locks.returns.enqueue(flow_locks.Held(KEY, gate="never", ttl=1.5)).id
    with running_worker(app, queues=["locks"]):
        held_token(conn, job_id)
        take_over(app, conn, KEY)
        wait_until(lambda: job(conn, job_id)["state"] == "dead", timeout=30)
    err = job(conn, job_id)["errors"][-1]
    assert err["code"] == "lock_lost" and err["type"] == "forklift._base.errors.LockLost"
    assert f"lock {KEY!r}" in err["message"] and "not exclusive" in err["message"]


def test_locks_list_shows_holders_and_expiry(app: Forklift, dsn: str,
                                             conn: psycopg.Connection[Any]) -> None:
    from forklift.cli.main import app as cli

    def run(*args: str) -> Any:
        return CliRunner().invoke(cli, ["locks", "list", *args], env={"FORKLIFT_DSN": dsn})

    with app.lock("report:[red]x[/red]", ttl=30) as token:
        data = json.loads(run("--json").stdout)
        human = run().stdout
    assert [(d["key"], d["token"], d["live"], d["job_id"]) for d in data] == [
        ("report:[red]x[/red]", token, True, None)]
    assert data[0]["ttl_seconds"] == 30 and 0 < data[0]["expires_in_seconds"] <= 30
    assert "report:[red]x[/red" in human and "process" in human
    assert json.loads(run("--json", "--prefix", "nope").stdout) == []
    assert run("--limit", "0").exit_code == 2


# -- across processes ---------------------------------------------------------------------------
db, procs = faults.db, faults.procs  # fixtures


@pytest.mark.slow
def test_holders_across_worker_processes_never_overlap_and_tokens_only_grow(
    app: Forklift, conn: psycopg.Connection[Any], procs: faults.Procs
) -> None:
    workers = [procs.start(app="apps.flow_locks:app", concurrency=3, queues="locks")
               for _ in range(3)]
    for w in workers:
        registered(conn, w)
    ids = flow_locks.serial.enqueue_many([flow_locks.Serial(KEY) for _ in range(30)])
    wait_until(lambda: faults.all_in(conn, ids, "completed"), timeout=120,
               message=lambda: f"jobs left: {faults.states(conn, ids)}")
    ledger = conn.execute("SELECT token, started_at, ended_at, worker FROM public.lock_ledger"
                          " ORDER BY started_at").fetchall()
    assert len(ledger) == 30 and len({r[3] for r in ledger}) > 1  # several processes held it
    for before, after in itertools.pairwise(ledger):
        assert before[2] <= after[1], f"token {before[0]} still held when {after[0]} began"
        assert before[0] < after[0], f"token {after[0]} came after {before[0]}"
    writes = conn.execute("SELECT bool_and(accepted), count(*) FROM public.store_writes").fetchone()
    assert writes == (True, 30)


@pytest.mark.slow
def test_a_sigstopped_holders_late_write_is_refused_by_the_fenced_store(
    app: Forklift, conn: psycopg.Connection[Any], procs: faults.Procs
) -> None:
    a = procs.start(app="apps.flow_locks:app", concurrency=2, queues="locks", lease=60.0)
    registered(conn, a)
    stale_job = flow_locks.paused.enqueue(flow_locks.Paused(KEY, gate="wake-a", ttl=1.5)).id
    stale = held_token(conn, stale_job)
    a.signal(signal.SIGSTOP)
    # A's lease on the key runs out while it is stopped; B takes the key and writes under it.
    wait_until(lambda: conn.execute("SELECT expires_at < now() FROM forklift.locks WHERE key = %s",
                                    (KEY,)).fetchone() == (True,), timeout=30)
    b = procs.start(app="apps.flow_locks:app", concurrency=2, queues="locks", lease=60.0)
    registered(conn, b)
    fresh_job = flow_locks.serial.enqueue(flow_locks.Serial(KEY, wait=0)).id
    wait_until(lambda: job(conn, fresh_job)["state"] == "completed", timeout=60,
               message=lambda: f"B did not take the key: {job(conn, fresh_job)}")
    fresh = int(job(conn, fresh_job)["result"])
    assert fresh > stale
    # A wakes up and, not knowing it was paused, writes under its old token: refused.
    open_gate(conn, "wake-a")
    a.signal(signal.SIGCONT)
    wait_until(lambda: job(conn, stale_job)["state"] == "dead", timeout=60,
               message=lambda: f"A's job did not end: {job(conn, stale_job)}")
    writes = conn.execute("SELECT token, accepted FROM public.store_writes ORDER BY id").fetchall()
    assert writes == [(fresh, True), (stale, False)]
    assert conn.execute("SELECT value, token FROM public.fenced_store").fetchall() == [
        (f"job {fresh_job}", fresh)]
    assert [e["code"] for e in job(conn, stale_job)["errors"]] == ["lock_lost"]
    assert "lost" in a.log()
