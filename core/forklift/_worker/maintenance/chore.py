"""A leader chore: one loop, its own schedule, its own session, its own error handling."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from forklift._db.session import DB_ERRORS, Session
from forklift._worker.util import why

if TYPE_CHECKING:
    from forklift._worker.config import WorkerConfig
    from forklift._worker.state import WorkerState

log = logging.getLogger("forklift.worker")


class Chore:
    """Subclasses set ``name`` and implement :meth:`once` (and :meth:`every` if not fixed)."""

    name = "chore"
    #: What a pass may raise and the chore shrugs off (logged; tried again next pass). Anything
    #: else ends the loop and the supervisor restarts it (logged with its traceback, counted).
    tolerated: tuple[type[BaseException], ...] = DB_ERRORS

    def __init__(self, config: WorkerConfig, state: WorkerState, *, leading: asyncio.Event
                 ) -> None:
        self.config = config
        self.state = state
        #: set while this worker leads (the elector's): a chore runs only then
        self.leading = leading
        self.db: Session = state.session(self.name)
        self.failures = 0  # failed passes so far (logged; the loop goes on)

    def every(self) -> float:
        return min(self.config.leader_interval, self.config.lease / 3)

    async def once(self) -> None:
        raise NotImplementedError

    async def run(self) -> None:
        while True:
            await self.leading.wait()
            try:
                await self.once()
            except self.tolerated as exc:
                self.failures += 1
                if not self.state.closing:
                    log.warning("leader chore %s failed (%s)", self.name, why(exc))
            await asyncio.sleep(self.every())
