"""The cron chore: enqueue every due tick of the app's schedules and backfills once."""

from __future__ import annotations

import functools

from forklift._features import cron
from forklift._worker.maintenance.chore import Chore


class CronChore(Chore):
    name = "cron"
    # A schedule's fault (its args no longer validate, a definition the database refuses) is
    # logged and retried next pass, like a database one: it must not restart-loop the chore.
    tolerated = (Exception,)

    async def once(self) -> None:
        w = self.w
        if not w.app.schedules and not w.app.backfills:
            return  # nothing to do: no session either
        await self.db.run(functools.partial(cron.tick, app=w.app, schema=w.schema))
