"""The schema's version: what is applied, what is pending, and applying it.

    from forklift.ops.migrations import status, apply

    with connection(dsn, "migrate") as conn:
        s = status(conn, "forklift")          # MigrationStatus(current=3, required=4, ...)
        if s.pending:
            apply(conn, "forklift")

Applying is safe from several processes at once (an advisory lock serialises them; the loser
applies nothing), and each run is one transaction.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from typing import Any

import psycopg

from forklift._db import catalog
from forklift._db import migrate as _m
from forklift._db.sqltext import render
from forklift.ops.shape import Shape

__all__ = [
    "Drift", "Migration", "MigrationStatus", "apply", "drift", "label", "pending",
    "required_version", "status",
]

#: Objects a schema may hold besides schema.sql's: the optional partitioned history
#: (``forklift migrate --partitioned-history``) manages its own tables, indexes and triggers.
_OPTIONAL_PREFIXES = ("jobs_history",)

Migration = _m.Migration


@dataclass(frozen=True)
class MigrationStatus(Shape):
    schema: str
    #: The newest version applied (0: no forklift schema yet).
    current: int
    #: The version this forklift needs.
    required: int
    #: ``NNNN_name`` of each migration not applied yet, in order.
    pending: list[str] = field(default_factory=list)

    @property
    def up_to_date(self) -> bool:
        return not self.pending


def label(m: Migration) -> str:
    return f"{m.version:04d}_{m.name}"


def required_version() -> int:
    return _m.required_version()


def pending(conn: psycopg.Connection[Any], schema: str) -> list[Migration]:
    return _m.pending(conn, schema)


def status(conn: psycopg.Connection[Any], schema: str) -> MigrationStatus:
    return MigrationStatus(
        schema=schema,
        current=_m.current_version(conn, schema),
        required=_m.required_version(),
        pending=[label(m) for m in _m.pending(conn, schema)],
    )


def apply(conn: psycopg.Connection[Any], schema: str) -> list[Migration]:
    """Apply what is pending; the migrations applied (none when up to date)."""
    return _m.apply(conn, schema)


@dataclass(frozen=True)
class Drift(Shape):
    """A difference between the live schema and the one ``schema.sql`` builds."""

    #: tables, columns, constraints, indexes, functions, triggers or sequences
    part: str
    #: The object: a table, ``table.column``, an index, ``function(args)``, a trigger...
    name: str
    #: missing (schema.sql has it, the database does not), extra (the other way) or altered
    change: str
    #: The definition schema.sql gives, and the one the database holds (None where absent).
    expected: str | None = None
    found: str | None = None


def _key(part: str, row: tuple[Any, ...]) -> str:
    if part == "columns":
        return f"{row[0]}.{row[2]}"
    if part == "constraints":
        return f"{row[0]}.{row[1]}"
    if part == "functions":
        return f"{row[0]}({row[1]})"
    return str(row[0])


def _text(part: str, row: tuple[Any, ...]) -> str:
    if part == "columns":  # its position, type, not null, default, identity
        return " ".join(str(v) for v in row[3:])
    return " ".join(str(v) for v in row[1:])


def drift(conn: psycopg.Connection[Any], schema: str) -> list[Drift]:
    """What was changed by hand: the live schema against one built from ``schema.sql`` in a
    scratch schema, inside a transaction that is rolled back (nothing is left behind). Needs
    the right to CREATE a schema in the database (``forklift migrate`` has it). A schema with
    migrations pending is compared all the same: apply them first to read only hand-made
    changes."""
    scratch = f"forklift_drift_{secrets.token_hex(4)}"
    with conn.transaction(force_rollback=True):
        conn.execute(render("CREATE SCHEMA {s}", scratch))
        conn.execute(render(_m.VERSION_TABLE, scratch))
        conn.execute(render(_m.schema_text(), scratch).encode())
        expected = catalog.read(conn, scratch, rename={scratch: schema})
        found = catalog.read(conn, schema)
    out: list[Drift] = []
    for part in catalog.CATALOG:
        want = {_key(part, r): _text(part, r) for r in expected[part]}
        have = {_key(part, r): _text(part, r) for r in found[part]}
        for name in sorted(want.keys() | have.keys()):
            if name.startswith(_OPTIONAL_PREFIXES):
                continue
            if name not in have:
                out.append(Drift(part, name, "missing", expected=want[name]))
            elif name not in want:
                out.append(Drift(part, name, "extra", found=have[name]))
            elif want[name] != have[name]:
                out.append(Drift(part, name, "altered", expected=want[name], found=have[name]))
    return out
