"""The worker side of durable steps: per worker, a session for step writes; per attempt, the
steps already stored and the names used so far.

A worker registers its :class:`Runtime` when it starts (``supervisor.SERVICES``), keyed by its
id, so ``ctx.step`` finds it from the context without the context carrying anything: a job that
never calls a step costs nothing. A sync handler (a thread of the worker's pool) runs its
database calls on the worker's loop and waits for them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import psycopg

from forklift._session import Session

if TYPE_CHECKING:
    from forklift._context import JobContext
    from forklift._worker.worker import Worker

T = TypeVar("T")

_RUNTIMES: dict[str, Runtime] = {}


class Runtime:
    """One worker's door to the database for its handlers' steps."""

    name = "steps"

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self.schema = worker.schema
        self.payload_limit = worker.app.payload_limit
        self.db: Session = worker.session("steps")
        # Every handler of the worker shares the one session: its operations take turns (two
        # transactions interleaved on one connection break it). Each is one short statement.
        self._turn = asyncio.Lock()
        _RUNTIMES[worker.id] = self

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        loop = self.worker._loop
        assert loop is not None
        return loop

    async def run(self) -> None:
        """The service: nothing to loop on; deregisters when the worker stops it."""
        try:
            await asyncio.Event().wait()
        finally:
            _RUNTIMES.pop(self.worker.id, None)

    async def call(self, op: Callable[[psycopg.AsyncConnection[Any]], Awaitable[T]]) -> T:
        async with self._turn:
            return await self.db.run(op)

    def call_sync(self, op: Callable[[psycopg.AsyncConnection[Any]], Awaitable[T]]) -> T:
        """From a handler's thread: run ``op`` on the worker's loop and wait for it."""
        return asyncio.run_coroutine_threadsafe(self.call(op), self.loop).result()


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


def attempt_steps(ctx: JobContext) -> AttemptSteps:
    state: AttemptSteps | None = getattr(ctx, "_durable_steps", None)
    if state is None:
        runtime = _RUNTIMES.get(ctx.worker_id)
        if runtime is None:
            from forklift._errors import ConfigError

            raise ConfigError("durable steps run only inside a forklift worker's handlers")
        state = AttemptSteps(runtime)
        ctx._durable_steps = state  # type: ignore[attr-defined]
    return state
