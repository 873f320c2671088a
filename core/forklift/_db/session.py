"""A worker's purpose-named connection whose every operation is bounded in time.

The server's ``statement_timeout`` cannot help when the server itself stops answering (a hung
backend, a dead host behind a silent network): the client would wait forever. Each operation
here carries a client-side deadline. When it passes, the connection's socket is shut down under
libpq's feet: the pending read sees end-of-file at once, the operation fails like a dropped
connection, and the next call opens a fresh session. Cancelling the coroutine instead would make
psycopg send a cancel request and wait for the (unresponsive) backend to honour it.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import psycopg

from forklift._base.errors import DatabaseUnavailable
from forklift._db.connections import aconnect

T = TypeVar("T")

#: What a lost, refused or unresponsive session raises; loops catch these and retry.
DB_ERRORS: tuple[type[BaseException], ...] = (
    psycopg.Error, DatabaseUnavailable, OSError, TimeoutError,
)

#: The failures worth retrying as they are: the connection, the server's state (timeouts,
#: deadlocks, serialization, shutdown) -- not a statement the server refuses for its content.
TRANSIENT: tuple[type[BaseException], ...] = (
    psycopg.OperationalError, psycopg.InterfaceError, DatabaseUnavailable, OSError, TimeoutError,
)


def shut_socket(conn: psycopg.AsyncConnection[Any] | psycopg.Connection[Any]) -> None:
    """Shut down ``conn``'s socket without closing its descriptor. Never raises.

    A coroutine waiting on the socket wakes with end-of-file. The descriptor stays open (libpq
    still owns it), so it cannot be reused by another socket while an event loop still watches
    it.
    """
    with contextlib.suppress(Exception):
        fd = conn.pgconn.socket
        sock = socket.socket(fileno=fd)
        try:
            sock.shutdown(socket.SHUT_RDWR)
        finally:
            sock.detach()


#: Seconds an operation may take to end once its deadline shut its socket.
GRACE = 1.0


class SessionClosed(DatabaseUnavailable):
    """The worker is shutting down: this session takes no more operations."""

    code = "session_closed"


class Session:
    """One purpose-named connection, reopened after any failure; operations bounded in time."""

    def __init__(self, dsn: str, purpose: str, worker_id: str, *, timeout: float,
                 inline: bool = False) -> None:
        self.dsn, self.purpose, self.worker_id = dsn, purpose, worker_id
        self.timeout = timeout
        #: Operations run in the caller's task (:meth:`_inline`): for sessions whose callers
        #: are never cancelled in the middle of one (the worker's claims, outcome writes and
        #: heartbeats: it aborts or closes the session first).
        self.inline = inline
        self._conn: psycopg.AsyncConnection[Any] | None = None
        self._ops: set[asyncio.Future[Any]] = set()
        self._closed = False

    async def _get(self) -> psycopg.AsyncConnection[Any]:
        if self._closed:
            raise SessionClosed(f"the {self.purpose} session is closed")
        if self._conn is None or self._conn.closed:
            self._conn = await aconnect(self.dsn, self.purpose, self.worker_id)
        return self._conn

    async def reset(self) -> None:
        """Close the connection; the next operation opens a new one."""
        conn, self._conn = self._conn, None
        if conn is not None:
            shut_socket(conn)
            # close() does no I/O; no wait_for around it (it can swallow a cancellation).
            with contextlib.suppress(Exception):
                await conn.close()

    def abort(self) -> None:
        """Make an operation in flight on this session fail now (shutdown, deadlines)."""
        if self._conn is not None:
            shut_socket(self._conn)

    async def close(self, timeout: float = 1.0) -> None:
        """Take no more operations; fail the ones in flight and wait (bounded) for them to end.

        Tasks that used the session are then past their operations, so cancelling them does not
        land in the middle of a query (where psycopg would try to cancel it on a server that may
        be gone).
        """
        self._closed = True
        self.abort()
        if self._ops:
            await asyncio.wait(set(self._ops), timeout=timeout)
        await self.reset()

    async def run(
        self,
        op: Callable[[psycopg.AsyncConnection[Any]], Awaitable[T]],
        *,
        timeout: float | None = None,
    ) -> T:
        """Run ``op`` on the session; any failure (or the deadline) resets the connection.

        Raises one of :data:`DB_ERRORS`; ``TimeoutError`` when the deadline passed,
        :class:`SessionClosed` once :meth:`close` was called.
        """
        limit = max(0.0, self.timeout if timeout is None else timeout)
        try:
            async with asyncio.timeout(limit):
                conn = await self._get()
            if self.inline:
                return await self._inline(conn, op, limit)
            return await self._in_task(conn, op, limit)
        except asyncio.CancelledError:
            # Cancelled from outside: never leave a half-read connection behind.
            self.abort()
            self._conn = None
            raise
        except DB_ERRORS:
            await self.reset()
            raise

    async def _in_task(self, conn: psycopg.AsyncConnection[Any],
                       op: Callable[[psycopg.AsyncConnection[Any]], Awaitable[T]],
                       limit: float) -> T:
        """``op`` in a task of its own, abandoned (never awaited further) if the deadline
        passes: a caller cancelled meanwhile is not held up by psycopg cancelling the query."""
        task = asyncio.ensure_future(op(conn))
        self._ops.add(task)
        task.add_done_callback(self._ops.discard)
        try:
            done, _ = await asyncio.wait({task}, timeout=limit)
            if not done:
                # The server is not answering: break the socket so the op fails promptly.
                shut_socket(conn)
                await asyncio.wait({task}, timeout=GRACE)
                raise TimeoutError(f"{self.purpose} did not answer within {limit:.1f}s")
            return task.result()
        finally:
            if not task.done():
                task.cancel()
            task.add_done_callback(_consume)

    async def _inline(self, conn: psycopg.AsyncConnection[Any],
                      op: Callable[[psycopg.AsyncConnection[Any]], Awaitable[T]],
                      limit: float) -> T:
        """``op`` in the caller's own task. A task per operation, and the wait for it, cost
        three more turns of the event loop per statement, and a worker busy running jobs takes
        a millisecond or more a turn (measured: a keyed hand-off of 30 jobs, 3 ms on the
        server, took 8 ms to come back). The deadline is a timer that shuts the socket (the
        operation then fails at once, like a dropped connection); one that has not ended
        ``GRACE`` seconds later is cancelled. A caller cancelled in the middle of an operation
        would make psycopg cancel the query and wait for the server: sessions whose callers
        can be (a handler's steps) run their operations in a task (:meth:`_in_task`)."""
        expired = False

        def expire() -> None:
            nonlocal expired
            expired = True
            shut_socket(conn)

        loop = asyncio.get_running_loop()
        timer = loop.call_later(limit, expire)
        done: asyncio.Future[None] = loop.create_future()
        self._ops.add(done)  # what close() waits for
        try:
            async with asyncio.timeout(limit + GRACE):
                return await op(conn)
        except Exception as exc:
            if expired:
                raise TimeoutError(f"{self.purpose} did not answer within {limit:.1f}s") from exc
            raise
        finally:
            timer.cancel()
            self._ops.discard(done)
            done.set_result(None)


def _consume(task: asyncio.Future[Any]) -> None:
    """Retrieve an abandoned operation's outcome so asyncio does not log it as lost."""
    if not task.cancelled():
        task.exception()
