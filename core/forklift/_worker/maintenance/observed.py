"""A statement an observer of the worker wants run while it leads (a metrics sample, say),
run like every other chore: its own loop, schedule and session."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from forklift._worker.maintenance.chore import Chore

if TYPE_CHECKING:
    from forklift._jobs.lifecycle import LeaderTask
    from forklift._worker.config import WorkerConfig
    from forklift._worker.state import WorkerState


class ObservedTask(Chore):
    def __init__(self, config: WorkerConfig, state: WorkerState, *, leading: asyncio.Event,
                 task: LeaderTask) -> None:
        self.name = task.name  # before the session is named after it
        super().__init__(config, state, leading=leading)
        self.task = task

    def every(self) -> float:
        return self.task.every

    async def once(self) -> None:
        await self.db.run(self.task.once)
