"""A range-partitioned table of the app's and how it is kept."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from forklift.partitions.errors import PartitionedTableInvalid
from forklift.partitions.interval import INTERVALS, Interval

__all__ = ["MAX_AHEAD", "PartitionedTable"]

#: The most partitions created ahead of the current period (and kept behind it).
MAX_AHEAD: Final = 1000
# PostgreSQL names are at most 63 bytes; a partition's name is the table's plus "_p20260131".
_MAX_TABLE_NAME: Final = 63 - len("_p20260131")


def _count(table: str, field: str, value: Any, *, allow_none: bool) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_AHEAD:
        raise PartitionedTableInvalid(
            f"{field} of partitioned table {table!r} must be a whole number from 0 to"
            f" {MAX_AHEAD}{' or None' if allow_none else ''}, not {value!r}",
            table=table, field=field, reason="out_of_range")


@dataclass(frozen=True)
class PartitionedTable:
    """``table`` (``name`` or ``schema.name``), partitioned by range on one ``date``,
    ``timestamp`` or ``timestamptz`` column, one partition per ``interval``.

    ``ahead``: partitions kept ready past the current period's. ``retain``: whole periods kept
    before the current one; a partition that ends on or before that is dropped (None: never
    drop). Partitions are named ``<table>_p<YYYYMM>`` (``_p<YYYYMMDD>`` by day) and created in
    the table's schema.
    """

    table: str
    interval: Interval = "month"
    ahead: int = 3
    retain: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.table, str):
            raise PartitionedTableInvalid(
                f"a partitioned table is named by a string, not {self.table!r}",
                table=str(self.table), field="table", reason="bad_name")
        name = self.table.rpartition(".")[2]
        if not name or self.table.count(".") > 1 or self.table.startswith("."):
            raise PartitionedTableInvalid(
                f"a partitioned table is 'name' or 'schema.name', not {self.table!r}",
                table=str(self.table), field="table", reason="bad_name")
        if len(name.encode()) > _MAX_TABLE_NAME:
            raise PartitionedTableInvalid(
                f"table name {name!r} leaves no room for a partition's suffix (at most"
                f" {_MAX_TABLE_NAME} bytes)", table=self.table, field="table", reason="too_long")
        if self.interval not in INTERVALS:
            raise PartitionedTableInvalid(
                f"interval of partitioned table {self.table!r} must be one of"
                f" {', '.join(INTERVALS)}, not {self.interval!r}",
                table=self.table, field="interval", reason="unknown_interval")
        _count(self.table, "ahead", self.ahead, allow_none=False)
        _count(self.table, "retain", self.retain, allow_none=True)

    @property
    def schema(self) -> str | None:
        schema, _, _ = self.table.rpartition(".")
        return schema or None

    @property
    def name(self) -> str:
        return self.table.rpartition(".")[2]

    def to_json(self) -> dict[str, Any]:
        return {"table": self.table, "interval": self.interval, "ahead": self.ahead,
                "retain": self.retain}
