"""The inbound receiver behind a real ASGI server (uvicorn on localhost): valid, forged, stale,
oversized, chunked, duplicate and vendor-signed deliveries, each answered without echoing the
payload, and only verified first deliveries becoming jobs."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import psycopg
import pytest
import uvicorn
from helpers import wait_until
from prometheus_client import REGISTRY

from forklift import Forklift, JobContext
from forklift.webhooks import Inbound, Receiver, SignatureRefused, new_secret
from forklift.webhooks.receiver import STATUS
from forklift.webhooks.signing import Secret, headers

SECRET = new_secret()
SECRET_PAYLOAD = "card-4242-do-not-echo"


@pytest.fixture
def app(dsn: str) -> Iterator[Forklift]:
    fl = Forklift(dsn)
    try:
        yield fl
    finally:
        fl.close()


class Served:
    """An ASGI app served by uvicorn on a socket of its own, in a thread."""

    def __init__(self, asgi: Any) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.server = uvicorn.Server(uvicorn.Config(asgi, log_level="warning", lifespan="on"))
        self.thread = threading.Thread(target=self.server.run,
                                       kwargs={"sockets": [self.sock]}, daemon=True)

    def __enter__(self) -> Served:
        self.thread.start()
        wait_until(lambda: self.server.started, timeout=30, message="uvicorn started")
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(30)
        self.sock.close()


def signed(body: bytes, msg_id: str, secret: str = SECRET, at: int | None = None
           ) -> dict[str, str]:
    return headers([Secret.parse(secret)], msg_id, int(time.time()) if at is None else at, body)


def counted(receiver: str, reason: str) -> float:
    """The receiver's refusals of one reason on the process's Prometheus registry."""
    value = REGISTRY.get_sample_value("forklift_webhook_refusals_total",
                                      {"receiver": receiver, "reason": reason})
    return value or 0.0


def jobs(conn: psycopg.Connection[Any], kind: str) -> list[tuple[Any, ...]]:
    return conn.execute("SELECT unique_key, args FROM forklift.jobs WHERE kind = %s ORDER BY id",
                        (kind,)).fetchall()


def test_the_receiver_verifies_dedupes_and_refuses_without_echoing(
        app: Forklift, conn: psycopg.Connection[Any]) -> None:
    @app.job(name="vendor.event")
    def on_event(ctx: JobContext, delivery: Inbound) -> None:
        return None

    receiver = Receiver(on_event, secrets=[SECRET], max_bytes=1024)
    before = {reason: counted(receiver.name, reason) for reason in STATUS}
    body = json.dumps({"type": "paid", "card": SECRET_PAYLOAD}).encode()
    with Served(receiver) as served, httpx.Client(base_url=served.url, timeout=10) as http:
        ok = http.post("/", content=body, headers=signed(body, "msg_1"))
        assert (ok.status_code, ok.json()) == (200, {"id": "msg_1", "duplicate": False})
        again = http.post("/", content=body, headers=signed(body, "msg_1"))
        assert (again.status_code, again.json()) == (200, {"id": "msg_1", "duplicate": True})

        answers = {
            "forged": http.post("/", content=body,
                                headers=signed(body, "msg_2", secret=new_secret())),
            "tampered": http.post("/", content=body.replace(b"paid", b"free"),
                                  headers=signed(body, "msg_3")),
            "stale": http.post("/", content=body,
                               headers=signed(body, "msg_4", at=int(time.time()) - 3600)),
            "unsigned": http.post("/", content=body),
            "oversized": http.post("/", content=b"{" + b" " * 2048 + b"}",
                                   headers=signed(b"{}", "msg_5")),
            "chunked": http.post("/", content=iter([b"[" + b"1," * 300, b"1" * 600 + b"]"]),
                                 headers=signed(b"[]", "msg_6")),
            "not json": http.post("/", content=b"nope", headers=signed(b"nope", "msg_7")),
            "get": http.get("/"),
        }
    got = {name: (r.status_code, r.json()["refused"]) for name, r in answers.items()}
    assert got == {
        "forged": (401, "bad_signature"), "tampered": (401, "bad_signature"),
        "stale": (400, "stale"), "unsigned": (401, "missing_headers"),
        "oversized": (413, "too_large"), "chunked": (413, "too_large"),
        "not json": (400, "not_json"), "get": (405, "method"),
    }
    for r in answers.values():
        assert SECRET_PAYLOAD not in r.text
    assert receiver.refusals == {"bad_signature": 2, "stale": 1, "missing_headers": 1,
                                 "too_large": 2, "not_json": 1, "method": 1}
    exported = {reason: counted(receiver.name, reason) - before[reason] for reason in STATUS}
    assert {reason: n for reason, n in exported.items() if n} == receiver.refusals
    (only,) = jobs(conn, "vendor.event")
    assert only[0] == "msg_1"
    assert only[1]["body"] == {"type": "paid", "card": SECRET_PAYLOAD}
    assert only[1]["receiver"] == "vendor.event"


def test_a_redelivery_after_the_job_finished_is_still_not_processed_again(
        app: Forklift, conn: psycopg.Connection[Any]) -> None:
    from apps.basic import running_worker

    handled: list[str] = []

    @app.job(name="vendor.once")
    def on_event(ctx: JobContext, delivery: Inbound) -> None:
        handled.append(delivery.id)

    receiver = Receiver(on_event, secrets=SECRET)
    body = b'{"n":1}'
    with Served(receiver) as served, httpx.Client(base_url=served.url, timeout=10) as http:
        assert http.post("/", content=body, headers=signed(body, "msg_9")).status_code == 200
        with running_worker(app):
            wait_until(lambda: handled, timeout=30, message="the delivery was handled")
            again = http.post("/", content=body, headers=signed(body, "msg_9"))
            assert again.json() == {"id": "msg_9", "duplicate": True}
    assert handled == ["msg_9"]
    assert len(jobs(conn, "vendor.once")) == 1


def test_concurrent_duplicates_make_one_job(app: Forklift, conn: psycopg.Connection[Any]) -> None:
    @app.job(name="vendor.race")
    def on_event(ctx: JobContext, delivery: Inbound) -> None:
        return None

    receiver = Receiver(on_event, secrets=SECRET)
    body = b'{"n":2}'

    async def storm(url: str) -> list[bool]:
        async with httpx.AsyncClient(base_url=url, timeout=10) as http:
            answers = await asyncio.gather(*(
                http.post("/", content=body, headers=signed(body, "msg_race"))
                for _ in range(8)))
        return [r.json()["duplicate"] for r in answers]

    with Served(receiver) as served:
        flags = asyncio.run(storm(served.url))
    assert sorted(flags) == [False] + [True] * 7
    assert len(jobs(conn, "vendor.race")) == 1


def test_a_vendor_scheme_plugs_in_and_stale_still_applies(
        app: Forklift, conn: psycopg.Connection[Any]) -> None:
    @app.job(name="vendor.own")
    def on_event(ctx: JobContext, delivery: Inbound) -> None:
        return None

    def verify(received: Any, body: bytes) -> tuple[str, int]:
        if received.get("x-vendor-token") != "s3cret":
            raise SignatureRefused("bad_signature", "wrong token")
        return received["x-vendor-id"], int(received["x-vendor-time"])

    receiver = Receiver(on_event, verify=verify)
    now = str(int(time.time()))
    with Served(receiver) as served, httpx.Client(base_url=served.url, timeout=10) as http:
        good = http.post("/", content=b"{}", headers={
            "x-vendor-token": "s3cret", "x-vendor-id": "v1", "x-vendor-time": now})
        bad = http.post("/", content=b"{}", headers={
            "x-vendor-token": "guess", "x-vendor-id": "v2", "x-vendor-time": now})
        old = http.post("/", content=b"{}", headers={
            "x-vendor-token": "s3cret", "x-vendor-id": "v3", "x-vendor-time": "1000"})
    assert [good.status_code, bad.status_code, old.status_code] == [200, 401, 400]
    assert [r[0] for r in jobs(conn, "vendor.own")] == ["v1"]


def test_a_receiver_needs_exactly_one_way_to_verify(app: Forklift) -> None:
    from forklift import ConfigError

    @app.job(name="vendor.none")
    def on_event(ctx: JobContext, delivery: Inbound) -> None:
        return None

    with pytest.raises(ConfigError) as exc:
        Receiver(on_event)
    assert exc.value.detail["field"] == "secrets"
    with pytest.raises(ConfigError) as exc:
        Receiver(on_event, secrets=SECRET, max_bytes=0)
    assert exc.value.detail["field"] == "max_bytes"
