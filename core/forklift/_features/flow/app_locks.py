"""``app.lock(...)``: the same locks outside jobs (a script, a web request, a migration step).

Taken and released on the app's pools (``with`` on the sync pool, ``async with`` on the async
one), renewed by one daemon thread per app with a connection of its own, which it closes when
nothing is held. There is no job to cancel when a lease is lost: ``lock.lost`` (an event) is
set, an ``async with`` block's task is cancelled, and leaving the block raises LockLost. A sync
block is not interrupted (Python cannot stop a thread): check ``lock.lost`` between steps.
"""

from __future__ import annotations

import os
import secrets
import socket
import threading
import time
import weakref
from typing import TYPE_CHECKING, Any, Protocol

import psycopg

from forklift._base.errors import DatabaseUnavailable
from forklift._base.words import plural
from forklift._db.connections import connect
from forklift._db.session import shut_socket
from forklift._features.flow import locks
from forklift._features.flow.book import Book
from forklift._features.flow.steps import Query, drive, drive_async, fetch, fetch_async
from forklift._features.host import Host

if TYPE_CHECKING:
    from psycopg_pool import AsyncConnectionPool, ConnectionPool

RENEW_TIMEOUT = 5.0
IDLE_WAIT = 60.0  # how long the renewer sleeps while nothing is held
_ERRORS = (psycopg.Error, DatabaseUnavailable, OSError)



class LockHost(Host, Protocol):
    """What an app's locks need of it: its pools to take and release them on, and its
    database for the renewer's connection of its own."""

    @property
    def dsn(self) -> str: ...

    def pool(self) -> ConnectionPool[Any]: ...

    async def async_pool(self) -> AsyncConnectionPool[Any]: ...


_BY_APP: weakref.WeakKeyDictionary[LockHost, AppLocks] = weakref.WeakKeyDictionary()
_BY_APP_LOCK = threading.Lock()


def app_locks(app: LockHost) -> AppLocks:
    with _BY_APP_LOCK:
        found = _BY_APP.get(app)
        if found is None:
            found = _BY_APP[app] = AppLocks(app)
        return found


class AppLocks:
    def __init__(self, app: LockHost) -> None:
        self.app = app
        self.book = Book()
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(2)}"
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._start = threading.Lock()

    def lock(self, key: str, ttl: float, wait: float) -> locks.Lock:
        key, ttl, wait = locks.check_request(key, ttl, wait)
        return locks.Lock(self, key, ttl, wait)

    # -- the backend ----------------------------------------------------------------------------
    def _query(self, q: Query) -> Any:
        with self.app.pool().connection() as conn:
            return fetch(conn, q)

    async def _query_async(self, q: Query) -> Any:
        pool = await self.app.async_pool()
        async with pool.connection() as conn:
            return await fetch_async(conn, q)

    def _granted(self, lock: locks.Lock, token: int, sent: float) -> int:
        locks.granted(lock, self.book, token, sent)
        self._ensure_renewer()
        self._wake.set()
        return token

    def acquire_sync(self, lock: locks.Lock) -> int:
        token, sent = drive(self._query, locks.acquire_steps(self.app.schema, lock, self.owner))
        return self._granted(lock, token, sent)

    async def acquire(self, lock: locks.Lock) -> int:
        token, sent = await drive_async(
            self._query_async, locks.acquire_steps(self.app.schema, lock, self.owner))
        return self._granted(lock, token, sent)

    def release_sync(self, lock: locks.Lock) -> bool:
        return locks.release(self.book, self._query, self.app.schema, lock, _ERRORS)

    async def release(self, lock: locks.Lock) -> bool:
        return await locks.release_async(self.book, self._query_async, self.app.schema, lock,
                                         _ERRORS)

    def interrupt(self, lock: locks.Lock) -> None:
        task = lock.task
        if task is not None and not task.done():
            lock.cancelled_task = True
            task.get_loop().call_soon_threadsafe(task.cancel)

    # -- the renewer thread ---------------------------------------------------------------------
    def _ensure_renewer(self) -> None:
        with self._start:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._renewer, daemon=True,
                                                name="forklift-locks")
                self._thread.start()

    def _renewer(self) -> None:
        conn: psycopg.Connection[Any] | None = None
        next_try = 0.0
        while True:
            now = time.monotonic()
            for held in self.book.expired(now):
                held.lock.on_lost("no renewal reached the database within its ttl")
            batch = self.book.batch(now) if now >= next_try else []
            if batch:
                try:
                    if conn is None or conn.closed or conn.broken:
                        conn = connect(self.app.dsn, "locks")
                    self._renew(conn, batch)
                except _ERRORS as exc:
                    locks.log.warning("renewing %s failed (%s)", plural(len(batch), "lock"), exc)
                    if conn is not None:
                        conn.close()
                    conn = None
                    next_try = time.monotonic() + 0.25
                continue
            wait = self.book.wake_in(now)
            if wait is None and conn is not None:
                conn.close()  # nothing held: hold no connection either
                conn = None
            self._wake.wait(IDLE_WAIT if wait is None else max(wait, next_try - now))
            self._wake.clear()

    def _renew(self, conn: psycopg.Connection[Any], batch: list[tuple[str, int]]) -> None:
        sent = time.monotonic()
        limit = max(0.2, min(self.book.earliest_deadline() - sent, RENEW_TIMEOUT))
        # A renewal that hangs (a server that stopped answering) is cut off at the nearest
        # deadline, so the leases it would have saved are declared lost in time.
        timer = threading.Timer(limit, shut_socket, (conn,))
        timer.start()
        try:
            rows = fetch(conn, locks.renew_query(self.app.schema, batch))
        finally:
            timer.cancel()
        kept = {(str(k), int(t)) for k, t in rows}
        for held in self.book.renewed(sent, batch, kept):
            held.lock.on_lost("a renewal found it expired or held under another token")
