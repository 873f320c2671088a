"""One delivery attempt of an outbound webhook: gate, sign, send, classify, record.

What an answer means (the Standard Webhooks sender's rules, and the usual HTTP ones):

- 2xx: delivered; the job completes with the status and the size of the answer.
- a status in the endpoint's ``disable_on`` (410 by default): the endpoint is gone; this event
  is dead (``endpoint_gone``) and the endpoint is disabled, with an audit row, so its later
  events are held until an operator enables it again.
- any other 4xx but 408, 409, 425 and 429: the endpoint refuses this event; dead (``rejected``).
- anything else (5xx, 408, 409, 425, 429, a timeout, a refused connection): retried. A
  ``Retry-After`` the endpoint sent names the delay, clamped by the endpoint's retry policy and
  jittered upwards (never sooner than asked); without one the policy's backoff decides.

The answer's body is read only to count its size (up to a cap) and is never stored.
"""

from __future__ import annotations

import asyncio
import random
import time
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Literal, Protocol

from forklift._base.retry import Fail, Retry, Snooze
from forklift._base.scrub import scrub
from forklift.webhooks import health, signing
from forklift.webhooks.errors import DeliveryFailed

if TYPE_CHECKING:

    from forklift._app.app import Forklift
    from forklift._app.context import JobContext
    from forklift._base.retry import Backoff
    from forklift.webhooks.event import Event

__all__ = ["FAILURE_CODES", "HOLD", "RETRYABLE_4XX", "classify", "deliver", "retry_after"]

#: Codes a delivery ends with, declared on every endpoint's kind.
FAILURE_CODES = ("endpoint_gone", "rejected")
#: 4xx answers that mean "not now" rather than "never".
RETRYABLE_4XX = frozenset({408, 409, 425, 429})
#: How long a delivery to a disabled endpoint waits before it looks again; enabling the
#: endpoint wakes its held deliveries at once (``forklift webhooks enable``).
HOLD = 3600.0
#: Upward spread of a delay an endpoint named, as a share of it.
JITTER = 0.1
#: While an earlier delivery of an ordered endpoint is owed, look again at least this late.
ORDER_RECHECK = 0.2

Verdict = Literal["delivered", "gone", "rejected", "retry"]


class Destination(Protocol):
    """What a delivery needs of its endpoint (:class:`~forklift.webhooks.Endpoint` is one)."""

    app: Forklift
    name: str
    url: str
    kind_name: str
    secrets: tuple[signing.Secret, ...]
    ordered: bool
    connect_timeout: float
    timeout: float
    disable_on: frozenset[int]
    max_response: int
    retry: Backoff


def classify(status: int, disable_on: frozenset[int]) -> Verdict:
    if 200 <= status < 300:
        return "delivered"
    if status in disable_on:
        return "gone"
    if 400 <= status < 500 and status not in RETRYABLE_4XX:
        return "rejected"
    return "retry"


def retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """Seconds a ``Retry-After`` header asks for (delta-seconds or an HTTP date), or None."""
    if value is None:
        return None
    text = value.strip()
    if text.isascii() and text.isdigit():
        return float(int(text))
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def _named_delay(asked: float, ceiling: float) -> float:
    """The endpoint's delay, clamped by the policy and spread upwards by up to 10%."""
    base = min(asked, ceiling)
    return min(ceiling, base + base * JITTER * random.random())


async def deliver(endpoint: Destination, ctx: JobContext, event: Event) -> dict[str, int]:
    """The handler of an endpoint's kind: one attempt at delivering ``event``."""
    app = endpoint.app
    pool = await app.async_pool()
    async with pool.connection() as conn:
        seen = await health.gate(conn, app.schema, name=endpoint.name, kind=endpoint.kind_name,
                                 job_id=ctx.job_id, ordered=endpoint.ordered)
    if not seen.enabled:
        raise Snooze(HOLD)
    if seen.earlier_due is not None:
        wait = (seen.earlier_due - datetime.now(UTC)).total_seconds()
        raise Snooze(max(ORDER_RECHECK, wait + ORDER_RECHECK))
    status, size, asked, error, took = await _post(endpoint, event)
    verdict: Verdict | Literal["failed"] = "failed" if status is None else classify(
        status, endpoint.disable_on)
    outcome = health.Outcome(
        endpoint=endpoint.name, url=endpoint.url, event_id=event.id, event_type=event.type,
        job_id=ctx.job_id, attempt=ctx.attempt, status=status, size=size,
        outcome=verdict, error=error, duration_ms=took,
        disable_reason=f"the endpoint answered {status}" if verdict == "gone" else None)
    async with pool.connection() as conn:
        await health.record(conn, app.schema, outcome)
    if verdict == "delivered":
        assert status is not None and size is not None
        return {"status": status, "size": size}
    if verdict == "gone":
        raise Fail("endpoint_gone", f"{endpoint.name} answered {status}: endpoint disabled")
    if verdict == "rejected":
        raise Fail("rejected", f"{endpoint.name} answered {status}")
    if asked is not None:
        raise Retry(after=_named_delay(asked, endpoint.retry.max),
                    reason=f"{endpoint.name} answered {status}, Retry-After {asked:g}s")
    what = f"answered {status}" if status is not None else error
    raise DeliveryFailed(f"{endpoint.name} {what}", endpoint=endpoint.name, status=status,
                         size=size)


async def _post(endpoint: Destination, event: Event
                ) -> tuple[int | None, int | None, float | None, str | None, int]:
    """(status, size, Retry-After seconds, error, milliseconds) of one POST."""
    import httpx

    body = event.body.encode()
    sent = signing.headers(endpoint.secrets, event.id, int(time.time()), body)
    sent.update({"content-type": "application/json", "user-agent": "forklift-webhooks"})
    timeout = httpx.Timeout(endpoint.timeout, connect=endpoint.connect_timeout)
    start = time.monotonic()
    status: int | None = None
    size: int | None = None
    asked: float | None = None
    error: str | None = None
    try:
        async with asyncio.timeout(endpoint.timeout), httpx.AsyncClient(
                timeout=timeout, follow_redirects=False) as client, client.stream(
                    "POST", endpoint.url, content=body, headers=sent) as answer:
            status = answer.status_code
            asked = retry_after(answer.headers.get("retry-after"))
            size = 0
            async for chunk in answer.aiter_raw():
                size += len(chunk)
                if size >= endpoint.max_response:
                    break  # counted up to the cap; the rest is never read
    except (TimeoutError, httpx.TimeoutException):
        status = None
        error = f"no answer within {endpoint.timeout:g}s"
    except httpx.HTTPError as exc:
        status = None
        error = scrub(f"{type(exc).__name__}: {exc}")[:500]
    took = int((time.monotonic() - start) * 1000)
    return status, size, asked, error, took
