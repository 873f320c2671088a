"""A backfill's pace: the clocks it runs on, its token bucket, and its pace samples.

Kept apart from the declarations and the runner (forklift._features.backfill.backfill, forklift._features.backfill.run)
so the operator API can read a run's pace without either.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Protocol

#: How much pace history a run keeps, in seconds.
PACE_KEEP = 300
PACE_WINDOW = 30.0


# -- clocks and the token bucket ----------------------------------------------------------------
class Clock(Protocol):
    #: True when waiting moves the clock rather than time passing (tests): never snooze on it.
    virtual: bool

    def now(self) -> float:
        """Monotonic seconds."""
        ...

    def sleep(self, seconds: float, cancelled: threading.Event) -> None:
        """Wait ``seconds`` or until ``cancelled`` is set."""
        ...


class SystemClock:
    virtual = False

    def now(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float, cancelled: threading.Event) -> None:
        cancelled.wait(seconds)


class FrozenClock:
    """A clock that moves only when told to; a wait on it advances it at once.

    Tests read ``waits`` (every wait asked for) and ``now()`` instead of spending real time.
    """

    virtual = True

    def __init__(self, start: float = 1000.0) -> None:
        self._now = start
        self._lock = threading.Lock()
        self.waits: list[float] = []

    def now(self) -> float:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._now += seconds

    def sleep(self, seconds: float, cancelled: threading.Event) -> None:
        with self._lock:
            self.waits.append(seconds)
            self._now += seconds


class TokenBucket:
    """``rate`` tokens per second, holding at most ``burst``; a page costs one token."""

    def __init__(self, rate: float, clock: Clock, burst: float = 1.0) -> None:
        self.rate = rate
        self.burst = burst
        self.clock = clock
        self.tokens = burst
        self.stamp = clock.now()

    def _refill(self) -> None:
        now = self.clock.now()
        self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now

    def set_rate(self, rate: float) -> None:
        if rate != self.rate:
            self._refill()  # tokens earned so far were earned at the old rate
            self.rate = rate

    def wait_time(self) -> float:
        """Seconds until a token is available (0 when one is)."""
        self._refill()
        return 0.0 if self.tokens >= 1.0 else (1.0 - self.tokens) / self.rate

    def take(self) -> None:
        self._refill()
        self.tokens -= 1.0


# -- pace -------------------------------------------------------------------------------------------
def pace_add(pace: list[list[float]], at: float, pages: int, items: int) -> list[list[float]]:
    """Add a page to per-second samples ``[[second, pages, items], ...]``, dropping old ones."""
    second = float(int(at))
    kept = [p for p in pace if len(p) == 3 and p[0] > second - PACE_KEEP]
    if kept and kept[-1][0] == second:
        kept[-1] = [second, kept[-1][1] + pages, kept[-1][2] + items]
    else:
        kept.append([second, float(pages), float(items)])
    return kept


def pace_rates(
    pace: Sequence[Sequence[float]], now: float, since: float, window: float = PACE_WINDOW
) -> tuple[float, float]:
    """(items/s, pages/s) over the last ``window`` seconds (or since ``since`` if later)."""
    span = min(window, max(1.0, now - since))
    recent = [p for p in pace if p[0] > now - span - 1]
    return sum(p[2] for p in recent) / span, sum(p[1] for p in recent) / span


def pace_series(
    pace: Sequence[Sequence[float]], now: float, buckets: int = 30, width: float = 2.0
) -> list[float]:
    """Items/s in ``buckets`` buckets of ``width`` seconds, oldest first (for a sparkline)."""
    series = [0.0] * buckets
    start = now - buckets * width
    for second, _pages, items in pace:
        index = int((second - start) // width)
        if 0 <= index < buckets:
            series[index] += items / width
    return series
