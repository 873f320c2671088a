"""The leader's maintenance: the elector and one service per chore, each on its own loop.

The elector renews leadership on a session of its own, so no chore can hold it up; every chore
(:func:`chores` lists them) runs on its own schedule and session, with its own error handling,
only while this worker leads. A chore that keeps failing (a schedule that
raises, a retention delete that times out on a lock) delays nothing but itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from forklift._worker.maintenance.chore import Chore
from forklift._worker.maintenance.cron import CronChore
from forklift._worker.maintenance.elector import Elector
from forklift._worker.maintenance.flow_recount import FlowRecount
from forklift._worker.maintenance.history import HistoryUpkeep
from forklift._worker.maintenance.outbox import OutboxRelay
from forklift._worker.maintenance.planner_stats import PlannerStats
from forklift._worker.maintenance.rescuer import Rescuer
from forklift._worker.maintenance.retention import Retention
from forklift._worker.maintenance.stager import Stager
from forklift._worker.maintenance.stats_rollup import StatsRollup
from forklift._worker.maintenance.workers import WorkerPruner
from forklift._worker.maintenance.workflows import WorkflowRetention

if TYPE_CHECKING:
    from forklift._worker.worker import Worker

__all__ = ["Chore", "Elector", "chores"]


def chores(worker: Worker) -> list[Chore]:
    """Every chore the leader runs (a new chore is a new entry here)."""
    return [Stager(worker), Rescuer(worker), CronChore(worker), Retention(worker),
            WorkerPruner(worker), HistoryUpkeep(worker), OutboxRelay(worker),
            WorkflowRetention(worker), StatsRollup(worker), PlannerStats(worker),
            FlowRecount(worker)]
