"""Which queues are full, as this process knows it: the enqueue side of backpressure.

A queue with a ceiling (``forklift queues ceiling``) is measured by the leader every second
(forklift._worker.maintenance.ceilings), which stores on its row which ceiling it is past
(``full_by``) and NOTIFYs :func:`full_channel` when that changes. An app process keeps the set
of full queues in a :class:`FullQueues`:

- each of the app's pooled connections LISTENs on the channel when it opens and reads the set
  once then (a connection opens rarely); a notification reaches the process with the reply of
  whatever statement a pooled connection runs next, an enqueue's own insert included, so
  keeping the set current costs no statement and no round trip;
- an enqueue looks its queue up in the set (one dict lookup): a queue not in it costs nothing
  more; a full one is read again at most once a :data:`RECHECK` (a full queue's enqueues are
  refused without a statement, so no reply would bring the news that it has room again);
- an enqueue on the caller's connection (which hears nothing) takes, when the app's own
  connections ran nothing for a :data:`RECHECK`, what an idle pooled connection's socket
  already holds (:meth:`FullQueues.drain`: no statement, no round trip); an app that never
  opened its pool (every enqueue on a caller's connection) reads the set on that connection
  instead, in a savepoint, at most once a :data:`RECHECK`;
- behind a transaction pooler (no LISTEN) the set is read at most once a :data:`RECHECK` by
  whichever enqueue finds it older than that.

The set may lag the table by a measuring interval and a notification's delivery: the ceiling is
soft by what producers enqueue in that time (the how-to gives the measured figure).
"""

from __future__ import annotations

import json
import threading
import time
import weakref
from collections import Counter
from dataclasses import dataclass
from typing import Any, Final

import psycopg

from forklift._db.sqltext import render

__all__ = ["RECHECK", "FullQueues", "Fullness", "count", "counts", "full_channel"]

#: Seconds between two reads of a full queue's row (and of the whole set, behind a pooler).
RECHECK: Final = 1.0

_COLUMNS = ("name, full_by, measured_depth::float8, ceiling_depth::float8, measured_age,"
            " ceiling_age, extract(epoch FROM measured_at)::float8")
FULL_SQL: Final = "SELECT " + _COLUMNS + " FROM {s}.queues WHERE full_by IS NOT NULL"
ONE_SQL: Final = "SELECT " + _COLUMNS + " FROM {s}.queues WHERE name = %s"


_MISSING = (psycopg.errors.UndefinedColumn, psycopg.errors.UndefinedTable)


def full_channel(schema: str) -> str:
    """The NOTIFY channel that tells apps a queue became full or has room again; the payload
    is JSON: ``{"q", "by", "figure", "limit", "t"}`` (``by`` null: room)."""
    return f"{schema}_full"


@dataclass(frozen=True)
class Fullness:
    """A full queue, as last measured."""

    queue: str
    #: Which ceiling it is past: ``depth`` or ``age``.
    by: str
    #: The depth (jobs, capped at the ceiling + 1) or the oldest wait (seconds) measured.
    figure: float
    #: The ceiling itself.
    limit: float
    #: When the leader measured it (epoch seconds): newer news wins, whatever its order.
    at: float


def _fullness(row: tuple[Any, ...]) -> Fullness | None:
    name, by, depth, depth_limit, age, age_limit, at = row
    if by is None:
        return None
    figure, limit = (depth, depth_limit) if by == "depth" else (age, age_limit)
    return Fullness(str(name), str(by), float(figure or 0.0), float(limit or 0.0),
                    float(at or 0.0))


_counts: Counter[tuple[str, str]] = Counter()
_counts_lock = threading.Lock()


def count(queue: str, reason: str, n: int = 1) -> None:
    """Count ``n`` enqueues refused (``refused``, ``timeout``) or dropped (``shed``)."""
    with _counts_lock:
        _counts[(queue, reason)] += n


def counts() -> dict[tuple[str, str], int]:
    """Enqueues refused or shed in this process, by (queue, reason): what the metrics export."""
    with _counts_lock:
        return dict(_counts)


class FullQueues:
    """The full queues of one schema, as this process last heard (thread-safe; shared by the
    app's sync and async pools)."""

    def __init__(self, schema: str) -> None:
        self.schema = schema
        self._full: dict[str, Fullness] = {}
        #: queue -> measured_at of the newest news about it (full or not)
        self._news: dict[str, float] = {}
        #: queue -> monotonic time of its last read (a full queue is read again after RECHECK)
        self._read: dict[str, float] = {}
        self._lock = threading.Lock()
        #: monotonic time the whole set was last read; None: never (no connection opened yet)
        self.read_at: float | None = None
        #: whether pooled connections LISTEN (False behind a transaction pooler)
        self.listening = False
        #: the connections :meth:`configure` set up: they hear the news themselves
        self._ours: weakref.WeakSet[Any] = weakref.WeakSet()

    # -- the hot path ------------------------------------------------------------------------
    def get(self, queue: str) -> Fullness | None:
        """The queue's fullness if it is full, else None: one dict lookup."""
        return self._full.get(queue)

    def hears(self, conn: object) -> bool:
        """Whether ``conn`` is one of the app's pooled connections that LISTEN (a caller may
        pass one as ``conn=``): the news then comes with its own replies."""
        return self.listening and conn in self._ours

    def none_full(self) -> bool:
        return not self._full

    def due(self, queue: str) -> bool:
        """Whether a full queue's row is worth reading again (its news is RECHECK old)."""
        return time.monotonic() - self._read.get(queue, 0.0) >= RECHECK

    def set_due(self) -> bool:
        """Whether the whole set must be read before trusting it: never read, or (without
        LISTEN) read longer than RECHECK ago."""
        at = self.read_at
        return at is None or (not self.listening and time.monotonic() - at >= RECHECK)

    # -- news ----------------------------------------------------------------------------------
    def _learn(self, queue: str, full: Fullness | None, at: float) -> None:
        with self._lock:
            if at < self._news.get(queue, float("-inf")):
                return  # older than what we know (another connection delivered it late)
            self._news[queue] = at
            self._read[queue] = time.monotonic()
            if full is None:
                self._full.pop(queue, None)
            else:
                self._full[queue] = full

    def learn_set(self, rows: list[tuple[Any, ...]]) -> None:
        """The whole set, as :data:`FULL_SQL` read it."""
        fulls = {f.queue: f for f in map(_fullness, rows) if f is not None}
        with self._lock:
            for queue in [q for q in self._full if q not in fulls]:
                self._full.pop(queue)
        for f in fulls.values():
            self._learn(f.queue, f, f.at)
        self.read_at = time.monotonic()

    def learn_one(self, queue: str, row: tuple[Any, ...] | None) -> None:
        """One queue's row, as :data:`ONE_SQL` read it (None: no row, so no ceiling)."""
        if row is None:
            self._learn(queue, None, time.time())
            return
        self._learn(queue, _fullness(row), float(row[6] or time.time()))

    def on_notify(self, note: psycopg.Notify) -> None:
        """A notification on :func:`full_channel`, delivered with any pooled statement's reply."""
        self._heard(note.channel, note.payload)

    def drain(self, conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]) -> None:
        """Take the notifications an idle pooled connection has received, sending nothing:
        the server pushes them to a LISTENing session at once, and reading what its socket
        holds never blocks (libpq keeps it non-blocking)."""
        pg = conn.pgconn
        try:
            pg.consume_input()
        except psycopg.Error:
            return  # a broken connection: the pool replaces it; the next recheck reads
        while (note := pg.notifies()) is not None:
            self._heard(note.relname.decode(), note.extra.decode())

    def _heard(self, channel: str, payload: str) -> None:
        if channel != full_channel(self.schema):
            return
        try:
            got = json.loads(payload)
            queue, by, at = str(got["q"]), got.get("by"), float(got["t"])
            full = None if by is None else Fullness(queue, str(by), float(got["figure"]),
                                                   float(got["limit"]), at)
        except (ValueError, KeyError, TypeError):
            return  # not ours to read; the next recheck reads the row
        self._learn(queue, full, at)

    # -- reading -------------------------------------------------------------------------------
    def sql(self, one: bool) -> str:
        return render(ONE_SQL if one else FULL_SQL, self.schema)

    def read_set(self, conn: psycopg.Connection[Any]) -> None:
        self.learn_set(list(conn.execute(self.sql(False)).fetchall()))

    async def read_set_async(self, conn: psycopg.AsyncConnection[Any]) -> None:
        cur = await conn.execute(self.sql(False))
        self.learn_set(list(await cur.fetchall()))

    def read_on(self, conn: psycopg.Connection[Any]) -> None:
        """Read the set on a caller's connection (``conn=``, perhaps mid-transaction), in a
        savepoint: a schema older than ceilings leaves the caller's transaction as it was."""
        try:
            with conn.transaction():
                self.read_set(conn)
        except _MISSING:
            self.learn_set([])

    async def read_on_async(self, conn: psycopg.AsyncConnection[Any]) -> None:
        """:meth:`read_on` for asyncio."""
        try:
            async with conn.transaction():
                await self.read_set_async(conn)
        except _MISSING:
            self.learn_set([])

    def read_one(self, conn: psycopg.Connection[Any], queue: str) -> None:
        self.learn_one(queue, conn.execute(self.sql(True), (queue,)).fetchone())

    async def read_one_async(self, conn: psycopg.AsyncConnection[Any], queue: str) -> None:
        cur = await conn.execute(self.sql(True), (queue,))
        self.learn_one(queue, await cur.fetchone())

    # -- the pools' connection set-up ----------------------------------------------------------
    def _listen_sql(self) -> str:
        return f'LISTEN "{full_channel(self.schema)}"'

    def configure(self, conn: psycopg.Connection[Any], *, listen: bool) -> None:
        """Set up a new pooled connection: LISTEN (unless pooled) and read the set."""
        if listen:
            conn.add_notify_handler(self.on_notify)
            conn.execute(self._listen_sql())
            self._ours.add(conn)
            self.listening = True
        try:
            self.read_set(conn)
        except _MISSING:
            self.learn_set([])  # a schema older than ceilings: no queue can be full

    async def configure_async(self, conn: psycopg.AsyncConnection[Any], *, listen: bool) -> None:
        """:meth:`configure` for an async pooled connection."""
        if listen:
            conn.add_notify_handler(self.on_notify)
            await conn.execute(self._listen_sql())
            self._ours.add(conn)
            self.listening = True
        try:
            await self.read_set_async(conn)
        except _MISSING:
            self.learn_set([])
