"""Retry policy and the handler's ways of saying what should happen next.

A handler raises :class:`Retry` (try again at a named time; still an attempt), :class:`Snooze`
(come back later; not an attempt), :class:`Fail` (terminal: dead at once, attempts unspent), or
anything else (retried by the kind's :class:`Backoff` until ``max_attempts``).
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

BackoffKind = Literal["exponential", "linear", "fixed"]
Jitter = Literal["full", "equal", "none"]


@dataclass(frozen=True)
class Backoff:
    """How long to wait before attempt ``n + 1`` after attempt ``n`` failed.

    ``exponential``: ``base * 2 ** (n - 1)``; ``linear``: ``base * n``; ``fixed``: ``base``;
    every delay is capped at ``max`` seconds. Jitter spreads retries of jobs that failed
    together: ``equal`` (default) waits between half the delay and the delay, ``full`` between
    zero and the delay, ``none`` exactly the delay.
    """

    kind: BackoffKind = "exponential"
    base: float = 1.0
    max: float = 3600.0
    jitter: Jitter = "equal"

    def __post_init__(self) -> None:
        if self.kind not in ("exponential", "linear", "fixed"):
            raise ValueError(f"Backoff kind must be exponential, linear or fixed, not {self.kind!r}")
        if self.jitter not in ("full", "equal", "none"):
            raise ValueError(f"Backoff jitter must be full, equal or none, not {self.jitter!r}")
        if self.base < 0 or self.max < 0:
            raise ValueError("Backoff base and max must not be negative")

    def ceiling(self, attempt: int) -> float:
        """The delay before jitter for a failure of ``attempt`` (1-based)."""
        n = max(1, attempt)
        if self.kind == "fixed":
            raw = self.base
        elif self.kind == "linear":
            raw = self.base * n
        else:
            # Cap the exponent: 2**1024 overflows a float long before any sane max.
            raw = self.base * (2.0 ** min(n - 1, 60))
        return min(raw, self.max)

    def delay(self, attempt: int, rng: random.Random | None = None) -> float:
        d = self.ceiling(attempt)
        r = (rng or random).random()
        if self.jitter == "full":
            return d * r
        if self.jitter == "equal":
            return d / 2 + (d / 2) * r
        return d

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Backoff:
        return cls(
            kind=data.get("kind", "exponential"),
            base=float(data.get("base", 1.0)),
            max=float(data.get("max", 3600.0)),
            jitter=data.get("jitter", "equal"),
        )


def _seconds(value: float | timedelta | datetime) -> float:
    if isinstance(value, datetime):
        when = value if value.tzinfo else value.replace(tzinfo=UTC)
        return (when - datetime.now(UTC)).total_seconds()
    if isinstance(value, timedelta):
        return value.total_seconds()
    return float(value)


class JobControl(Exception):
    """Base of the exceptions a handler raises to choose what happens next."""


class Retry(JobControl):
    """Retry at a named time (seconds from now, a timedelta or a datetime); still an attempt.

    The delay is clamped to the kind's backoff ``max``.
    """

    def __init__(self, after: float | timedelta | datetime = 0.0, reason: str | None = None) -> None:
        super().__init__(reason or "retry requested")
        self.after = max(0.0, _seconds(after))
        self.reason = reason


class Snooze(JobControl):
    """Come back after ``delay``; does not count as an attempt and records no error."""

    def __init__(self, delay: float | timedelta) -> None:
        super().__init__("snoozed")
        self.delay = max(0.0, _seconds(delay))


class Fail(JobControl):
    """Terminal failure: the job goes dead at once with ``code``.

    ``code`` should be one the kind declared in ``failure_codes``; an undeclared code is stored
    as ``internal_error``.
    """

    def __init__(self, code: str, message: str | None = None) -> None:
        super().__init__(message or code)
        self.code = code
        self.message = message
