"""The stats rollup, a leader chore: each closed minute of the stats window written once, per
queue (forklift._features.stats.rollup), so a one-shot ``forklift stats`` reads minutes, not jobs."""

from __future__ import annotations

from forklift._features.stats.rollup import rollup
from forklift._worker.maintenance.chore import Chore

#: Seconds between passes: a minute is written 15-25 s after it closes (SETTLE_MARGIN + this).
EVERY = 10.0


class StatsRollup(Chore):
    name = "stats-rollup"

    def every(self) -> float:
        return EVERY

    async def once(self) -> None:
        await self.db.run(lambda c: rollup(c, self.config.schema))
