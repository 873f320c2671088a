"""Named numeric settings stored in the database (``{schema}.settings``), changed with an audit row.

A module that owns settings declares them with their defaults and bounds (:class:`Setting`);
a name without a row has its default, so a fresh installation needs no rows at all.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import psycopg

from forklift._base.errors import ForkliftError
from forklift._db.sqltext import render
from forklift.ops import audit
from forklift.ops.context import OpsContext

__all__ = ["InvalidSetting", "Setting", "read", "store"]

READ_SQL = "SELECT name, value FROM {s}.settings WHERE name LIKE %s"
SET_SQL = """
INSERT INTO {s}.settings AS t (name, value, updated_by) VALUES (%s, %s, %s)
ON CONFLICT (name) DO UPDATE SET value = excluded.value, updated_by = excluded.updated_by,
    updated_at = now()
"""
RESET_SQL = "DELETE FROM {s}.settings WHERE name = %s"


class InvalidSetting(ForkliftError):
    """A setting or retention window that cannot be used (unknown name, state or queue, a
    negative or absurd value); nothing was changed. The message names the value."""

    code = "invalid_setting"
    usage_error: ClassVar[bool] = True


@dataclass(frozen=True)
class Setting:
    name: str
    default: float
    low: float
    high: float
    #: What the number means, with its unit; shown by the CLI and the docs.
    help: str

    def check(self, value: float) -> float:
        if not math.isfinite(value) or not self.low <= value <= self.high:
            raise InvalidSetting(
                f"{self.name} = {value!r} is out of range: it takes {self.low:g} to"
                f" {self.high:g} ({self.help})",
                setting=self.name, value=value, low=self.low, high=self.high,
            )
        return value


def read(conn: psycopg.Connection[Any], ctx: OpsContext, prefix: str) -> dict[str, float]:
    """Stored values whose name starts with ``prefix`` (defaults are the caller's)."""
    rows = conn.execute(render(READ_SQL, ctx.schema), (prefix.replace("_", r"\_") + "%",))
    return {str(name): float(value) for name, value in rows.fetchall()}


def store(
    conn: psycopg.Connection[Any],
    ctx: OpsContext,
    setting: Setting,
    value: float | None,
    *,
    reason: str | None = None,
) -> None:
    """Set ``setting`` to ``value`` (None: back to its default), audited in one transaction."""
    ctx.require_write(f"set {setting.name}")
    if value is not None:
        setting.check(value)
    reason = audit.clean_reason(reason)
    with conn.transaction():
        if value is None:
            conn.execute(render(RESET_SQL, ctx.schema), (setting.name,))
        else:
            conn.execute(render(SET_SQL, ctx.schema), (setting.name, value, ctx.actor))
        audit.record(conn, ctx, "setting", {"name": setting.name, "value": value}, count=1,
                     reason=reason)
