"""Plan a table's upkeep from the catalog: what to create ahead, what retention drops.

Only the catalog is read. A period is left alone when any partition already covers part of
it, whatever its name, so the upkeep never fights partitions made by hand; a partition is
dropped only when it ends on or before the retention's cutoff, and never on a run with
``from_`` (which prepares for a backfill of old rows).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import psycopg
from psycopg import sql

from forklift.partitions.change import PartitionChange
from forklift.partitions.errors import PartitionedTableInvalid
from forklift.partitions.interval import period_start, shift, suffix
from forklift.partitions.table import PartitionedTable
from forklift.partitions.upkeep_plan import UpkeepPlan

__all__ = ["plan"]

# The parent: its schema and name, its strategy, key column count, the key's type.
_PARENT_SQL = """
SELECT c.oid, n.nspname, c.relname, p.partstrat, p.partnatts, p.partattrs[0] AS attnum,
       format_type(a.atttypid, a.atttypmod)
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_partitioned_table p ON p.partrelid = c.oid
LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = p.partattrs[0]
WHERE c.oid = to_regclass(%s)
"""

# Each partition's bounds, read back as UTC instants. The bound text is rendered in this
# session and cast back in it, so the session's TimeZone cancels out; a date or timestamp key
# is read as UTC wall time, as the planner writes it. NULL: MINVALUE/MAXVALUE, or DEFAULT.
_PARTITIONS_SQL = """
SELECT n.nspname, c.relname,
       CASE WHEN b[1] LIKE '''%%' THEN CASE WHEN %(tz)s THEN btrim(b[1], '''')::timestamptz
            ELSE btrim(b[1], '''')::timestamp AT TIME ZONE 'UTC' END END,
       CASE WHEN b[2] LIKE '''%%' THEN CASE WHEN %(tz)s THEN btrim(b[2], '''')::timestamptz
            ELSE btrim(b[2], '''')::timestamp AT TIME ZONE 'UTC' END END,
       b IS NULL
FROM pg_inherits i
JOIN pg_class c ON c.oid = i.inhrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN LATERAL regexp_match(pg_get_expr(c.relpartbound, c.oid),
                               '^FOR VALUES FROM \\((.*)\\) TO \\((.*)\\)$') AS b ON true
WHERE i.inhparent = %(parent)s::oid
"""

_KEY_TYPES = {"date", "timestamp without time zone", "timestamp with time zone"}


@dataclass(frozen=True)
class _Existing:
    schema: str
    name: str
    start: datetime | None  # None: from MINVALUE (or the DEFAULT partition)
    end: datetime | None  # None: to MAXVALUE (or the DEFAULT partition)
    default: bool


def _parent(conn: psycopg.Connection[Any], spec: PartitionedTable) -> tuple[int, str, str, str]:
    row = conn.execute(_PARENT_SQL, (spec.table,)).fetchone()
    if row is None:
        raise PartitionedTableInvalid(f"table {spec.table!r} does not exist",
                                      table=spec.table, field="table", reason="missing")
    oid, schema, name, strategy, columns, attnum, key_type = row
    if strategy != "r" or columns != 1 or not attnum:
        raise PartitionedTableInvalid(
            f"table {spec.table!r} is not partitioned by range on one column",
            table=spec.table, field="table", reason="not_range_partitioned")
    if key_type not in _KEY_TYPES:
        raise PartitionedTableInvalid(
            f"table {spec.table!r} is partitioned on a {key_type} column; upkeep needs a"
            " date, timestamp or timestamptz key", table=spec.table, field="table",
            reason="key_type")
    return int(oid), str(schema), str(name), str(key_type)


def _literal(start: datetime, key_type: str) -> str:
    if key_type == "date":
        return start.strftime("%Y-%m-%d")
    if key_type == "timestamp without time zone":
        return start.strftime("%Y-%m-%d %H:%M:%S")
    return start.strftime("%Y-%m-%d %H:%M:%S+00")


def _overlaps(p: _Existing, start: datetime, end: datetime) -> bool:
    if p.default:
        return False
    return (p.start is None or p.start < end) and (p.end is None or p.end > start)


def plan(conn: psycopg.Connection[Any], spec: PartitionedTable, *, now: datetime,
         from_: datetime | None = None) -> UpkeepPlan:
    """The changes that make ``spec``'s table ready at ``now``: a partition for every period
    from the current one (or the one holding ``from_``, when earlier) to ``spec.ahead``
    periods past it, and with ``spec.retain`` set (and no ``from_``) the drop of each
    partition that ends on or before the start of the period ``retain`` before the current.
    """
    if now.tzinfo is None:
        raise PartitionedTableInvalid("now must be a timezone-aware datetime",
                                      table=spec.table, field="now", reason="naive")
    if from_ is not None and from_.tzinfo is None:
        raise PartitionedTableInvalid("from must be a timezone-aware datetime",
                                      table=spec.table, field="from", reason="naive")
    oid, schema, name, key_type = _parent(conn, spec)
    rows = conn.execute(_PARTITIONS_SQL, {
        "parent": oid, "tz": key_type == "timestamp with time zone"}).fetchall()
    existing = sorted(
        (_Existing(str(r[0]), str(r[1]), r[2], r[3], bool(r[4])) for r in rows),
        key=lambda p: (p.default, p.start or datetime.min.replace(tzinfo=UTC), p.name))
    current = period_start(now, spec.interval)
    first = current if from_ is None else min(current, period_start(from_, spec.interval))
    last = shift(current, spec.ahead, spec.interval)
    parent = sql.Identifier(schema, name)
    changes: list[PartitionChange] = []
    start = first
    while start <= last:
        end = shift(start, 1, spec.interval)
        if not any(_overlaps(p, start, end) for p in existing):
            partition = f"{name}_{suffix(start, spec.interval)}"
            statement = sql.SQL(
                "CREATE TABLE IF NOT EXISTS {} PARTITION OF {} FOR VALUES FROM ({}) TO ({})"
            ).format(sql.Identifier(schema, partition), parent,
                     sql.Literal(_literal(start, key_type)), sql.Literal(_literal(end, key_type)))
            changes.append(PartitionChange("create", f"{schema}.{name}", f"{schema}.{partition}",
                                           start, end, statement.as_string(conn)))
        start = end
    if spec.retain is not None and from_ is None:
        cutoff = shift(current, -spec.retain, spec.interval)
        for p in existing:
            if not p.default and p.end is not None and p.end <= cutoff:
                statement = sql.SQL("DROP TABLE IF EXISTS {}").format(
                    sql.Identifier(p.schema, p.name))
                changes.append(PartitionChange("drop", f"{schema}.{name}", f"{p.schema}.{p.name}",
                                               p.start, p.end, statement.as_string(conn)))
    return UpkeepPlan(f"{schema}.{name}", now, tuple(changes), tuple(p.name for p in existing))
