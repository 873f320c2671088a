"""Retention: how long finished jobs are kept, and the short keyset batches that prune them.

The windows are rows of ``{schema}.retention`` (migration 0006): per terminal state one row for
every queue (queue ``''``: completed 1 day, cancelled 7 days, dead 30 days unless changed) and
optional rows for one queue. ``seconds`` NULL keeps those jobs forever. The leader's retention
chore and ``forklift prune --settings``-style callers share :func:`steps`, a generator of
statements that a sync or an async driver runs (:func:`prune_sync`, :func:`prune_async`).

Each statement deletes at most ``batch`` rows in its own transaction (autocommit), oldest
first, continuing after the last row it deleted (a keyset on ``(finished_at, id)``), so a pass
never rescans the dead index entries its earlier batches left behind and no transaction holds
locks for long. A queue with a window of its own is pruned by its own pass and skipped by its
state's default pass.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg

from forklift._db.sqltext import render

STATES = ("completed", "cancelled", "dead")
#: The windows of a fresh installation (seconds), as migration 0006 writes them.
DEFAULTS: dict[str, float] = {"completed": 86_400.0, "cancelled": 7 * 86_400.0,
                              "dead": 30 * 86_400.0}
ALL_QUEUES = ""

WINDOWS_SQL = "SELECT state, queue, seconds FROM {s}.retention ORDER BY state, queue"

# Targets of a batch whose TTL has not lapsed stay readable (forklift.batches). {queue} is
# either nothing or the one queue of an override pass; {skip} the queues with windows of their
# own, which a default pass leaves to theirs.
DELETE_SQL = """
WITH old AS (
    SELECT id FROM {s}.jobs j
    WHERE state = %(state)s AND finished_at < now() - make_interval(secs => %(secs)s)
      AND finished_at >= %(after_at)s AND (finished_at > %(after_at)s OR id > %(after_id)s)
      {queue}{skip}
      AND (batch_id IS NULL OR NOT EXISTS (
          SELECT 1 FROM {s}.batches b WHERE b.id = j.batch_id AND b.expires_at > now()))
    ORDER BY finished_at, id LIMIT %(n)s
    FOR UPDATE SKIP LOCKED
)
DELETE FROM {s}.jobs AS t USING old WHERE t.id = old.id AND t.state = %(state)s
RETURNING t.finished_at, t.id
"""
_QUEUE = "AND queue = %(queue)s"
_SKIP = " AND queue <> ALL(%(skip)s::text[])"

Windows = dict[tuple[str, str], float | None]
Step = tuple[str, dict[str, Any]]


@dataclass(frozen=True)
class Pass:
    state: str
    #: One queue, or ALL_QUEUES for the state's default pass.
    queue: str
    seconds: float
    #: Queues with a window of their own for this state (a default pass skips them).
    skip: tuple[str, ...] = ()


def windows_from_rows(rows: list[tuple[Any, ...]]) -> Windows:
    found: Windows = {(s, ALL_QUEUES): DEFAULTS[s] for s in STATES}
    for state, queue, seconds in rows:
        found[(str(state), str(queue))] = None if seconds is None else float(seconds)
    return found


def passes(windows: Windows, defaults: Mapping[str, float] | None = None) -> list[Pass]:
    """The prune passes for ``windows``; ``defaults`` (a worker's explicit ``retention=``)
    replaces the every-queue window of the states it names."""
    found: list[Pass] = []
    for state in STATES:
        own = {q: w for (s, q), w in windows.items() if s == state and q != ALL_QUEUES}
        for queue, secs in sorted(own.items()):
            if secs is not None:
                found.append(Pass(state, queue, secs))
        base = windows.get((state, ALL_QUEUES))
        if defaults is not None and state in defaults:
            base = defaults[state]
        if base is not None:
            found.append(Pass(state, ALL_QUEUES, base, tuple(sorted(own))))
    return found


def steps(
    schema: str, plan: list[Pass], batch: int = 1000, max_batches: int = 10,
    table: str = "jobs",
) -> Generator[Step, list[tuple[Any, ...]], int]:
    """Yield DELETE statements; send back the rows each returned. Returns the rows deleted.

    At most ``max_batches`` statements per pass, so one call's work is bounded. ``table``:
    ``jobs_history`` prunes partitioned history (forklift._features.history)."""
    deleted = 0
    for p in plan:
        after_at: datetime | str = "-infinity"
        after_id = 0
        text = render(DELETE_SQL.replace("{queue}", _QUEUE if p.queue else "")
                      .replace("{skip}", _SKIP if p.skip else "")
                      .replace("{s}.jobs ", "{s}." + table + " "), schema)
        for _ in range(max_batches):
            params: dict[str, Any] = {"state": p.state, "secs": p.seconds, "after_at": after_at,
                                      "after_id": after_id, "n": batch, "queue": p.queue,
                                      "skip": list(p.skip)}
            rows = yield text, params
            deleted += len(rows)
            if len(rows) < batch:
                break
            after_at, after_id = max((r[0], int(r[1])) for r in rows)
    return deleted


def drive_sync(conn: psycopg.Connection[Any], gen: Generator[Step, list[tuple[Any, ...]], int]
                ) -> int:
    try:
        text, params = next(gen)
        while True:
            text, params = gen.send(conn.execute(text, params).fetchall())
    except StopIteration as done:
        return int(done.value)


async def drive_async(
    conn: psycopg.AsyncConnection[Any], gen: Generator[Step, list[tuple[Any, ...]], int]
) -> int:
    try:
        text, params = next(gen)
        while True:
            cur = await conn.execute(text, params)
            text, params = gen.send(await cur.fetchall())
    except StopIteration as done:
        return int(done.value)


def load_sync(conn: psycopg.Connection[Any], schema: str) -> Windows:
    return windows_from_rows(conn.execute(render(WINDOWS_SQL, schema)).fetchall())


async def load_async(conn: psycopg.AsyncConnection[Any], schema: str) -> Windows:
    cur = await conn.execute(render(WINDOWS_SQL, schema))
    return windows_from_rows(await cur.fetchall())


def prune_sync(conn: psycopg.Connection[Any], schema: str, *,
               defaults: Mapping[str, float] | None = None, batch: int = 1000,
               max_batches: int = 10) -> int:
    """One bounded retention pass by the stored windows (autocommit connection)."""
    plan = passes(load_sync(conn, schema), defaults)
    return drive_sync(conn, steps(schema, plan, batch, max_batches))


async def prune_async(conn: psycopg.AsyncConnection[Any], schema: str, *,
                      defaults: Mapping[str, float] | None = None, batch: int = 1000,
                      max_batches: int = 10) -> int:
    """:func:`prune_sync` for the leader's async session."""
    plan = passes(await load_async(conn, schema), defaults)
    return await drive_async(conn, steps(schema, plan, batch, max_batches))
