"""The app's two enqueue pools (sync and async): opened on first use, once, and closed.

psycopg_pool is imported only when a pool is first needed. The async pool is created under an
asyncio lock of the running loop, so thirty tasks making their first enqueue at once open one
pool, not thirty (an app used from a second event loop gets a lock of that loop).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from forklift._base.errors import DatabaseUnavailable

if TYPE_CHECKING:
    import psycopg
    from psycopg_pool import AsyncConnectionPool, ConnectionPool

#: Sets up a new pooled connection; its flag says whether it may LISTEN (not behind a pooler).
Setup = Callable[["psycopg.Connection[Any]", bool], None]
AsyncSetup = Callable[["psycopg.AsyncConnection[Any]", bool], Awaitable[None]]

__all__ = ["POOL_TIMEOUT", "Pools"]

POOL_TIMEOUT = 15.0


def _pool_args(dsn: str, size: int, configure: Any = None) -> dict[str, Any]:
    from forklift._db.connections import connect_kwargs

    args = connect_kwargs(dsn, "enqueue")  # prepare_threshold too, behind a pooler
    extra = {} if configure is None else {"configure": configure}
    return dict(conninfo=args.pop("conninfo"), kwargs=args, min_size=1, max_size=size,
                open=False, timeout=POOL_TIMEOUT, **extra)


def _listens(dsn: str) -> bool:
    from forklift._db import pooler

    return not pooler.pooled(dsn)


class Pools:
    """A sync and an async pool of at most ``size`` connections each, opened on first use;
    ``setup``/``async_setup`` prepare each new connection (once, as it opens)."""

    def __init__(self, size: int, setup: Setup | None = None,
                 async_setup: AsyncSetup | None = None) -> None:
        self.size = size
        self.setup = setup
        self.async_setup = async_setup
        self._pool: ConnectionPool[Any] | None = None
        self._apool: AsyncConnectionPool[Any] | None = None
        self._lock = threading.Lock()
        self._alock: tuple[asyncio.AbstractEventLoop, asyncio.Lock] | None = None

    def opened(self) -> bool:
        """Whether the sync pool is open (asking opens nothing)."""
        return self._pool is not None

    def aopened(self) -> bool:
        """Whether the async pool is open (asking opens nothing)."""
        return self._apool is not None

    def sync(self, dsn: str) -> ConnectionPool[Any]:
        with self._lock:
            if self._pool is None:
                from psycopg_pool import ConnectionPool

                from forklift._db.connections import connect, unavailable

                # One plain attempt first: an unreachable database is reported at once, where
                # the pool would keep retrying until its timeout (and a pooler is learned).
                connect(dsn, "enqueue").close()
                setup, listens = self.setup, _listens(dsn)
                configure = None if setup is None else (lambda c: setup(c, listens))
                pool: ConnectionPool[Any] = ConnectionPool(
                    **_pool_args(dsn, self.size, configure))
                try:
                    pool.open(wait=True, timeout=POOL_TIMEOUT)
                except DatabaseUnavailable:
                    pool.close()
                    raise
                except Exception as exc:
                    pool.close()
                    raise unavailable(dsn, exc) from None
                self._pool = pool
            return self._pool

    def _async_lock(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._alock is None or self._alock[0] is not loop:
                self._alock = (loop, asyncio.Lock())
            return self._alock[1]

    async def async_(self, dsn: str) -> AsyncConnectionPool[Any]:
        if self._apool is not None:
            return self._apool
        async with self._async_lock():
            if self._apool is None:
                self._apool = await self._open_async(dsn)
            return self._apool

    async def _open_async(self, dsn: str) -> AsyncConnectionPool[Any]:
        from psycopg_pool import AsyncConnectionPool

        from forklift._db.connections import aconnect, unavailable

        await (await aconnect(dsn, "enqueue")).close()  # see sync()
        setup, listens = self.async_setup, _listens(dsn)

        async def configure(c: psycopg.AsyncConnection[Any]) -> None:
            assert setup is not None
            await setup(c, listens)

        apool: AsyncConnectionPool[Any] = AsyncConnectionPool(
            **_pool_args(dsn, self.size, None if setup is None else configure))
        try:
            await apool.open(wait=True, timeout=POOL_TIMEOUT)
        except DatabaseUnavailable:
            await apool.close()
            raise
        except Exception as exc:
            await apool.close()
            raise unavailable(dsn, exc) from None
        return apool

    def close(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()

    async def aclose(self) -> None:
        async with self._async_lock():
            apool, self._apool = self._apool, None
            if apool is not None:
                await apool.close()
        self.close()
