"""What one run of partition upkeep did to one table."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["UpkeepReport"]


@dataclass(frozen=True)
class UpkeepReport:
    """Partitions ``created`` and ``dropped`` (schema-qualified), and how many statements
    ran into the lock timeout and were tried again (``lock_timeouts``)."""

    table: str
    created: tuple[str, ...]
    dropped: tuple[str, ...]
    lock_timeouts: int

    def to_json(self) -> dict[str, Any]:
        return {"table": self.table, "created": list(self.created),
                "dropped": list(self.dropped), "lock_timeouts": self.lock_timeouts}
