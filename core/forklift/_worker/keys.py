"""The worker's service that records its kinds' keys in ``flow_keys`` (at start, then whenever
its app declares more): see :mod:`forklift._features.flow.declare`."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from forklift._db.session import DB_ERRORS
from forklift._features.flow import declare
from forklift._worker.util import wait_any

if TYPE_CHECKING:
    from forklift._app.app import Forklift
    from forklift._worker.config import WorkerConfig
    from forklift._worker.state import WorkerState

log = logging.getLogger("forklift.flow")

RECHECK = 30.0  # seconds between looks at the app's declarations


class KeyDeclarations:
    """The worker's service that records its kinds' keys (at start, then when they change)."""

    name = "flow-keys"

    def __init__(self, config: WorkerConfig, state: WorkerState, *, app: Forklift,
                 wake: asyncio.Event) -> None:
        self.config = config
        self.state = state
        self.app = app
        self.wake = wake  # the producer's: jobs that waited for these rows may go now
        self._db: Any = None
        self._recorded: Any = None
        #: set once the kinds' keys are recorded (or there are none): see :meth:`first`
        self.recorded = asyncio.Event()

    async def first(self, timeout: float) -> None:
        """Until the keys are recorded once, the worker stops claiming, or ``timeout`` passes.
        Keyed jobs wait for their keys' rows, so a claim sent before them finds nothing for
        those kinds; the worker waits for this before its first claim."""
        await wait_any(self.recorded, self.state.stop_claiming, timeout=timeout)

    async def run(self) -> None:
        while True:
            found = declare.declarations(self.app)
            if found and found != self._recorded:
                if self._db is None:
                    self._db = self.state.session("flow")
                try:
                    changed = await self._db.run(lambda c: declare.record(c, self.config.schema, self.app))
                except DB_ERRORS as exc:
                    if not self.state.closing:
                        log.warning("recording the kinds' keys failed (%s); retrying", exc)
                    await asyncio.sleep(1.0)
                    continue
                self._recorded = found
                if changed:
                    self.wake.set()  # jobs that waited for these rows may go now
            self.recorded.set()
            await asyncio.sleep(RECHECK)
