"""Fault injection for jobs run in the test's process (``forklift.testing.drain``).

``faults.fail(kind, times=n)`` makes the next ``n`` attempts of a kind raise before its handler
runs; ``faults.lose_lease(kind, times=n)`` makes the next ``n`` attempts lose their lease while
they run, the way a worker does when the database stops hearing from it: the lease expires and
the rescuer takes the job back (attempt counted, error ``lease_expired``), the worker's heartbeat
finds the lease gone and cancels the handler (``ctx.cancel_reason == "lease_lost"``), and the
worker's late outcome is refused by the fence. Nothing about the worker is mocked; only the
handler is wrapped, and it is restored when the ``Faults`` is closed.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from forklift._app.app import Forklift, JobKind
from forklift._app.context import JobContext
from forklift._db.sqltext import render

_EXPIRE_SQL = ("UPDATE {s}.jobs SET lease_expires_at = now() - interval '1 millisecond'"
               " WHERE id = %s AND fence = %s AND state = 'running'")
LEASE_LOST_WAIT = 30.0  # the longest a faulted attempt waits for its worker to notice


class InjectedFault(Exception):
    """The default exception :meth:`Faults.fail` raises."""


class Faults:
    def __init__(self, app: Forklift) -> None:
        self.app = app
        self._plans: dict[str, deque[Callable[[JobContext], Any]]] = {}
        self._originals: dict[str, Callable[..., Any]] = {}
        self._lock = threading.Lock()
        #: (kind, job id, attempt, what) of every fault injected, in order.
        self.injected: list[tuple[str, int, int, str]] = []

    def fail(self, kind: str, times: int = 1, exc: BaseException | None = None) -> None:
        """The next ``times`` attempts of ``kind`` raise ``exc`` (default :class:`InjectedFault`)."""
        def raise_it(ctx: JobContext) -> None:
            raise exc if exc is not None else InjectedFault(f"injected fault in {kind}")

        self._plan(kind, times, raise_it, "raise")

    def lose_lease(self, kind: str, times: int = 1) -> None:
        """The next ``times`` attempts of ``kind`` lose their lease while they run."""
        self._plan(kind, times, self._lose, "lose_lease")

    def close(self) -> None:
        """Put every wrapped handler back."""
        with self._lock:
            for name, fn in self._originals.items():
                self.app.kind(name).fn = fn
            self._originals.clear()
            self._plans.clear()

    # -- the wrapper ----------------------------------------------------------------------------
    def _plan(self, name: str, times: int, action: Callable[[JobContext], Any], what: str) -> None:
        kind = self.app.kind(name)

        def noted(ctx: JobContext) -> Any:
            self.injected.append((name, ctx.job_id, ctx.attempt, what))
            return action(ctx)

        with self._lock:
            self._plans.setdefault(name, deque()).extend([noted] * times)
            if name not in self._originals:
                self._originals[name] = kind.fn
                kind.fn = self._wrap(kind)

    def _next(self, name: str) -> Callable[[JobContext], Any] | None:
        with self._lock:
            plan = self._plans.get(name)
            return plan.popleft() if plan else None

    def _wrap(self, kind: JobKind[Any, Any]) -> Callable[..., Any]:
        original, name = kind.fn, kind.name
        if kind.is_async:
            async def faulty_async(ctx: JobContext, payload: Any) -> Any:
                action = self._next(name)
                if action is not None and await asyncio.to_thread(action, ctx):
                    return None  # the lease is gone: the outcome is never written
                return await original(ctx, payload)

            return faulty_async

        def faulty(ctx: JobContext, payload: Any) -> Any:
            action = self._next(name)
            if action is not None and action(ctx):
                return None  # the lease is gone: the outcome is never written
            return original(ctx, payload)

        return faulty

    def _lose(self, ctx: JobContext) -> bool:
        """Expire this attempt's lease and rescue it at once (before a heartbeat renews it),
        then wait, as the handler, until the worker notices and cancels the attempt."""
        import psycopg

        from forklift._worker.maintenance.rescuer import (
            LEASE_EXPIRIES,
            RESCUE_BATCH,
            RESCUE_SQL,
        )

        with psycopg.connect(self.app.dsn, autocommit=True) as conn, conn.transaction():
            conn.execute(render(_EXPIRE_SQL, self.app.schema), (ctx.job_id, ctx.fence))
            conn.execute(render(RESCUE_SQL, self.app.schema),
                         {"batch": RESCUE_BATCH, "expiries": LEASE_EXPIRIES})
        ctx.cancelled.wait(LEASE_LOST_WAIT)
        return True
