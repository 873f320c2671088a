"""A leader chore: one loop, its own schedule, its own session, its own error handling."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from forklift._db.session import DB_ERRORS, Session
from forklift._worker.util import why

if TYPE_CHECKING:
    from forklift._worker.worker import Worker

log = logging.getLogger("forklift.worker")


class Chore:
    """Subclasses set ``name`` and implement :meth:`once` (and :meth:`every` if not fixed)."""

    name = "chore"
    #: What a pass may raise and the chore shrugs off (logged; tried again next pass). Anything
    #: else ends the loop and the supervisor restarts it (logged with its traceback, counted).
    tolerated: tuple[type[BaseException], ...] = DB_ERRORS

    def __init__(self, worker: Worker) -> None:
        self.w = worker
        self.db: Session = worker.session(self.name)
        self.failures = 0  # failed passes so far (logged; the loop goes on)

    def every(self) -> float:
        return min(self.w.leader_interval, self.w.lease / 3)

    async def once(self) -> None:
        raise NotImplementedError

    async def run(self) -> None:
        w = self.w
        while True:
            assert w.elector is not None
            await w.elector.leading.wait()
            try:
                await self.once()
            except self.tolerated as exc:
                self.failures += 1
                if not w._closing:
                    log.warning("leader chore %s failed (%s)", self.name, why(exc))
            await asyncio.sleep(self.every())
