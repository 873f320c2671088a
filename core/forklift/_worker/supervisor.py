"""Starts the worker's services and restarts one whose loop dies.

A service is anything with a ``name`` and an ``async def run()`` that loops until the worker
stops it (by cancelling its task after the sessions are closed). A loop that raises something
unexpected is logged with its traceback, counted under its name (the counts reach the worker's
row with the next heartbeat, so ``forklift workers list`` shows them) and started again after a
short backoff that grows while it keeps dying. A loop that returns is done and not restarted.

New capabilities (an outbox relay, partition upkeep, a metrics sampler) are new services:
``Worker.add_service`` before ``run``, or a factory in :data:`SERVICES`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from forklift._app.app import Forklift
    from forklift._worker.config import WorkerConfig
    from forklift._worker.state import WorkerState

log = logging.getLogger("forklift.worker")

RESTART_FIRST = 0.1  # seconds before the first restart of a service
RESTART_MAX = 5.0  # ...doubling while it keeps dying, up to this


class Service(Protocol):
    name: str

    async def run(self) -> None: ...


def _steps(config: WorkerConfig, state: WorkerState, app: Forklift) -> Service:
    from forklift._features.durable.runtime import Runtime

    assert state.loop is not None  # built as the worker starts, on its loop
    return Runtime(worker_id=state.id, schema=config.schema, payload_limit=app.payload_limit,
                   loop=state.loop, db=state.session("steps"))


#: Factories of extra services every worker runs, beside its own: each is given the worker's
#: configuration, its state and its app.
SERVICES: list[Callable[[WorkerConfig, WorkerState, Forklift], Service]] = [_steps]


class Supervisor:
    def __init__(self) -> None:
        self.restarts: dict[str, int] = {}
        self.tasks: dict[str, asyncio.Task[None]] = {}

    def start(self, service: Service) -> asyncio.Task[None]:
        if service.name in self.tasks:
            raise ValueError(f"a service named {service.name!r} is already running")
        task = asyncio.create_task(self._guard(service), name=service.name)
        self.tasks[service.name] = task
        return task

    async def _guard(self, service: Service) -> None:
        backoff = RESTART_FIRST
        while True:
            try:
                await service.run()
                return
            except asyncio.CancelledError:
                raise
            except Exception:
                self.restarts[service.name] = self.restarts.get(service.name, 0) + 1
                log.exception("service %s died (restart %d in %.1fs)", service.name,
                              self.restarts[service.name], backoff)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, RESTART_MAX)
