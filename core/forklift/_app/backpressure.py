"""Backpressure at enqueue: what an enqueue to a full queue does, as its kind declared.

Whether a queue is full is :class:`~forklift._jobs.fullness.FullQueues`' (the set this process
keeps, from the leader's measurements); :class:`Gate` applies the enqueue's ``on_full``:
``"raise"`` refuses with :class:`~forklift.QueueFull`, ``Wait(timeout)`` waits for room (async
enqueues without blocking their loop) and then stores, ``Shed(...)`` drops the job unstored and
says so. A queue not in the set costs an enqueue one dict lookup: no statement, no round trip.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from forklift._base.backpressure import OnFull, Shed, Wait
from forklift._base.errors import InvalidOption, QueueFull
from forklift._jobs import fullness
from forklift._jobs.fullness import RECHECK, Fullness, FullQueues

if TYPE_CHECKING:
    import psycopg
    from psycopg_pool import AsyncConnectionPool, ConnectionPool

__all__ = ["POLL", "Gate", "queue_full"]

#: Seconds between two reads of a full queue's row while an enqueue waits for room.
POLL = 0.25


def queue_full(f: Fullness, *, waited: float | None = None) -> QueueFull:
    """The refusal for a full queue: which ceiling, the figure, the ceiling, when to retry."""
    if f.by == "depth":
        what = f"depth {f.figure:.0f} is past its ceiling of {f.limit:.0f} jobs"
    else:
        what = (f"its oldest job has waited {f.figure:.1f}s, past its ceiling of"
                f" {f.limit:g}s")
    after = f" after waiting {waited:g}s" if waited is not None else ""
    return QueueFull(f"queue {f.queue!r} is full{after}: {what}; try again in about"
                     f" {RECHECK:g}s (forklift queues show {f.queue})", queue=f.queue,
                     ceiling=f.by, figure=f.figure, limit=f.limit, retry_after=RECHECK)


def no_wait_in_transaction() -> InvalidOption:
    return InvalidOption("on_full=Wait(...) cannot wait inside the caller's transaction (conn=):"
                         " it would hold the transaction open while workers drain the queue;"
                         " use \"raise\" (and retry the transaction) or Shed(...)",
                         field="on_full")


class Gate:
    """The app's backpressure check before it stores jobs."""

    def __init__(self, full: FullQueues, pool: Callable[[], ConnectionPool[Any]],
                 async_pool: Callable[[], Awaitable[AsyncConnectionPool[Any]]],
                 opened: Callable[[], bool], aopened: Callable[[], bool]) -> None:
        self.full = full
        self._pool = pool
        self._async_pool = async_pool
        #: whether the app's pools are open: an app whose every enqueue names the caller's
        #: connection never opens one (it may have no database of its own to reach)
        self._opened = opened
        self._aopened = aopened
        #: monotonic time a pooled enqueue last ran: its reply brought any news (LISTEN)
        self.pool_used = 0.0

    # -- how fresh the set is ------------------------------------------------------------------
    def _stale(self, conn: object) -> bool:
        """Whether the set must be brought up to date before it is trusted: never read;
        without LISTEN, read longer than RECHECK ago; on the caller's connection (which hears
        nothing), when the app's own connections ran nothing for RECHECK."""
        f = self.full
        if f.set_due():
            return True
        return (conn is not None and time.monotonic() - self.pool_used >= RECHECK
                and not f.hears(conn))

    def _refresh(self, conn: psycopg.Connection[Any] | None) -> None:
        """Bring the set up to date through the app's pool: opening the pool reads it; with
        LISTEN an idle pooled connection hands over what it heard, sending nothing; without,
        one read. An enqueue on the caller's connection while the pool is not open reads on
        that connection instead (never opening a pool the app may not be able to reach)."""
        from psycopg_pool import PoolTimeout  # loaded with the pool, never at import

        f = self.full
        if conn is not None and not self._opened():
            f.read_on(conn)
            self.pool_used = time.monotonic()
            return
        pool = self._pool()  # its first connection reads the set as it opens
        try:
            with pool.connection(timeout=RECHECK) as own:
                if f.set_due():
                    f.read_set(own)
                else:
                    f.drain(own)
        except PoolTimeout:
            return  # every pooled connection busy: keep the set as it is, try next time
        self.pool_used = time.monotonic()

    async def _refresh_async(self, conn: psycopg.AsyncConnection[Any] | None) -> None:
        """:meth:`_refresh` for asyncio."""
        from psycopg_pool import PoolTimeout

        f = self.full
        if conn is not None and not self._aopened():
            await f.read_on_async(conn)
            self.pool_used = time.monotonic()
            return
        pool = await self._async_pool()
        try:
            async with pool.connection(timeout=RECHECK) as own:
                if f.set_due():
                    await f.read_set_async(own)
                else:
                    f.drain(own)
        except PoolTimeout:
            return
        self.pool_used = time.monotonic()

    def _current(self, queue: str, conn: psycopg.Connection[Any] | None) -> Fullness | None:
        f = self.full
        if self._stale(conn):
            self._refresh(conn)
        got = f.get(queue)
        if got is not None and f.due(queue):
            self._read_one(queue, conn)
            got = f.get(queue)
        return got

    def _read_one(self, queue: str, conn: psycopg.Connection[Any] | None = None) -> None:
        if conn is not None and not self._opened():
            self.full.read_on(conn)  # the set of full queues: small, and read in a savepoint
            return
        with self._pool().connection() as own:
            self.full.read_one(own, queue)

    async def _current_async(self, queue: str, conn: psycopg.AsyncConnection[Any] | None
                             ) -> Fullness | None:
        f = self.full
        if self._stale(conn):
            await self._refresh_async(conn)
        got = f.get(queue)
        if got is not None and f.due(queue):
            await self._read_one_async(queue, conn)
            got = f.get(queue)
        return got

    async def _read_one_async(self, queue: str,
                              conn: psycopg.AsyncConnection[Any] | None = None) -> None:
        if conn is not None and not self._aopened():
            await self.full.read_on_async(conn)
            return
        pool = await self._async_pool()
        async with pool.connection() as own:
            await self.full.read_one_async(own, queue)

    # -- the decision ------------------------------------------------------------------------------
    def admit(self, queue: str, priority: int, on_full: OnFull,
              conn: psycopg.Connection[Any] | None = None, n: int = 1) -> str | None:
        """Before storing ``n`` jobs of ``priority`` in ``queue``: None to store them, or the
        shed rule that drops them; raises QueueFull (a Wait, after waiting for room)."""
        if isinstance(on_full, Wait) and conn is not None:
            raise no_wait_in_transaction()
        if self.full.read_at is not None and self.full.none_full() and not self._stale(conn):
            return None  # no queue is full: the common case, nothing read
        got = self._current(queue, conn)
        if got is None:
            return None
        if isinstance(on_full, Wait):
            deadline = time.monotonic() + on_full.seconds
            while got is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    fullness.count(queue, "timeout", n)
                    raise queue_full(got, waited=on_full.seconds)
                time.sleep(min(POLL, left))
                self._read_one(queue)
                got = self.full.get(queue)
            return None
        return self._refuse(got, priority, on_full, n)

    async def admit_async(self, queue: str, priority: int, on_full: OnFull,
                          conn: psycopg.AsyncConnection[Any] | None = None, n: int = 1
                          ) -> str | None:
        """:meth:`admit` for asyncio: a Wait sleeps on the loop, never blocking it."""
        if isinstance(on_full, Wait) and conn is not None:
            raise no_wait_in_transaction()
        if self.full.read_at is not None and self.full.none_full() and not self._stale(conn):
            return None
        got = await self._current_async(queue, conn)
        if got is None:
            return None
        if isinstance(on_full, Wait):
            deadline = time.monotonic() + on_full.seconds
            while got is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    fullness.count(queue, "timeout", n)
                    raise queue_full(got, waited=on_full.seconds)
                await asyncio.sleep(min(POLL, left))
                await self._read_one_async(queue)
                got = self.full.get(queue)
            return None
        return self._refuse(got, priority, on_full, n)

    @staticmethod
    def _refuse(got: Fullness, priority: int, on_full: OnFull, n: int) -> str:
        if isinstance(on_full, Shed) and on_full.sheds(priority):
            fullness.count(got.queue, "shed", n)
            return on_full.rule()
        fullness.count(got.queue, "refused", n)
        raise queue_full(got)
