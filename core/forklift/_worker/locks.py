"""The worker's lock service: ``ctx.lock(...)`` for its handlers, renewed in one statement.

One instance per worker, started by the supervisor like every other loop. Until a handler
takes a lock it does nothing and opens nothing (its session, ``forklift:<worker>:locks``, is
opened on first use). While locks are held it renews all of them together whenever the first
is due (a third of its ttl), and it stops the attempt of any whose lease is lost: refused by a
renewal, or not renewed in time by the local clock while a renewal hangs or fails. The
attempt's context is cancelled with reason ``lock_lost`` (an async handler's task too), and
the attempt fails with code ``lock_lost`` unless the handler catches :class:`~forklift.LockLost`.

Every database call runs on the worker's event loop; a sync handler's thread hands its call
to the loop and waits for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import TYPE_CHECKING, Any, Protocol

from forklift._base.errors import ConfigError
from forklift._base.words import plural
from forklift._db.session import DB_ERRORS, Session
from forklift._features.flow import locks
from forklift._features.flow.book import Book
from forklift._features.flow.steps import Query, drive_async, fetch_async

if TYPE_CHECKING:
    from forklift._app.context import JobContext
    from forklift._worker.config import WorkerConfig
    from forklift._worker.state import WorkerState

SESSION_TIMEOUT = 5.0
RETRY_AFTER_FAILURE = 0.25  # seconds before a failed renewal is tried again


class Interrupts(Protocol):
    """The worker's attempts, as a lost lock stops the attempt that held it."""

    def interrupt_fence(self, fence: int, reason: str) -> bool: ...


class WorkerLocks:
    name = "locks"

    def __init__(self, config: WorkerConfig, state: WorkerState, *, attempts: Interrupts
                 ) -> None:
        self.config = config
        self.state = state
        self.attempts = attempts
        self.book = Book()
        self._wake = asyncio.Event()
        self._db: Session | None = None
        self._next_try = 0.0

    def lock(self, ctx: JobContext, key: str, ttl: float, wait: float) -> locks.Lock:
        key, ttl, wait = locks.check_request(key, ttl, wait)
        return locks.Lock(self, key, ttl, wait, job_id=ctx.job_id, worker_id=self.state.id, ctx=ctx)

    def _session(self) -> Session:
        if self._db is None:
            self._db = self.state.session("locks", SESSION_TIMEOUT)
        return self._db

    async def _query(self, q: Query, timeout: float | None = None) -> Any:
        return await self._session().run(lambda c: fetch_async(c, q), timeout=timeout)

    # -- the backend, on the loop -----------------------------------------------------------
    async def acquire(self, lock: locks.Lock) -> int:
        ctx = lock.ctx
        steps = locks.acquire_steps(self.config.schema, lock, self.state.id,
                                    stop=lambda: ctx is not None and ctx.is_cancelled())
        token, sent = await drive_async(self._query, steps)
        locks.granted(lock, self.book, token, sent)
        self._wake.set()
        return token

    async def release(self, lock: locks.Lock) -> bool:
        return await locks.release_async(self.book, self._query, self.config.schema, lock, DB_ERRORS)

    def interrupt(self, lock: locks.Lock) -> None:
        ctx = lock.ctx
        if ctx is None:
            return
        if not self.attempts.interrupt_fence(ctx.fence, "lock_lost"):
            ctx._cancel("lock_lost")

    # -- for sync handlers, from their threads ------------------------------------------------
    def _on_loop(self, coro: Any) -> Any:
        loop = self.state.loop
        assert loop is not None
        with contextlib.suppress(RuntimeError):
            if asyncio.get_running_loop() is loop:
                coro.close()
                raise ConfigError("an async handler takes a lock with `async with ctx.lock(...)`")
        return asyncio.run_coroutine_threadsafe(coro, loop).result()

    def acquire_sync(self, lock: locks.Lock) -> int:
        return int(self._on_loop(self.acquire(lock)))

    def release_sync(self, lock: locks.Lock) -> bool:
        return bool(self._on_loop(self.release(lock)))

    # -- the service ----------------------------------------------------------------------------
    async def run(self) -> None:
        while True:
            now = time.monotonic()
            for held in self.book.expired(now):
                held.lock.on_lost("no renewal reached the database within its ttl")
            batch = self.book.batch(now) if now >= self._next_try else []
            if batch:
                await self._renew(batch)
                continue
            wait = self.book.wake_in(now)
            if wait is not None and self._next_try > now:
                wait = max(wait, self._next_try - now)
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait):
                    await self._wake.wait()

    async def _renew(self, batch: list[tuple[str, int]]) -> None:
        sent = time.monotonic()
        # Bounded by the nearest deadline: a renewal that hangs must not outlive the leases.
        limit = max(0.2, min(self.book.earliest_deadline() - sent, SESSION_TIMEOUT))
        try:
            rows = await self._query(locks.renew_query(self.config.schema, batch), timeout=limit)
        except DB_ERRORS as exc:
            if not self.state.closing:
                locks.log.warning("renewing %s failed (%s)", plural(len(batch), "lock"), exc)
            self._next_try = time.monotonic() + RETRY_AFTER_FAILURE
            return
        kept = {(str(k), int(t)) for k, t in rows}
        for held in self.book.renewed(sent, batch, kept):
            held.lock.on_lost("a renewal found it expired or held under another token")
