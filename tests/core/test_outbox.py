"""The transactional outbox: recorded in the caller's transaction, delivered by the leader's
relay in order per topic, at least once, with retries, backoff and a dead state; visible and
retryable through forklift.ops.outbox and `forklift outbox`.

The crash test runs the leader as a real worker subprocess and SIGKILLs it while a callable sink
is in the middle of a delivery; a second worker takes over and delivers it again.
"""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from apps import faults
from apps import workflows as wf
from apps.basic import running_worker
from helpers import wait_until
from typer.testing import CliRunner

from forklift import Forklift, ForkliftError
from forklift.cli.main import app as cli
from forklift.ops import OpsContext
from forklift.ops import outbox as ops_outbox

LEASE = 2.0
FAST = {"lease": LEASE, "poll_interval": 0.1, "leader_interval": 0.1, "concurrency": 4}


@pytest.fixture
def app(dsn: str, conn: psycopg.Connection[Any]) -> Iterator[Forklift]:
    with wf.bound(dsn, conn) as bound_app:
        yield bound_app


procs = faults.procs  # fixture: worker subprocesses of one test, with their logs


def rows(conn: psycopg.Connection[Any], what: str) -> list[tuple[Any, ...]]:
    return conn.execute("SELECT topic, msg_id, attempt, pid FROM public.wf_seen WHERE what = %s"
                        " ORDER BY id", (what,)).fetchall()


def states(conn: psycopg.Connection[Any]) -> dict[int, str]:
    return {int(i): str(s) for i, s in conn.execute("SELECT id, state FROM forklift.outbox")}


def all_delivered(conn: psycopg.Connection[Any]) -> bool:
    got = states(conn)
    return bool(got) and all(s == "delivered" for s in got.values())


def order_of_first_deliveries(conn: psycopg.Connection[Any]) -> dict[str, list[int]]:
    firsts: dict[str, list[int]] = {}
    for topic, msg, _, _ in rows(conn, "done"):
        if msg not in firsts.setdefault(topic, []):
            firsts[topic].append(msg)
    return firsts


def test_a_message_exists_exactly_when_the_callers_transaction_commits(
    app: Forklift, dsn: str, conn: psycopg.Connection[Any]
) -> None:
    with psycopg.connect(dsn) as mine:
        app.outbox.publish("wf.a", {"n": 1}, conn=mine)
        assert states(conn) == {}
        mine.rollback()
        kept = app.outbox.publish("wf.a", {"n": 2}, conn=mine)
        mine.commit()
    assert states(conn) == {kept: "pending"}


@pytest.mark.parametrize(("topic", "payload", "code"), [
    ("", {}, "invalid_name"), ("t\x07", {}, "invalid_name"), ("t" * 201, {}, "invalid_name"),
    ("t", {"x": float("inf")}, "not_json"), ("t", "\x00", "nul_character"),
])
def test_a_message_that_cannot_be_stored_is_refused(
    app: Forklift, conn: psycopg.Connection[Any], topic: str, payload: Any, code: str
) -> None:
    with pytest.raises(ForkliftError) as caught:
        app.outbox.publish(topic, payload)
    assert caught.value.code == code
    assert states(conn) == {}


def test_the_relay_delivers_each_topic_in_order_across_transactions(
    app: Forklift, dsn: str, conn: psycopg.Connection[Any]
) -> None:
    ids: dict[str, list[int]] = {"wf.a": [], "wf.b": [], "wf.c": []}
    with psycopg.connect(dsn) as mine:
        for i in range(60):
            topic = ("wf.a", "wf.b", "wf.c")[i % 3]
            ids[topic].append(app.outbox.publish(topic, {"n": i}, conn=mine))
            if i % 7 == 6:
                mine.commit()
        mine.commit()
    with running_worker(app, **FAST):
        wait_until(lambda: all_delivered(conn), timeout=30, message=lambda: f"{states(conn)}")
    assert order_of_first_deliveries(conn) == ids
    assert len(rows(conn, "done")) == 60  # nothing twice when nothing crashed


def test_a_kind_sink_turns_each_message_into_one_job_in_order(
    app: Forklift, conn: psycopg.Connection[Any]
) -> None:
    ids = [app.outbox.publish("wf.jobs", {"order": n}) for n in range(25)]
    with running_worker(app, **FAST):
        wait_until(lambda: len(rows(conn, "job")) == 25, timeout=30)
    jobs = conn.execute("SELECT id, args, meta -> 'outbox' FROM forklift.jobs"
                        " WHERE kind = 'wf.receive' ORDER BY id").fetchall()
    assert [a["order"] for _, a, _ in jobs] == list(range(25))
    assert [m["id"] for _, _, m in jobs] == ids
    linked = conn.execute("SELECT id, job_id FROM forklift.outbox ORDER BY id").fetchall()
    assert [j for _, j in linked] == [j for j, _, _ in jobs]


def test_a_failing_head_holds_its_topic_back_then_goes_dead_and_can_be_retried(
    app: Forklift, conn: psycopg.Connection[Any]
) -> None:
    head = app.outbox.publish("wf.flaky", {"fail_until": 99})
    after = app.outbox.publish("wf.flaky", {"n": 2})
    other = app.outbox.publish("wf.a", {"n": 3})
    with running_worker(app, **FAST):
        wait_until(lambda: states(conn).get(head) == "dead", timeout=30,
                   message=lambda: f"{states(conn)}")
        wait_until(lambda: states(conn).get(after) == "delivered", timeout=30)
        starts = [r[1] for r in rows(conn, "start") if r[0] == "wf.flaky"]
        assert starts[:3] == [head] * 3 and starts[3:] == [after]  # three tries, in order
        assert states(conn)[other] == "delivered"
        row = conn.execute("SELECT attempts, last_error->>'code', last_error->>'message'"
                           " FROM forklift.outbox WHERE id = %s", (head,)).fetchone()
        assert row == (3, "delivery_failed", f"refusing delivery 3 of {head}")

        ctx = OpsContext(actor="test")
        with psycopg.connect(conn.info.dsn, autocommit=True) as ops:
            assert ops_outbox.retry(ops, ctx, ids=[head], reason="fixed upstream") == [head]
            with pytest.raises(ForkliftError) as caught:
                ops_outbox.retry(ops, ctx, ids=[after])  # delivered, not dead
            assert caught.value.code == "message_not_found"
        wait_until(lambda: len([r for r in rows(conn, "start") if r[1] == head]) == 6,
                   timeout=30)  # three more tries after the retry
    audit = conn.execute("SELECT action, target, reason FROM forklift.audit").fetchall()
    assert audit == [("outbox.retry", {"ids": [head], "topic": None}, "fixed upstream")]


def test_a_payload_the_kind_refuses_goes_dead_at_once_and_the_topic_moves_on(
    app: Forklift, conn: psycopg.Connection[Any]
) -> None:
    good1 = app.outbox.publish("wf.jobs", {"order": 1})
    bad = app.outbox.publish("wf.jobs", {"order": "not a number"})
    good2 = app.outbox.publish("wf.jobs", {"order": 2})
    with running_worker(app, **FAST):
        wait_until(lambda: states(conn).get(good2) == "delivered", timeout=30)
    assert states(conn) == {good1: "delivered", bad: "dead", good2: "delivered"}
    code = conn.execute("SELECT last_error->>'code' FROM forklift.outbox WHERE id = %s",
                        (bad,)).fetchone()
    assert code == ("invalid_payload",)


def test_outbox_list_and_retry_from_the_cli(app: Forklift, dsn: str,
                                            conn: psycopg.Connection[Any]) -> None:
    a = app.outbox.publish("wf.a", {"n": 1})
    conn.execute("UPDATE forklift.outbox SET state = 'dead', attempts = 10 WHERE id = %s", (a,))
    runner = CliRunner()
    env = {"FORKLIFT_DSN": dsn}
    got = runner.invoke(cli, ["outbox", "list", "--json"], env=env)
    assert got.exit_code == 0, got.output
    data = json.loads(got.stdout)
    assert data["topics"][0]["topic"] == "wf.a" and data["topics"][0]["dead"] == 1
    assert [m["id"] for m in data["messages"]] == [a]
    got = runner.invoke(cli, ["outbox", "retry", str(a)], env=env)
    assert got.exit_code == 1 and "confirmation" in got.output  # stdin is not a terminal
    got = runner.invoke(cli, ["outbox", "retry", str(a), "--yes", "--json"], env=env)
    assert got.exit_code == 0 and json.loads(got.stdout) == {"retried": [a]}
    assert states(conn) == {a: "pending"}
    got = runner.invoke(cli, ["outbox", "list", "--state", "nope"], env=env)
    assert got.exit_code != 0


def test_delivery_is_at_least_once_and_in_order_across_a_relay_killed_mid_delivery(
    app: Forklift, conn: psycopg.Connection[Any], procs: faults.Procs
) -> None:
    ids = {"wf.a": [], "wf.b": []}  # type: dict[str, list[int]]
    for i in range(10):
        ids["wf.a"].append(app.outbox.publish("wf.a", {"n": i, "hold": "g" if i == 4 else None}))
        ids["wf.b"].append(app.outbox.publish("wf.b", {"n": i}))
    held = ids["wf.a"][4]
    a = procs.start(concurrency=2, lease=LEASE, poll_interval=0.2,
                    extra=["--app", "apps.workflows:app"])
    faults.registered(conn, a)
    wait_until(lambda: any(r[1] == held for r in rows(conn, "start")), timeout=30,
               message=lambda: procs.logs())
    assert [r[1] for r in rows(conn, "done") if r[0] == "wf.a"] == ids["wf.a"][:4]
    a.signal(signal.SIGKILL)
    assert a.popen.wait(10) == -signal.SIGKILL
    conn.execute("INSERT INTO public.wf_gates VALUES ('g')")

    with running_worker(app, **FAST):
        wait_until(lambda: all_delivered(conn), timeout=60, message=lambda: f"{states(conn)}")
    assert order_of_first_deliveries(conn) == ids
    starts = [(r[1], r[3]) for r in rows(conn, "start") if r[1] == held]
    assert len(starts) == 2 and starts[0][1] == a.pid and starts[1][1] != a.pid
    # Nothing behind the message in flight was delivered before it: the dead relay's claim held
    # the topic until it expired.
    done_a = [r[1] for r in rows(conn, "done") if r[0] == "wf.a"]
    assert done_a == ids["wf.a"]
