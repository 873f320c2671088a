"""LISTEN for wake-ups and operator signals, on a session whose health is checked.

LISTEN is a hint: a lost listener is re-established and followed by a claim pass, and the poll
backstop keeps work moving meanwhile. A connection that dies silently (no RST) is caught by a
health query with a deadline on the same session.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg import sql

from forklift._db.connections import aconnect
from forklift._db.session import shut_socket
from forklift._db.sqltext import channel, control_channel

log = logging.getLogger("forklift.listener")


class Listener:
    name = "listener"

    def __init__(
        self,
        dsn: str | None,
        schema: str,
        worker_id: str,
        *,
        on_wake: Callable[[str], None],
        on_control: Callable[[dict[str, Any]], None],
        on_reconnect: Callable[[], None],
        health_every: float = 5.0,
        health_timeout: float = 3.0,
    ) -> None:
        self.dsn = dsn
        self.schema = schema
        self.worker_id = worker_id
        self.on_wake = on_wake
        self.on_control = on_control
        self.on_reconnect = on_reconnect
        self.health_every = health_every
        self.health_timeout = health_timeout
        self.connected = asyncio.Event()
        self.reconnects = 0
        self._stopping = False
        self._conn: psycopg.AsyncConnection[Any] | None = None

    def stopping(self) -> bool:
        """A method, not an attribute: it changes while the loop awaits (type checkers narrow
        attributes)."""
        return self._stopping

    def stop(self) -> None:
        """Break the listening session's socket and do not reconnect (shutdown)."""
        self._stopping = True
        if self._conn is not None:
            shut_socket(self._conn)

    async def _open(self) -> psycopg.AsyncConnection[Any]:
        assert self.dsn is not None
        conn = await aconnect(self.dsn, "listen", self.worker_id)
        for name in (channel(self.schema), control_channel(self.schema)):
            await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(name)))
        return conn

    def _dispatch(self, note: psycopg.Notify) -> None:
        if note.channel == channel(self.schema):
            self.on_wake(note.payload)
            return
        try:
            message = json.loads(note.payload)
        except ValueError:
            return
        if isinstance(message, dict):
            self.on_control(message)

    async def _healthy(self, conn: psycopg.AsyncConnection[Any]) -> None:
        """A round trip on the listening session itself, with a client-side deadline."""
        check = asyncio.ensure_future(conn.execute("SELECT 1"))
        check.add_done_callback(lambda t: t.cancelled() or t.exception())
        done, _ = await asyncio.wait({check}, timeout=self.health_timeout)
        if done:
            check.result()
            return
        # Silent loss: nothing came back. Break the socket so the query fails at once rather
        # than waiting for a cancel request the server will never answer.
        shut_socket(conn)
        await asyncio.wait({check}, timeout=1.0)
        if not check.done():
            check.cancel()
        raise TimeoutError(f"the listening session did not answer within {self.health_timeout}s")

    async def run(self) -> None:
        if self.dsn is None:  # behind a transaction pooler, with no direct connection given
            log.warning("not listening: the database is behind a pooler in transaction mode,"
                        " which does not keep LISTEN; new jobs are found by the poll. Give a"
                        " direct connection for LISTEN: listen_dsn= or FORKLIFT_LISTEN_DSN")
            return
        backoff = 0.05
        first = True
        while not self.stopping():
            try:
                async with asyncio.timeout(self.health_every + 10.0):
                    self._conn = await self._open()
                self.connected.set()
                backoff = 0.05
                if not first:
                    self.reconnects += 1
                    log.info("listener re-established; running a claim pass")
                first = False
                # A job committed between the worker's first claim and this LISTEN woke nobody:
                # claim once now that no NOTIFY can be missed.
                self.on_reconnect()
                while True:
                    async for note in self._conn.notifies(timeout=self.health_every):
                        self._dispatch(note)
                    await self._healthy(self._conn)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if self.stopping():
                    break
                log.warning("listener lost (%s: %s); reconnecting", type(exc).__name__, exc)
            finally:
                self.connected.clear()
                if self._conn is not None:
                    shut_socket(self._conn)
                    with contextlib.suppress(Exception):
                        await self._conn.close()  # no I/O: nothing to bound
                    self._conn = None
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 2.0)
