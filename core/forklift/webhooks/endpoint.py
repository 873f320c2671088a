"""An outbound webhook endpoint: a job kind made by a factory, one event to one endpoint a job.

    billing = Endpoint(app, "billing", url="https://example.com/hooks", secrets=["whsec_..."])
    billing.send("invoice.paid", {"invoice": 42}, conn=conn)   # in the caller's transaction
    billing.publish("invoice.paid", {"invoice": 42}, conn=conn)  # through the outbox

The kind is ``webhooks.<name>``, on queue ``webhooks`` unless told otherwise. The endpoint's
``rate`` and ``concurrency`` are a key of that kind (limits across the fleet); ``ordered=True``
runs one delivery at a time and holds each until every earlier one has ended, so the receiver
sees the events in the order they were made. Secrets come from the code (an environment
variable, a vault), never from the database; give two while rotating.
"""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from forklift._app.context import JobContext
from forklift._base.errors import ConfigError, InvalidPayload
from forklift._base.names import check_name
from forklift._base.retry import Backoff
from forklift._features.flow.keys import Key, Rate
from forklift.webhooks import delivery, signing
from forklift.webhooks.event import Event

if TYPE_CHECKING:
    import psycopg

    from forklift._app.app import Forklift
    from forklift._app.kind import JobKind
    from forklift._jobs.job import Job

__all__ = ["DEFAULT_RETRY", "KIND_PREFIX", "TOPIC_PREFIX", "Endpoint"]

#: An endpoint's kind is this and its name.
KIND_PREFIX = "webhooks."
#: An endpoint's outbox topic is this and its name.
TOPIC_PREFIX = "webhooks."
#: About a day and a half of tries: 1s, 2s, 4s ... then hourly.
DEFAULT_RETRY = Backoff(kind="exponential", base=1.0, max=3600.0, jitter="equal")


def _seconds(value: object, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
            math.isfinite(value) and 0 < value <= 3600):
        raise ConfigError(f"{field} is seconds, more than 0 and at most 3600, not {value!r}",
                          field=field)
    return float(value)


class Endpoint:
    """A receiver of signed events: its kind delivers them (see :mod:`forklift.webhooks.delivery`)."""

    def __init__(
        self,
        app: Forklift,
        name: str,
        *,
        url: str,
        secrets: Iterable[str] | str,
        rate: Rate | None = None,
        concurrency: int | None = None,
        ordered: bool = False,
        connect_timeout: float = 5.0,
        timeout: float = 30.0,
        disable_on: Iterable[int] = (410,),
        max_attempts: int = 25,
        retry: Backoff | None = None,
        queue: str = "webhooks",
        max_response: int = 1024 * 1024,
    ) -> None:
        self.app = app
        self.name = check_name(name, "kind", field="name")
        parts = urlsplit(url) if isinstance(url, str) else None
        if parts is None or parts.scheme not in ("http", "https") or not parts.netloc:
            raise ConfigError(f"url of endpoint {self.name} must be an http or https URL",
                              field="url")
        self.url = url
        self.secrets = signing.secrets_of(secrets)
        if concurrency is not None and (isinstance(concurrency, bool) or not isinstance(
                concurrency, int) or concurrency < 1):
            raise ConfigError(f"concurrency of endpoint {self.name} is a whole number of at"
                              f" least 1, not {concurrency!r}", field="concurrency")
        self.ordered = bool(ordered)
        self.concurrency = 1 if self.ordered else concurrency
        self.rate = rate
        self.connect_timeout = _seconds(connect_timeout, "connect_timeout")
        self.timeout = _seconds(timeout, "timeout")
        codes = frozenset(disable_on)
        if not all(isinstance(c, int) and 400 <= c <= 599 for c in codes):
            raise ConfigError(f"disable_on of endpoint {self.name} holds HTTP statuses 400 to"
                              " 599", field="disable_on")
        self.disable_on = codes
        if isinstance(max_response, bool) or not isinstance(max_response, int) or max_response < 1:
            raise ConfigError("max_response is a positive number of bytes",
                              field="max_response")
        self.max_response = max_response
        self.retry = retry or DEFAULT_RETRY
        keys = None
        if self.concurrency is not None or rate is not None:
            keys = [Key(lambda _e: "*", limit=self.concurrency, rate=rate,
                        name=KIND_PREFIX + self.name)]
        self.kind_name = KIND_PREFIX + self.name
        self.kind: JobKind[Event, dict[str, int]] = app.job(
            name=self.kind_name, queue=queue, max_attempts=max_attempts,
            retry=self.retry, timeout=self.connect_timeout + self.timeout + 30.0,
            failure_codes=delivery.FAILURE_CODES, concurrency=keys,
        )(self._run)
        self.topic = TOPIC_PREFIX + self.name
        app.outbox.sink(self.topic, self.kind)

    def __repr__(self) -> str:
        return f"<Endpoint {self.name} {self.url}>"

    async def _run(self, ctx: JobContext, event: Event) -> dict[str, int]:
        return await delivery.deliver(self, ctx, event)

    def event(self, type: str, data: Any, *, id: str | None = None) -> Event:
        """An event, its body fixed: ``{"type", "timestamp", "data"}`` as JSON."""
        kind = check_name(type, "kind", field="type")
        event_id = check_name(id, "unique_key", field="id") if id is not None \
            else f"msg_{uuid.uuid4().hex}"
        try:
            body = json.dumps({"type": kind, "timestamp": datetime.now(UTC).isoformat(),
                               "data": data}, separators=(",", ":"), allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise InvalidPayload(f"data of a {kind} event is not JSON: {exc}",
                                 field="data") from None
        return Event(event_id, kind, body)

    def send(self, type: str, data: Any, *, id: str | None = None,
             conn: psycopg.Connection[Any] | None = None) -> Job:
        """Enqueue the event's delivery (in the caller's transaction with ``conn=``). An ``id``
        a live delivery already has returns that delivery: sending twice is safe."""
        event = self.event(type, data, id=id)
        return self.kind.enqueue(event, conn=conn, unique_key=event.id)

    async def send_async(self, type: str, data: Any, *, id: str | None = None,
                         conn: psycopg.AsyncConnection[Any] | None = None) -> Job:
        """:meth:`send` for asyncio."""
        event = self.event(type, data, id=id)
        return await self.kind.enqueue_async(event, conn=conn, unique_key=event.id)

    def publish(self, type: str, data: Any, *, id: str | None = None,
                conn: psycopg.Connection[Any] | None = None) -> int:
        """Record the event in the outbox (in the caller's transaction with ``conn=``); the
        leader's relay turns it into a delivery. Returns the outbox message's id."""
        event = self.event(type, data, id=id)
        return self.app.outbox.publish(self.topic, {"id": event.id, "type": event.type,
                                                    "body": event.body}, conn=conn)
