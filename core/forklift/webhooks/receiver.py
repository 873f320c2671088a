"""The inbound receiver: an ASGI app that verifies a delivery and hands it to a job.

    on_vendor = app.job(name="vendor.event")(handle)       # takes (ctx, Inbound)
    receiver = Receiver(on_vendor, secrets=["whsec_..."])  # mount it at any path

In order, before any work: a method other than POST is refused (405); a ``content-length``
over ``max_bytes`` is refused before a byte of the body is read, and a body without one is
refused as soon as it grows past the limit (413); then the signature (Standard Webhooks, or
``verify=`` for a vendor's own scheme) and the timestamp, which may be at most ``tolerance``
seconds away (401 and 400); a body that is not JSON is refused (400). A verified delivery is
recorded by its id and enqueued in ONE transaction, so a redelivery (the sender did not hear
our answer) is acknowledged with ``"duplicate": true`` and never becomes a second job, however
long after the first it comes. A database that cannot be reached answers 503 so the sender
tries again. Refusals are counted by reason (:attr:`Receiver.refusals`, and the Prometheus
counter ``forklift_webhook_refusals_total`` when prometheus-client is installed); an answer
never echoes the payload.
"""

from __future__ import annotations

import collections
import json
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, MutableMapping
from typing import TYPE_CHECKING, Any, cast

import psycopg

from forklift._base.errors import ConfigError, EnqueueRefused
from forklift._db.sqltext import render
from forklift.webhooks import signing
from forklift.webhooks.errors import SignatureRefused
from forklift.webhooks.inbound import Inbound

if TYPE_CHECKING:
    from forklift._app.app import Forklift
    from forklift._app.kind import JobKind

__all__ = ["RECEIPT_SQL", "Receiver", "Verify"]

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
#: A vendor's scheme: ``verify(headers, body)`` returns the delivery's ``(id, timestamp)`` or
#: raises :class:`~forklift.webhooks.SignatureRefused`; headers have lower-case names.
Verify = Callable[[Mapping[str, str], bytes], tuple[str, int]]

RECEIPT_SQL = """
INSERT INTO {s}.webhook_receipts (receiver, delivery_id) VALUES (%s, %s)
ON CONFLICT DO NOTHING RETURNING 1
"""
RECEIPT_JOB_SQL = "UPDATE {s}.webhook_receipts SET job_id = %s WHERE receiver = %s AND delivery_id = %s"

#: The HTTP status of each refusal.
STATUS = {"method": 405, "too_large": 413, "bad_length": 400, "missing_headers": 401,
          "bad_signature": 401, "bad_timestamp": 400, "stale": 400, "not_json": 400,
          "unavailable": 503}

_COUNTER: Any = None


def _prometheus(receiver: str, reason: str) -> None:
    """Count a refusal on the process's Prometheus registry, when prometheus-client is there."""
    global _COUNTER
    if _COUNTER is None:
        try:
            from prometheus_client import Counter
        except ImportError:
            _COUNTER = False
            return
        _COUNTER = Counter("forklift_webhook_refusals", "Deliveries the webhook receiver"
                           " refused, by reason", ["receiver", "reason"])
    if _COUNTER is not False:
        _COUNTER.labels(receiver, reason).inc()


class Receiver:
    """An ASGI app (FastAPI/Starlette ``mount``, Django's ASGI router) for one sender."""

    def __init__(
        self,
        kind: JobKind[Inbound, Any],
        *,
        secrets: Iterable[str] | str | None = None,
        verify: Verify | None = None,
        name: str | None = None,
        max_bytes: int = 256 * 1024,
        tolerance: float = 300.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if (secrets is None) == (verify is None):
            raise ConfigError("a receiver takes secrets= (Standard Webhooks) or verify= (a"
                              " vendor's scheme), one of them", field="secrets")
        self.kind = kind
        self.app = cast("Forklift", kind.app)
        self.name = name or kind.name
        self.keys = signing.secrets_of(secrets) if secrets is not None else ()
        self.verify = verify
        if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 1:
            raise ConfigError(f"max_bytes is a positive number of bytes, not {max_bytes!r}",
                              field="max_bytes")
        self.max_bytes = max_bytes
        if not 0 < tolerance <= 86400:
            raise ConfigError(f"tolerance is seconds, more than 0, not {tolerance!r}",
                              field="tolerance")
        self.tolerance = float(tolerance)
        self.clock = clock
        #: Refusals since start, by reason.
        self.refusals: collections.Counter[str] = collections.Counter()

    def __repr__(self) -> str:
        return f"<Receiver {self.name} -> {self.kind.name}>"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        if scope.get("method") != "POST":
            await self._refuse(send, "method")
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1")
                   for k, v in scope.get("headers", ())}
        length = headers.get("content-length")
        if length is not None:
            if not (length.isascii() and length.isdigit()):
                await self._refuse(send, "bad_length")
                return
            if int(length) > self.max_bytes:
                await self._refuse(send, "too_large")
                return
        body = await self._body(receive)
        if body is None:
            await self._refuse(send, "too_large")
            return
        try:
            delivery_id, stamp = self._verified(headers, body)
        except SignatureRefused as exc:
            await self._refuse(send, exc.reason if exc.reason in STATUS else "bad_signature")
            return
        try:
            data = json.loads(body)
        except ValueError:
            await self._refuse(send, "not_json")
            return
        try:
            duplicate = await self._accept(Inbound(delivery_id, stamp, self.name, data))
        except EnqueueRefused:
            await self._refuse(send, "too_large")
            return
        except psycopg.OperationalError:
            await self._refuse(send, "unavailable")
            return
        await self._answer(send, 200, {"id": delivery_id, "duplicate": duplicate})

    def _verified(self, headers: Mapping[str, str], body: bytes) -> tuple[str, int]:
        now = self.clock()
        if self.verify is None:
            return signing.verify(self.keys, headers, body, now=now, tolerance=self.tolerance)
        delivery_id, stamp = self.verify(headers, body)
        if abs(now - stamp) > self.tolerance:
            raise SignatureRefused("stale", f"the timestamp is more than {self.tolerance:g}s away")
        return delivery_id, stamp

    async def _body(self, receive: Receive) -> bytes | None:
        """The whole body, or None as soon as it grows past ``max_bytes``."""
        parts: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                return None
            parts.append(chunk)
            if not message.get("more_body", False):
                break
        return b"".join(parts)

    async def _accept(self, delivery: Inbound) -> bool:
        """Record the delivery and enqueue its job in one transaction; True for a redelivery."""
        schema = self.app.schema
        pool = await self.app.async_pool()
        async with pool.connection() as conn, conn.transaction():
            cur = await conn.execute(render(RECEIPT_SQL, schema), (self.name, delivery.id))
            if await cur.fetchone() is None:
                return True
            job = await self.kind.enqueue_async(delivery, conn=conn, unique_key=delivery.id)
            await conn.execute(render(RECEIPT_JOB_SQL, schema), (job.id, self.name, delivery.id))
        return False

    async def _refuse(self, send: Send, reason: str) -> None:
        self.refusals[reason] += 1
        _prometheus(self.name, reason)
        await self._answer(send, STATUS[reason], {"refused": reason})

    @staticmethod
    async def _answer(send: Send, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(data)).encode())]})
        await send({"type": "http.response.body", "body": data})

    @staticmethod
    async def _lifespan(receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
