"""Keys: per-key concurrency limits and rates, declared on a kind, computed at enqueue.

    @app.job(concurrency=[Key(lambda p: p.tenant, limit=2, name="tenant"),
                          Key(lambda p: p.account, limit=1, name="account")])
    def sync(ctx, p: Sync) -> None: ...

    @app.job(rate=Rate(100, per=1))          # at most 100 starts a second, fleet-wide
    def call_vendor(ctx, p: Call) -> None: ...

A key's function receives the validated payload and returns a string: the key's value for that
job. At enqueue every value is computed and stored on the row (``jobs.keys``, as ``name`` and
``value`` joined by chr(31), in declaration order: the first is the job's partition, which fair
share rotates over). Across every worker, at most ``limit`` jobs with the same value of a key
run at once, and at most ``rate`` of them start per period. A function that raises, or returns
anything but a non-empty string a reader can see whole, refuses the enqueue with
:class:`~forklift.InvalidKey` naming the kind; nothing is stored.

A key is known by its ``name`` (default ``<kind>#<position>``): kinds that name the same key
share its limits, and operators change them by name (``forklift keys limit NAME 5``).
``rate=`` on a kind is a key named after the kind with one value.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from forklift._base.errors import ConfigError, InvalidKey, InvalidName
from forklift._base.names import check_name

SEP = "\x1f"  # between a key's name and its value in jobs.keys (a value cannot hold it)
MAX_KEYS = 8
MAX_LIMIT = 1_000_000
_RATE = re.compile(r"^\s*(\d+)\s*/\s*(\d+(?:\.\d+)?)?\s*(ms|s|m|h|d)?\s*$", re.I)
_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


@dataclass(frozen=True)
class Rate:
    """At most ``limit`` starts per ``per`` seconds, as a token bucket of ``burst`` tokens
    (default ``limit``) refilled at ``limit / per`` a second."""

    limit: int
    per: float = 1.0
    burst: int | None = None

    def __post_init__(self) -> None:
        if isinstance(self.limit, bool) or not isinstance(self.limit, int) or not (
                1 <= self.limit <= MAX_LIMIT):
            raise ConfigError(f"a rate's limit is a whole number 1 to {MAX_LIMIT:,}, not"
                              f" {self.limit!r}", field="rate")
        per = self.per
        if isinstance(per, bool) or not isinstance(per, (int, float)) or not (
                math.isfinite(per) and 0.001 <= per <= 86400 * 7):
            raise ConfigError(f"a rate's period is 0.001 to 604,800 seconds, not {per!r}",
                              field="rate")
        burst = self.burst
        if burst is not None and (isinstance(burst, bool) or not isinstance(burst, int)
                                  or not 1 <= burst <= MAX_LIMIT):
            raise ConfigError(f"a rate's burst is a whole number 1 to {MAX_LIMIT:,}, not"
                              f" {burst!r}", field="rate")
        object.__setattr__(self, "per", float(per))

    @property
    def capacity(self) -> int:
        return self.burst if self.burst is not None else self.limit

    @classmethod
    def parse(cls, text: str, burst: int | None = None) -> Rate:
        """``100/s``, ``10/5s``, ``600/m``, ``2/h``, ``50/250ms``: N per period."""
        m = _RATE.match(text) if isinstance(text, str) else None
        if m is None:
            raise ConfigError(f"rate {text!r} is not N/period, e.g. 100/s, 10/5s or 600/m",
                              field="rate")
        count, number, unit = int(m.group(1)), m.group(2), (m.group(3) or "s").lower()
        return cls(count, float(number or 1) * _UNIT[unit], burst)

    def __str__(self) -> str:
        per = f"{self.per:g}s" if self.per != 1 else "s"
        more = f" burst {self.burst}" if self.burst is not None else ""
        return f"{self.limit}/{per}{more}"

    def to_json(self) -> dict[str, Any]:
        return {"limit": self.limit, "per": self.per, "burst": self.capacity}


@dataclass(frozen=True)
class Key:
    """A key of a kind: ``fn(payload) -> str``, with an optional concurrency ``limit`` and
    ``rate``. With neither it still partitions the kind's jobs for fair share."""

    fn: Callable[[Any], Any]
    limit: int | None = None
    rate: Rate | None = None
    name: str | None = None

    def __post_init__(self) -> None:
        if not callable(self.fn):
            raise ConfigError(f"a Key's first argument is a function of the payload, not"
                              f" {self.fn!r}", field="key")
        check_limit(self.limit, "limit")
        if self.rate is not None and not isinstance(self.rate, Rate):
            raise ConfigError(f"a Key's rate is a Rate, not {self.rate!r}", field="rate")
        if self.name is not None:
            check_key_name(self.name)


def check_limit(limit: object, field: str) -> int | None:
    if limit is None:
        return None
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise ConfigError(f"a key's concurrency limit is a whole number 1 to {MAX_LIMIT:,}, not"
                          f" {limit!r} (no limit: leave it out)", field=field)
    return limit


def check_key_name(name: object) -> str:
    try:
        return check_name(name, "kind", field="key name")
    except InvalidName as exc:
        raise ConfigError(exc.message, field="name") from None


@dataclass(frozen=True)
class Declared:
    """One key as a kind declares it: what the worker records in ``flow_keys``."""

    name: str
    limit: int | None
    rate: Rate | None

    def to_json(self) -> dict[str, Any]:
        return {"concurrency": self.limit, "rate": self.rate.to_json() if self.rate else None}


class KeySet:
    """A kind's keys, in order: computes a payload's key values (``jobs.keys``)."""

    def __init__(self, kind: str, keys: Sequence[Key] | Key, rate: Rate | None) -> None:
        if isinstance(keys, Key):
            keys = [keys]
        items = list(keys)
        if not all(isinstance(k, Key) for k in items):
            raise ConfigError(f"concurrency= of {kind} is a list of Key(...)", field="concurrency")
        if rate is not None:
            if not isinstance(rate, Rate):
                raise ConfigError(f"rate= of {kind} is a Rate, not {rate!r}", field="rate")
            items.append(Key(lambda _p: "*", rate=rate, name=kind))
        if len(items) > MAX_KEYS:
            raise ConfigError(f"{kind} declares {len(items)} keys; at most {MAX_KEYS}",
                              field="concurrency")
        self.kind = kind
        self.keys = items
        self.names = [k.name or f"{kind}#{i}" for i, k in enumerate(items)]
        if len(set(self.names)) != len(self.names):
            raise ConfigError(f"{kind} declares the key {self._twice()!r} twice", field="name")

    def _twice(self) -> str:
        return next(n for n in self.names if self.names.count(n) > 1)

    def declared(self) -> list[Declared]:
        return [Declared(n, k.limit, k.rate) for n, k in zip(self.names, self.keys, strict=True)]

    def values(self, payload: Any) -> list[str]:
        """The row's ``keys``; raises InvalidKey naming the kind and the key."""
        out = []
        for name, key in zip(self.names, self.keys, strict=True):
            try:
                value = key.fn(payload)
            except Exception as exc:
                raise self._refused(name, f"its function raised {type(exc).__name__}: {exc}") from exc
            if not isinstance(value, str):
                raise self._refused(name, f"its function returned {type(value).__name__}, not"
                                          " a string")
            try:
                check_name(value, "kind", field="value")
            except InvalidName as exc:
                raise self._refused(name, exc.message) from None
            out.append(name + SEP + value)
        return out

    def _refused(self, name: str, reason: str) -> InvalidKey:
        return InvalidKey(f"key {name!r} of kind {self.kind!r} refused the payload: {reason}",
                          kind=self.kind, key=name, reason=reason)


def declare(kind: str, concurrency: Sequence[Key] | Key | None, rate: Rate | None
            ) -> KeySet | None:
    """The kind's KeySet, or None when it declares no key (its jobs carry none)."""
    if not concurrency and rate is None:
        return None
    return KeySet(kind, concurrency or [], rate)


def split(element: str) -> tuple[str, str]:
    """(name, value) of one element of ``jobs.keys``."""
    name, _, value = element.partition(SEP)
    return name, value
