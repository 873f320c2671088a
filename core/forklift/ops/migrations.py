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

from dataclasses import dataclass, field
from typing import Any

import psycopg

from forklift._db import migrate as _m
from forklift.ops.shape import Shape

__all__ = [
    "Migration", "MigrationStatus", "apply", "label", "pending", "required_version", "status",
]

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
