"""What one run of partition upkeep would do to one table."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from forklift.partitions.change import PartitionChange

__all__ = ["UpkeepPlan"]


@dataclass(frozen=True)
class UpkeepPlan:
    """The changes for ``table`` at ``now`` (empty when it is ready: a second run at one
    instant plans nothing); ``existing`` lists the partitions found, oldest first."""

    table: str
    now: datetime
    changes: tuple[PartitionChange, ...]
    existing: tuple[str, ...]

    @property
    def created(self) -> list[str]:
        return [c.partition for c in self.changes if c.action == "create"]

    @property
    def dropped(self) -> list[str]:
        return [c.partition for c in self.changes if c.action == "drop"]

    def to_json(self) -> dict[str, Any]:
        return {"table": self.table, "now": self.now.isoformat(),
                "changes": [c.to_json() for c in self.changes], "existing": list(self.existing)}
