"""The leases one process holds: when to renew them, and which are lost.

Shared by whichever loop renews them (the worker's lock service, an app's renewer thread):
both renew every lease in one statement whenever the first is due, and both declare lost a
lease a renewal refused or none renewed in time by the local clock.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Protocol


class Lease(Protocol):
    """What the book needs of a held lock (:class:`forklift._features.flow.locks.Lock`): its
    key and token name the lease, its ttl paces the renewals, ``on_lost`` is told when it goes."""

    key: str
    ttl: float
    token: int | None

    def on_lost(self, why: str) -> None: ...


@dataclass
class Held:
    lock: Lease
    deadline: float  # monotonic: the lease runs out here unless a renewal lands
    renew_at: float

    @property
    def ident(self) -> tuple[str, int]:
        assert self.lock.token is not None
        return self.lock.key, self.lock.token


class Book:
    """Leases a process holds: when to renew them, and which are lost. Thread-safe: an app's
    locks are taken on callers' threads and renewed on a thread of their own."""

    def __init__(self) -> None:
        self._held: dict[tuple[str, int], Held] = {}
        self._mutex = threading.Lock()

    def __len__(self) -> int:
        return len(self._held)

    def add(self, lock: Lease, sent: float) -> None:
        held = Held(lock, sent + lock.ttl, sent + lock.ttl / 3)
        with self._mutex:
            self._held[held.ident] = held

    def remove(self, lock: Lease) -> Held | None:
        with self._mutex:
            return self._held.pop((lock.key, lock.token or 0), None)

    def batch(self, now: float) -> list[tuple[str, int]]:
        """Every lease, in key order, when at least one is due for renewal; else nothing."""
        with self._mutex:
            if not any(h.renew_at <= now for h in self._held.values()):
                return []
            return sorted(self._held)

    def renewed(self, sent: float, asked: list[tuple[str, int]], kept: set[tuple[str, int]]
                ) -> list[Held]:
        """Apply a renewal's answer; returns the leases it refused (forgotten here)."""
        lost = []
        with self._mutex:
            for ident in asked:
                held = self._held.get(ident)
                if held is None:
                    continue  # released (or lost) while the renewal was in flight
                if ident in kept:
                    held.deadline = max(held.deadline, sent + held.lock.ttl)
                    held.renew_at = sent + held.lock.ttl / 3
                else:
                    lost.append(self._held.pop(ident))
        return lost

    def expired(self, now: float) -> list[Held]:
        """Leases whose deadline passed with no renewal landing (a late answer is still late)."""
        with self._mutex:
            gone = [h for h in self._held.values() if h.deadline <= now]
            for h in gone:
                del self._held[h.ident]
        return gone

    def earliest_deadline(self) -> float:
        with self._mutex:
            return min((h.deadline for h in self._held.values()), default=float("inf"))

    def wake_in(self, now: float) -> float | None:
        """Seconds until the next renewal or deadline; None when nothing is held."""
        with self._mutex:
            if not self._held:
                return None
            nxt = min(min(h.renew_at, h.deadline) for h in self._held.values())
        return max(0.0, nxt - now)
