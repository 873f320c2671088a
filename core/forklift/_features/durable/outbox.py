"""The transactional outbox: ``app.outbox.publish(topic, payload, conn=...)`` and its sinks.

A message is a row recorded in the caller's transaction: it exists exactly when the caller's
own writes do. The leader's relay (:mod:`forklift._features.durable.relay`) hands each topic's messages,
in order, to the sink registered for the topic in the app the worker runs:

- a **job kind**: the relay enqueues one job of that kind per message (payload = the message's
  payload, ``ctx.meta["outbox"]`` = its id and topic) in the same transaction that marks the
  message delivered, so each message becomes exactly one job;
- a **callable** ``fn(message)`` (sync or async): called by the relay; a message is marked
  delivered after it returns, so a relay that dies in between delivers it again (at least once).

A delivery that fails is retried with the sink's backoff, the topic waiting behind it (order
holds); after ``max_attempts`` the message goes ``dead`` and the topic moves on. ``forklift
outbox retry`` sends dead messages again.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, TypeVar

import psycopg

from forklift._base.errors import ConfigError
from forklift._base.names import check_name
from forklift._base.retry import Backoff
from forklift._db.sqltext import render
from forklift._db.steps import Query, Steps, Tx
from forklift._features.host import Host, Kind
from forklift._jobs.payload import to_json_text

T = TypeVar("T")

PUBLISH_SQL = "INSERT INTO {s}.outbox (topic, payload) VALUES (%s, %s::jsonb) RETURNING id"

#: The default schedule of a failing sink's retries.
DEFAULT_RETRY = Backoff(kind="exponential", base=1.0, max=300.0, jitter="equal")


@dataclass(frozen=True)
class Message:
    """What a callable sink receives."""

    id: int
    topic: str
    payload: Any
    attempt: int  # 1 on the first delivery
    created_at: datetime


Deliver = Callable[[Message], Any | Awaitable[Any]]


@dataclass(frozen=True)
class Sink:
    topic: str
    kind: Kind | None
    fn: Deliver | None
    max_attempts: int
    retry: Backoff
    timeout: float

    @property
    def target(self) -> str:
        if self.kind is not None:
            return f"kind {self.kind.name}"
        fn = self.fn
        return f"callable {getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', fn)}"


class OutboxHost(Host, Protocol):
    """What the outbox needs of an app: a way to run a unit of work on its pools or on the
    caller's connection."""

    def _run(self, steps: Steps[T], conn: psycopg.Connection[Any] | None = None,
             tx: Tx = "none") -> T: ...

    async def _run_async(self, steps: Steps[T], conn: psycopg.AsyncConnection[Any] | None = None,
                         tx: Tx = "none") -> T: ...


class Outbox:
    """``app.outbox``: publish messages and register the sinks that receive them."""

    def __init__(self, app: OutboxHost) -> None:
        self.app = app
        self.sinks: dict[str, Sink] = {}

    def _steps(self, topic: object, payload: Any) -> Steps[int]:
        name = check_name(topic, "topic")
        text = to_json_text(payload, what="outbox payload", kind=name,
                            limit=self.app.payload_limit)
        row = yield Query(render(PUBLISH_SQL, self.app.schema), (name, text), "one")
        assert row is not None
        return int(row[0])

    def publish(
        self, topic: str, payload: Any, *, conn: psycopg.Connection[Any] | None = None
    ) -> int:
        """Record a message (in the caller's transaction with ``conn=``); returns its id."""
        return self.app._run(self._steps(topic, payload), conn)

    async def publish_async(
        self, topic: str, payload: Any, *, conn: psycopg.AsyncConnection[Any] | None = None
    ) -> int:
        """:meth:`publish` for asyncio."""
        return await self.app._run_async(self._steps(topic, payload), conn)

    def sink(
        self,
        topic: str,
        target: Kind | Deliver | None = None,
        *,
        max_attempts: int = 10,
        retry: Backoff | None = None,
        timeout: float = 30.0,
    ) -> Any:
        """Deliver ``topic`` to a job kind or a callable; usable as a decorator.

            app.outbox.sink("orders.paid", send_receipt)      # a kind: one job per message

            @app.outbox.sink("orders.paid.webhook", max_attempts=5)
            def post(message: Message) -> None: ...           # called by the relay
        """
        name = check_name(topic, "topic")
        if max_attempts < 1:
            raise ConfigError(f"max_attempts of the {name} sink must be at least 1")
        if timeout <= 0:
            raise ConfigError(f"timeout of the {name} sink must be positive")

        def register(t: Any) -> Any:
            if name in self.sinks:
                raise ConfigError(f"topic {name!r} already has a sink ({self.sinks[name].target})")
            is_kind = isinstance(t, Kind)  # a kind is callable too: asked first
            if not is_kind and not callable(t):
                raise ConfigError(f"the sink of {name!r} must be a job kind or a callable")
            self.sinks[name] = Sink(name, t if is_kind else None, None if is_kind else t,
                                    max_attempts, retry or DEFAULT_RETRY, timeout)
            return t

        return register(target) if target is not None else register
