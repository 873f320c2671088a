"""The statements ``forklift.ops.stats`` sends, and how the window's values are written in.

Live counts come from the partial indexes on live states (and the dead-letter index of
migration 0002), so they grow with the backlog, not with history. The window reads only jobs
finished inside it, through the finished-time index, and (forklift.ops.stats_rollup) only the
minutes the leader has not rolled up yet.
"""

from __future__ import annotations

from typing import Any

from forklift._features.stats.sql import (
    AT,
    BIN,
    FAILED,
    FINISHED,
    LAST_AT,
    RECENT,
    RUN,
    SINCE,
    SLOT,
    START,
)

__all__ = [
    "AT", "BIN", "COUNTS_SQL", "FAILED", "FAILED_SQL", "FINISHED", "HELD_SQL", "LAST_AT",
    "RECENT", "RUN", "SINCE", "SLOT", "START", "TIME_SQL", "WINDOW_SQL", "inline",
]

# Each arm's WHERE is exactly one partial index's predicate, so each is an index(-only) scan
# over live (or dead-letter) rows and never touches the finished ones.
COUNTS_SQL = """
SELECT queue, 'available', count(*), min(run_at) FROM {s}.jobs WHERE state = 'available' GROUP BY queue
UNION ALL
SELECT queue, 'running', count(*), NULL FROM {s}.jobs WHERE state = 'running' GROUP BY queue
UNION ALL
SELECT queue, state, count(*), NULL FROM {s}.jobs
    WHERE state IN ('scheduled', 'retryable') GROUP BY queue, state
UNION ALL
SELECT queue, 'dead', count(*), NULL FROM {s}.jobs WHERE state = 'dead' GROUP BY queue
"""

WINDOW_SQL = FINISHED.replace("<SINCE>", SINCE).replace("<UNTIL>", "")

FAILED_SQL = FAILED.replace("<SINCE>", SINCE).replace("<UNTIL>", "now() + interval '1 minute'")

# The clock, the window's first bucket, and the rollup's minutes (forklift.ops.stats_rollup),
# all in the snapshot every other read of the call shares.
TIME_SQL = (f"SELECT now(), {START}, extract(epoch FROM now())::float8, r.lo, r.hi"
            " FROM (SELECT 1) one LEFT JOIN {s}.stats_rollup r ON true")
# Running jobs per holder, in the same snapshot as the counts (a worker's own in_use is as old
# as its last heartbeat, and counts buffered jobs differently).
HELD_SQL = "SELECT worker_id, count(*) FROM {s}.jobs WHERE state = 'running' GROUP BY worker_id"


def inline(text: str, p: dict[str, Any]) -> str:
    """``text`` with the window's parameters written in as typed literals.

    A statement with parameters is planned anew on every call (its custom plan looked cheaper
    than the generic one, estimated for any ``since``): 3 ms of server CPU each for the window
    and failed-attempts reads, a sixth of a stats call. Without parameters the prepared
    statement keeps its one plan (estimated with the real now(): index scans), and a
    connection that reads stats again (a console, ``--watch``, the bench) plans it once. The
    values are numbers and a timestamp computed here, never text from a caller.
    """
    since = "NULL" if p["since"] is None else f"'{p['since'].isoformat()}'"
    return (text.replace("%(b)s", f"'{float(p['b'])!r}'::float8")
            .replace("%(n)s", f"{int(p['n'])}::int4").replace("%(since)s", since))
