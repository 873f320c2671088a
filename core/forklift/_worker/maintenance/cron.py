"""The cron chore: enqueue every due tick of the app's schedules and backfills once."""

from __future__ import annotations

import asyncio
import functools
from typing import TYPE_CHECKING

from forklift._features import cron
from forklift._worker.maintenance.chore import Chore

if TYPE_CHECKING:
    from forklift._app.app import Forklift
    from forklift._worker.config import WorkerConfig
    from forklift._worker.state import WorkerState


class CronChore(Chore):
    name = "cron"
    # A schedule's fault (its args no longer validate, a definition the database refuses) is
    # logged and retried next pass, like a database one: it must not restart-loop the chore.
    tolerated = (Exception,)

    def __init__(self, config: WorkerConfig, state: WorkerState, *, leading: asyncio.Event,
                 app: Forklift) -> None:
        super().__init__(config, state, leading=leading)
        self.app = app  # its schedules and backfills

    async def once(self) -> None:
        if not self.app.schedules and not self.app.backfills:
            return  # nothing to do: no session either
        await self.db.run(functools.partial(cron.tick, app=self.app, schema=self.config.schema))
