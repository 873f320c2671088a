"""Partition upkeep: a scheduled job that keeps an app's range-partitioned tables ready.

:func:`partitions` declares a kind (and its cron schedule) that, for each
:class:`PartitionedTable`, creates the partitions ``ahead`` of the current period, drops
those past ``retain``, and with ``from`` creates back to an old row before a backfill. Every
DDL statement runs under a lock timeout that fails fast and retries rather than queueing
behind a long transaction; the plan is read from the catalog, so a second run at one instant
changes nothing. :func:`plan` and :func:`apply` are the same steps for a script or the CLI.
"""

from forklift.partitions.applier import apply
from forklift.partitions.change import PartitionChange
from forklift.partitions.errors import PartitionedTableInvalid, PartitionLockTimeout
from forklift.partitions.interval import INTERVALS, Interval
from forklift.partitions.kind import DEFAULT_CRON, PartitionUpkeep, partitions
from forklift.partitions.planner import plan
from forklift.partitions.report import UpkeepReport
from forklift.partitions.request import UpkeepRequest
from forklift.partitions.table import PartitionedTable
from forklift.partitions.upkeep_plan import UpkeepPlan

__all__ = [
    "DEFAULT_CRON",
    "INTERVALS",
    "Interval",
    "PartitionChange",
    "PartitionLockTimeout",
    "PartitionUpkeep",
    "PartitionedTable",
    "PartitionedTableInvalid",
    "UpkeepPlan",
    "UpkeepReport",
    "UpkeepRequest",
    "apply",
    "partitions",
    "plan",
]
