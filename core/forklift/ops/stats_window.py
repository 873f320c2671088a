"""The stats window's maths: run-time bins, the p95, per-bucket series, the cache of closed buckets.

Run times are counted into log-scale bins (RT_BINS between RT_MIN and RT_MAX seconds), so a
window's mean and p95 come from per-bucket (or per-minute, forklift.ops.stats_rollup) histograms
that merge, and closed buckets can be kept: the p95 is the middle of its bin, within RT_ERROR of
the exact figure.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from forklift._features.stats.sql import (
    BIN_WIDTH,
    RT_BINS,
    RT_ERROR,
    RT_LN_MAX,
    RT_LN_MIN,
    RT_MAX,
    RT_MIN,
    SETTLE_MARGIN,
)

__all__ = [
    "RT_BINS", "RT_ERROR", "RT_LN_MAX", "RT_LN_MIN", "RT_MAX", "RT_MIN", "SETTLE_MARGIN",
    "Finished", "WindowCache", "p95", "tally",
]

#: A window row: (queue, state, slot, run-time bin, jobs, their summed run time). state is
#: completed, dead or failed (failed attempts), or runs: completed jobs in a run-time bin that
#: rows of their own count in the series (a rolled-up minute's, kept by a cache). bin None: no
#: run time in the row.
Finished = tuple[str, str, int, int | None, int, float]
#: A rolled-up minute (forklift.ops.stats_rollup): queue, minute, completed, dead, failed
#: attempts, summed run time, run-time bins and the completed jobs in each.
Minute = tuple[str, int, int, int, int, float, list[int], list[int]]


def as_rows(minutes: list[Minute], width: float) -> list[Finished]:
    """Rolled-up minutes as window rows, per bucket (what a cache keeps)."""
    k = int(width // 60)
    out: list[Finished] = []
    for q, minute, completed, dead, failed, run, bins, runs in minutes:
        slot = minute // k
        out += [(q, "completed", slot, None, completed, run), (q, "dead", slot, None, dead, 0.0),
                (q, "failed", slot, None, failed, 0.0)]
        out += [(q, "runs", slot, b, c, 0.0) for b, c in zip(bins, runs, strict=True)]
    return out


def p95(hist: dict[int, int], total: int) -> float | None:
    if total == 0:
        return None
    seen = 0
    for b in sorted(hist):
        seen += hist[b]
        if seen >= 0.95 * total:
            if b <= 0:
                return RT_MIN
            if b > RT_BINS:
                return RT_MAX
            return math.exp(RT_LN_MIN + (b - 0.5) * BIN_WIDTH)
    return RT_MAX


@dataclass
class WindowCache:
    """Closed buckets of the stats window, kept between calls (``stats(..., cache=c)``).

    A finished job's ``finished_at`` never moves, so a bucket that closed stays as it was: a
    refresh reads only the buckets since the last one. (A requeue or prune of a job finished
    inside the window is not subtracted from a cached bucket; the point ages out with it.)
    """

    bucket: float = 0.0
    points: int = 0
    #: Slots (epoch // bucket) below this are held here.
    until: int | None = None
    finished: dict[int, list[tuple[str, str, int | None, int, float]]] = field(default_factory=dict)
    failed: dict[int, list[tuple[str, int]]] = field(default_factory=dict)

    def reset(self, width: float, n: int) -> None:
        """Forget everything when the window's shape changed."""
        if (self.bucket, self.points) != (width, n):
            self.bucket, self.points, self.until = width, n, None
            self.finished.clear()
            self.failed.clear()

    def merge(self, finished: list[Finished], failed: list[tuple[str, int, int]], *,
              first: int, closed: int) -> None:
        """Keep this call's closed buckets; add to the lists what this call did not read.
        ``first``: the window's first slot; ``closed``: slots below it are settled."""
        until = self.until
        lo = until if until is not None else first
        for slot in [k for k in self.finished if k < first]:
            del self.finished[slot]
        for slot in [k for k in self.failed if k < first]:
            del self.failed[slot]
        for q, st, s, b, c, total in finished:
            if lo <= s < closed:
                self.finished.setdefault(s, []).append((q, st, b, c, total))
        for q, s, c in failed:
            if lo <= s < closed:
                self.failed.setdefault(s, []).append((q, c))
        for slot in range(max(lo, first), closed):
            self.finished.setdefault(slot, [])
            self.failed.setdefault(slot, [])
        if until is not None:  # what this call did not read comes from the cache
            finished += [(q, st, s, b, c, total)
                         for s, rows in self.finished.items() if first <= s < until
                         for q, st, b, c, total in rows]
            failed += [(q, s, c) for s, rows in self.failed.items()
                       if first <= s < until for q, c in rows]
        self.until = max(closed, until or closed)


Series = dict[str, dict[str, list[int]]]


def tally(finished: list[Finished], failed: list[tuple[str, int, int]], *, first: int, n: int,
          minutes: Sequence[Minute] = (), width: float = 60.0,
          ) -> tuple[Series, dict[str | None, tuple[int, float, dict[int, int]]]]:
    """Per queue: its series (completed, failed, dead per bucket) and, per queue and in total
    (key None), its run times (samples, summed seconds, bins)."""
    series: Series = {}
    # Per queue: its series, its run-time bins (a list: cheaper to add to than a dict), its
    # summed run time.
    acc: dict[str, tuple[dict[str, list[int]], list[int], list[float]]] = {}

    def of(queue: str) -> tuple[dict[str, list[int]], list[int], list[float]]:
        got = acc.get(queue)
        if got is None:
            per = series[queue] = {"completed": [0] * n, "failed": [0] * n, "dead": [0] * n}
            got = acc[queue] = (per, [0] * (RT_BINS + 2), [0.0])
        return got

    for queue, state, slot, b, count, total in finished:
        i = slot - first
        if not 0 <= i < n:
            continue
        per, h, run = of(queue)
        if state != "runs":  # a runs row's jobs have a series row too
            per[state][i] += count
        if b is not None:  # completed jobs' run times
            h[b] += count
        run[0] += total
    k = int(width // 60)
    for queue, minute, completed, dead, failures, seconds, bins, runs in minutes:
        i = minute // k - first
        if not 0 <= i < n:
            continue
        per, h, run = of(queue)
        per["completed"][i] += completed
        per["dead"][i] += dead
        per["failed"][i] += failures
        for b, c in zip(bins, runs, strict=True):
            h[b] += c
        run[0] += seconds
    for queue, slot, count in failed:
        i = slot - first
        if 0 <= i < n:
            of(queue)[0]["failed"][i] += count
    runtimes: dict[str | None, tuple[int, float, dict[int, int]]] = {}
    total_bins = [0] * (RT_BINS + 2)
    total_run = 0.0
    for queue, (_per, h, run) in acc.items():
        bins_of = {b: c for b, c in enumerate(h) if c}
        if bins_of:
            runtimes[queue] = (sum(h), run[0], bins_of)
        total_bins = [a + c for a, c in zip(total_bins, h, strict=True)]
        total_run += run[0]
    runtimes[None] = (sum(total_bins), total_run, {b: c for b, c in enumerate(total_bins) if c})
    return series, runtimes
