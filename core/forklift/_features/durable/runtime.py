"""The worker side of durable steps: per worker, a session for step writes; per attempt, the
steps already stored and the names used so far.

A worker registers its :class:`Runtime` when it starts (forklift._worker.supervisor), keyed by
its id, so ``ctx.step`` finds it from the context without the context carrying anything: a job that
never calls a step costs nothing. A sync handler (a thread of the worker's pool) runs its
database calls on the worker's loop and waits for them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Protocol, TypeVar

import psycopg

from forklift._db.session import Session
from forklift._db.sqltext import render


class InWorker(Protocol):
    """A job's context, as far as steps go: the worker running it."""

    @property
    def worker_id(self) -> str: ...

T = TypeVar("T")

_RUNTIMES: dict[str, Runtime] = {}

LOAD_SQL = """
SELECT job_id, name, state, result, event_id, wake_at FROM {s}.job_steps WHERE job_id = ANY(%s)
"""


async def _load_many(conn: psycopg.AsyncConnection[Any], *, schema: str, ids: list[int]
                     ) -> dict[int, dict[str, Stored]]:
    cur = await conn.execute(render(LOAD_SQL, schema), (ids,))
    found: dict[int, dict[str, Stored]] = {i: {} for i in ids}
    for job_id, name, state, result, event_id, wake_at in await cur.fetchall():
        found[job_id][name] = Stored(state, result, event_id, wake_at)
    return found


class Runtime:
    """One worker's door to the database for its handlers' steps."""

    name = "steps"

    def __init__(self, *, worker_id: str, schema: str, payload_limit: int,
                 loop: asyncio.AbstractEventLoop, db: Session) -> None:
        self.worker_id = worker_id
        self.schema = schema
        self.payload_limit = payload_limit
        self._loop = loop  # the worker's: a sync handler's calls run there
        self.db = db
        # Every handler of the worker shares the one session: its operations take turns (two
        # transactions interleaved on one connection break it). Each is one short statement.
        self._turn = asyncio.Lock()
        # Attempts that want their job's stored steps, read together: many jobs woken at once
        # (one transaction's events) cost one statement per batch, not one each.
        self._wanted: dict[int, list[asyncio.Future[dict[str, Stored]]]] = {}
        self._reader: asyncio.Future[None] | None = None
        #: operations run on the steps session (each one statement, or one pipelined
        #: transaction around one), and those of them that read stored steps (a batch each)
        self.statements = 0
        self.load_statements = 0
        _RUNTIMES[worker_id] = self

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self._loop

    async def run(self) -> None:
        """The service: nothing to loop on; deregisters when the worker stops it."""
        try:
            await asyncio.Event().wait()
        finally:
            _RUNTIMES.pop(self.worker_id, None)

    async def call(self, op: Callable[[psycopg.AsyncConnection[Any]], Awaitable[T]]) -> T:
        async with self._turn:
            self.statements += 1
            return await self.db.run(op)

    def call_sync(self, op: Callable[[psycopg.AsyncConnection[Any]], Awaitable[T]]) -> T:
        """From a handler's thread: run ``op`` on the worker's loop and wait for it."""
        return asyncio.run_coroutine_threadsafe(self.call(op), self.loop).result()

    async def load(self, job_id: int) -> dict[str, Stored]:
        """The job's stored steps, read in one statement with every other attempt's that asks
        while a read is under way."""
        wanted: asyncio.Future[dict[str, Stored]] = self.loop.create_future()
        self._wanted.setdefault(job_id, []).append(wanted)
        if self._reader is None or self._reader.done():
            self._reader = asyncio.ensure_future(self._read())
        return await wanted

    def load_sync(self, job_id: int) -> dict[str, Stored]:
        return asyncio.run_coroutine_threadsafe(self.load(job_id), self.loop).result()

    async def _read(self) -> None:
        while self._wanted:
            batch, self._wanted = self._wanted, {}
            try:
                self.load_statements += 1
                found = await self.call(partial(_load_many, schema=self.schema, ids=list(batch)))
            except BaseException as exc:
                for waiting in (f for fs in batch.values() for f in fs if not f.done()):
                    if isinstance(exc, asyncio.CancelledError):
                        waiting.cancel()
                    else:
                        waiting.set_exception(exc)
                if isinstance(exc, asyncio.CancelledError):
                    raise
                continue
            for job_id, futures in batch.items():
                for waiting in futures:
                    if not waiting.done():  # each attempt gets a dict of its own to update
                        waiting.set_result(dict(found[job_id]))


@dataclass
class Stored:
    state: str
    result: Any
    event_id: int | None = None
    wake_at: Any = None


@dataclass
class AttemptSteps:
    """What one attempt knows of its job's steps."""

    runtime: Runtime
    used: set[str] = field(default_factory=set)
    #: waits per event name so far in this run (a wait's default name counts them)
    waits: dict[str, int] = field(default_factory=dict)
    #: name -> the step as stored, loaded on first use
    stored: dict[str, Stored] | None = None


def attempt_steps(ctx: InWorker) -> AttemptSteps:
    state: AttemptSteps | None = getattr(ctx, "_durable_steps", None)
    if state is None:
        runtime = _RUNTIMES.get(ctx.worker_id)
        if runtime is None:
            from forklift._base.errors import ConfigError

            raise ConfigError("durable steps run only inside a forklift worker's handlers")
        state = AttemptSteps(runtime)
        ctx._durable_steps = state  # type: ignore[attr-defined]
    return state
