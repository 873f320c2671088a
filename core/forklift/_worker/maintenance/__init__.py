"""The leader's maintenance: the elector and one service per chore, each on its own loop.

The elector renews leadership on a session of its own, so no chore can hold it up; every chore
(:func:`chores` lists them) runs on its own schedule and session, with its own error handling,
only while this worker leads. A chore that keeps failing (a schedule that
raises, a retention delete that times out on a lock) delays nothing but itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from forklift._worker.maintenance.ager import Ager
from forklift._worker.maintenance.ceilings import CeilingWatch
from forklift._worker.maintenance.chore import Chore
from forklift._worker.maintenance.cron import CronChore
from forklift._worker.maintenance.elector import Elector
from forklift._worker.maintenance.expirer import Expirer
from forklift._worker.maintenance.flow_recount import FlowRecount
from forklift._worker.maintenance.history import HistoryUpkeep
from forklift._worker.maintenance.observed import ObservedTask
from forklift._worker.maintenance.outbox import OutboxRelay
from forklift._worker.maintenance.planner_stats import PlannerStats
from forklift._worker.maintenance.rescuer import Rescuer
from forklift._worker.maintenance.retention import Retention
from forklift._worker.maintenance.stager import Stager
from forklift._worker.maintenance.stats_rollup import StatsRollup
from forklift._worker.maintenance.workers import WorkerPruner
from forklift._worker.maintenance.workflows import WorkflowRetention

if TYPE_CHECKING:
    import asyncio

    from forklift._app.app import Forklift
    from forklift._jobs.lifecycle import Lifecycle
    from forklift._worker.config import WorkerConfig
    from forklift._worker.state import WorkerState

__all__ = ["Chore", "Elector", "ObservedTask", "chores"]


def chores(config: WorkerConfig, state: WorkerState, *, leading: asyncio.Event, app: Forklift,
           lifecycle: Lifecycle) -> list[Chore]:
    """Every chore the leader runs (a new chore is a new entry here), then those its observers
    asked for (``lifecycle.leader_tasks``)."""
    c, s, on = config, state, leading
    return [Stager(c, s, leading=on), Rescuer(c, s, leading=on, lifecycle=lifecycle),
            CronChore(c, s, leading=on, app=app), Retention(c, s, leading=on),
            WorkerPruner(c, s, leading=on), HistoryUpkeep(c, s, leading=on),
            OutboxRelay(c, s, leading=on, app=app), WorkflowRetention(c, s, leading=on),
            StatsRollup(c, s, leading=on), PlannerStats(c, s, leading=on),
            FlowRecount(c, s, leading=on), Expirer(c, s, leading=on, lifecycle=lifecycle),
            Ager(c, s, leading=on, lifecycle=lifecycle), CeilingWatch(c, s, leading=on),
            *(ObservedTask(c, s, leading=on, task=t) for t in lifecycle.leader_tasks)]
