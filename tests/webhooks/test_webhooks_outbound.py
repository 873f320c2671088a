"""Outbound webhooks against a real HTTP server on localhost, delivered by a real worker:
signatures, Retry-After, terminal and retryable answers, timeouts, disable and hold, re-enable,
ordering, and the outbox."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from apps.basic import running_worker
from helpers import wait_until
from webhook_target import Answer, Target, serving

from forklift import Backoff, Forklift
from forklift.ops import Operator
from forklift.webhooks import Endpoint, new_secret
from forklift.webhooks.signing import Secret, verify

FAST = Backoff(kind="fixed", base=0.05, max=5.0, jitter="none")
TERMINAL = ("completed", "cancelled", "dead")


@pytest.fixture
def target() -> Iterator[Target]:
    yield from serving()


@pytest.fixture
def app(dsn: str) -> Iterator[Forklift]:
    fl = Forklift(dsn)
    try:
        yield fl
    finally:
        fl.close()


def job(conn: psycopg.Connection[Any], job_id: int) -> dict[str, Any]:
    row = conn.execute("SELECT state, attempt, result, errors FROM forklift.jobs WHERE id = %s",
                       (job_id,)).fetchone()
    assert row is not None
    return {"state": row[0], "attempt": row[1], "result": row[2], "errors": row[3]}


def wait_state(conn: psycopg.Connection[Any], job_id: int, *states: str,
               timeout: float = 30) -> dict[str, Any]:
    return wait_until(lambda: (j := job(conn, job_id))["state"] in states and j,
                      timeout=timeout, message=lambda: f"job {job_id}: {job(conn, job_id)}")


def attempts(conn: psycopg.Connection[Any], endpoint: str) -> list[tuple[Any, ...]]:
    return conn.execute("SELECT event_id, status, outcome, size, error FROM"
                        " forklift.webhook_attempts WHERE endpoint = %s ORDER BY id",
                        (endpoint,)).fetchall()


def health(conn: psycopg.Connection[Any], endpoint: str) -> dict[str, Any]:
    row = conn.execute("SELECT enabled, disabled_reason, last_status, failure_streak, delivered,"
                       " failed FROM forklift.webhook_endpoints WHERE name = %s",
                       (endpoint,)).fetchone()
    assert row is not None, f"no health row for {endpoint}"
    return dict(zip(("enabled", "disabled_reason", "last_status", "failure_streak", "delivered",
                     "failed"), row, strict=True))


def test_a_delivery_is_signed_with_both_secrets_and_records_status_and_size(
        app: Forklift, target: Target, conn: psycopg.Connection[Any]) -> None:
    old, new = new_secret(), new_secret()
    billing = Endpoint(app, "billing", url=target.script("/ok", Answer(body=b"x" * 123)),
                       secrets=[old, new])
    sent = billing.send("invoice.paid", {"invoice": 42})
    with running_worker(app):
        done = wait_state(conn, sent.id, *TERMINAL)
    assert done["state"] == "completed"
    assert done["result"] == {"status": 200, "size": 123}
    (request,) = target.requests("/ok")
    body = json.loads(request.body)
    assert body["type"] == "invoice.paid" and body["data"] == {"invoice": 42}
    assert request.headers["webhook-id"] == sent.args["id"]
    assert len(request.headers["webhook-signature"].split(" ")) == 2
    stamp = int(request.headers["webhook-timestamp"])
    for secret in (old, new):  # either side of a rotation accepts it
        assert verify([Secret.parse(secret)], request.headers, request.body, now=stamp,
                      tolerance=5) == (sent.args["id"], stamp)
    with pytest.raises(Exception, match="no signature matches"):
        verify([Secret.parse(new_secret())], request.headers, request.body, now=stamp,
               tolerance=5)
    assert attempts(conn, "billing") == [(sent.args["id"], 200, "delivered", 123, None)]
    assert health(conn, "billing")["failure_streak"] == 0


def test_retry_after_is_honoured_and_the_id_stays_the_same(
        app: Forklift, target: Target, conn: psycopg.Connection[Any]) -> None:
    url = target.script("/busy", Answer(429, {"Retry-After": "1"}), Answer(200))
    ep = Endpoint(app, "busy", url=url, secrets=new_secret(), retry=FAST)
    sent = ep.send("ping", {})
    with running_worker(app):
        assert wait_state(conn, sent.id, *TERMINAL)["state"] == "completed"
    first, second = target.requests("/busy")
    assert first.headers["webhook-id"] == second.headers["webhook-id"] == sent.args["id"]
    # the endpoint named one second: the backoff (50 ms) did not decide
    assert second.at - first.at >= 1.0
    assert [a[1:3] for a in attempts(conn, "busy")] == [(429, "retry"), (200, "delivered")]


def test_a_5xx_is_retried_until_attempts_run_out(
        app: Forklift, target: Target, conn: psycopg.Connection[Any]) -> None:
    ep = Endpoint(app, "broken", url=target.script("/error", Answer(500)), secrets=new_secret(),
                  retry=FAST, max_attempts=3)
    sent = ep.send("ping", {})
    with running_worker(app):
        dead = wait_state(conn, sent.id, *TERMINAL)
    assert (dead["state"], dead["attempt"]) == ("dead", 3)
    last = dead["errors"][-1]
    assert last["code"] == "error" and last["type"].endswith("DeliveryFailed")
    assert "broken answered 500" in last["message"]
    assert [a[1:3] for a in attempts(conn, "broken")] == [(500, "retry")] * 3
    h = health(conn, "broken")
    assert (h["enabled"], h["failure_streak"], h["failed"], h["last_status"]) == (True, 3, 3, 500)


def test_a_client_error_is_terminal_but_409_is_retried(
        app: Forklift, target: Target, conn: psycopg.Connection[Any]) -> None:
    ep = Endpoint(app, "picky", url=target.script("/picky", Answer(409), Answer(400)),
                  secrets=new_secret(), retry=FAST)
    sent = ep.send("ping", {})
    with running_worker(app):
        dead = wait_state(conn, sent.id, *TERMINAL)
    assert (dead["state"], dead["attempt"]) == ("dead", 2)
    assert dead["errors"][-1]["code"] == "rejected"
    assert [a[1:3] for a in attempts(conn, "picky")] == [(409, "retry"), (400, "rejected")]


def test_an_endpoint_that_never_answers_times_out_and_is_retried(
        app: Forklift, target: Target, conn: psycopg.Connection[Any]) -> None:
    url = target.script("/never", Answer(200, hold=60), Answer(200))
    ep = Endpoint(app, "never", url=url, secrets=new_secret(), timeout=1, retry=FAST)
    sent = ep.send("ping", {})
    with running_worker(app):
        assert wait_state(conn, sent.id, *TERMINAL)["state"] == "completed"
    tried = attempts(conn, "never")
    timed_out, delivered = tried[0], tried[-1]
    assert timed_out[1:3] == (None, "failed") and "no answer within 1s" in timed_out[4]
    assert delivered[1:3] == (200, "delivered")
    # on a loaded machine a later try may time out too; none is recorded as delivered twice
    assert [t[2] for t in tried].count("delivered") == 1


def test_a_slow_answer_within_the_timeout_is_delivered_once(
        app: Forklift, target: Target, conn: psycopg.Connection[Any]) -> None:
    ep = Endpoint(app, "slow", url=target.script("/slow", Answer(200, hold=0.5)),
                  secrets=new_secret(), timeout=20, retry=FAST)
    sent = ep.send("ping", {})
    with running_worker(app):
        done = wait_state(conn, sent.id, *TERMINAL)
    assert (done["state"], done["attempt"]) == ("completed", 1)
    assert len(target.requests("/slow")) == 1
    assert [a[1:3] for a in attempts(conn, "slow")] == [(200, "delivered")]


def test_gone_disables_the_endpoint_holds_later_events_and_enable_delivers_them(
        app: Forklift, target: Target, conn: psycopg.Connection[Any], dsn: str) -> None:
    url = target.script("/gone", Answer(410), Answer(200))
    ep = Endpoint(app, "gone", url=url, secrets=new_secret(), retry=FAST)
    first = ep.send("ping", {"n": 1})
    with running_worker(app):
        dead = wait_state(conn, first.id, *TERMINAL)
        assert (dead["state"], dead["errors"][-1]["code"]) == ("dead", "endpoint_gone")
        h = health(conn, "gone")
        assert (h["enabled"], h["last_status"]) == (False, 410)
        assert "410" in h["disabled_reason"]
        audit = conn.execute("SELECT actor, target FROM forklift.audit WHERE action ="
                             " 'webhooks.disable'").fetchall()
        assert audit == [("forklift:webhooks", {"endpoint": "gone", "status": 410,
                                                 "event_id": first.args["id"]})]
        later = [ep.send("ping", {"n": n}) for n in (2, 3)]
        # held, not lost: each is looked at once, then waits live for the enable
        for j in later:
            wait_until(lambda j=j: conn.execute(
                "SELECT state = 'scheduled' AND attempt = 0 AND run_at > now() + interval '10m'"
                " FROM forklift.jobs WHERE id = %s", (j.id,)).fetchone()[0],  # type: ignore[index]
                timeout=30, message="the later event is held")
        assert len(target.requests("/gone")) == 1
        with Operator(dsn, actor="ops") as op:
            change = op.webhooks.enable("gone", reason="fixed on their side")
        assert change.released == 2 and change.endpoint.enabled
        for j in later:
            assert wait_state(conn, j.id, *TERMINAL)["state"] == "completed"
    assert [json.loads(r.body)["data"]["n"] for r in target.requests("/gone")] in (
        [1, 2, 3], [1, 3, 2])
    assert health(conn, "gone")["failure_streak"] == 0


def test_an_ordered_endpoint_keeps_the_order_across_retries(
        app: Forklift, target: Target, conn: psycopg.Connection[Any]) -> None:
    url = target.script("/ordered", Answer(500), Answer(503), Answer(200))
    ep = Endpoint(app, "ordered", url=url, secrets=new_secret(), ordered=True, retry=FAST)
    sent = [ep.send("step", {"n": n}) for n in range(5)]
    with running_worker(app, concurrency=4):
        for j in sent:
            assert wait_state(conn, j.id, *TERMINAL)["state"] == "completed"
    seen = [json.loads(r.body)["data"]["n"] for r in target.requests("/ordered")]
    assert seen == [0, 0, 0, 1, 2, 3, 4]


def test_an_endpoint_s_concurrency_bounds_the_requests_in_flight_across_the_worker(
        app: Forklift, target: Target, conn: psycopg.Connection[Any]) -> None:
    url = target.script("/narrow", Answer(200, hold=0.5))
    ep = Endpoint(app, "narrow", url=url, secrets=new_secret(), concurrency=2, retry=FAST)
    sent = [ep.send("ping", {"n": n}) for n in range(6)]
    with running_worker(app, concurrency=6):
        for j in sent:
            assert wait_state(conn, j.id, *TERMINAL)["state"] == "completed"
    assert len(target.requests("/narrow")) == 6
    assert 1 <= target.most_in_flight <= 2


def test_an_event_published_through_the_outbox_is_delivered_once_its_transaction_commits(
        app: Forklift, target: Target, dsn: str, conn: psycopg.Connection[Any]) -> None:
    ep = Endpoint(app, "boxed", url=target.script("/boxed"), secrets=new_secret())
    with psycopg.connect(dsn) as mine:
        ep.publish("order.placed", {"order": 7}, id="evt_7", conn=mine)
        mine.rollback()  # the caller's transaction rolled back: nothing is sent
        ep.publish("order.placed", {"order": 8}, id="evt_8", conn=mine)
        mine.commit()
    with running_worker(app):
        wait_until(lambda: target.requests("/boxed"), timeout=30, message="delivered")
        wait_until(lambda: attempts(conn, "boxed"), timeout=30, message="recorded")
    (request,) = target.requests("/boxed")
    assert request.headers["webhook-id"] == "evt_8"
    assert [a[:3] for a in attempts(conn, "boxed")] == [("evt_8", 200, "delivered")]


def test_bad_declarations_name_their_field(app: Forklift) -> None:
    from forklift import ConfigError

    with pytest.raises(ConfigError) as exc:
        Endpoint(app, "x", url="ftp://nowhere", secrets=new_secret())
    assert exc.value.detail["field"] == "url"
    with pytest.raises(ConfigError) as exc:
        Endpoint(app, "y", url="http://localhost/", secrets="not-a-secret")
    assert exc.value.detail["field"] == "secrets"
    with pytest.raises(ConfigError) as exc:
        Endpoint(app, "z", url="http://localhost/", secrets=new_secret(), timeout=0)
    assert exc.value.detail["field"] == "timeout"
    assert not app.kinds  # nothing half-declared
