"""One DDL statement of partition upkeep."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

__all__ = ["PartitionChange"]


@dataclass(frozen=True)
class PartitionChange:
    """Create or drop ``partition`` (schema-qualified) of ``table``, holding
    ``[start, end)``; ``sql`` is the statement run, as shown by ``forklift partitions plan``."""

    action: Literal["create", "drop"]
    table: str
    partition: str
    start: datetime | None
    end: datetime | None
    sql: str

    def to_json(self) -> dict[str, Any]:
        return {"action": self.action, "table": self.table, "partition": self.partition,
                "start": self.start.isoformat() if self.start else None,
                "end": self.end.isoformat() if self.end else None, "sql": self.sql}
