"""Sort keys and keyset cursors for job lists: allow-listed ORDER BY text, values as parameters."""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from forklift.ops._parse import check_text
from forklift.ops.errors import InvalidFilter

__all__ = ["SORT_KEYS", "Cursor", "Sort"]

#: Columns a list can be sorted by; the cursor remembers which one it belongs to.
#: ``changed_at``: when the job last moved (finished, else attempted, else created).
SORT_KEYS: tuple[str, ...] = ("id", "created_at", "run_at", "attempted_at", "finished_at", "priority",
                              "state", "queue", "kind", "attempt", "changed_at")
_NULLABLE = {"attempted_at", "finished_at"}
_TIMESTAMPS = {"created_at", "run_at", "attempted_at", "finished_at", "changed_at"}
_TEXTS = {"state", "queue", "kind"}
#: Sort keys that are expressions, not columns ({a}: the table's alias).
_EXPRESSIONS = {"changed_at": "coalesce({a}.finished_at, {a}.attempted_at, {a}.created_at)"}

@dataclass(frozen=True)
class Sort:
    key: str = "id"
    descending: bool = True

    def __post_init__(self) -> None:
        if self.key not in SORT_KEYS:  # the key is spliced into ORDER BY by name
            raise InvalidFilter(
                f"cannot sort by {self.key!r}: use one of {', '.join(SORT_KEYS)}", field="sort"
            )

    @classmethod
    def parse(cls, text: str | None) -> Sort:
        """``"id"``, ``"-created_at"`` (descending) or ``"created_at:asc"``; default newest first."""
        if not text:
            return cls()
        text = check_text(text, "sort").strip()
        descending = text.startswith("-")
        key = text.lstrip("-+")
        if ":" in key:
            key, _, direction = key.partition(":")
            if direction not in ("asc", "desc"):
                raise InvalidFilter(f"sort direction {direction!r} must be asc or desc", field="sort")
            descending = direction == "desc"
        if key not in SORT_KEYS:
            raise InvalidFilter(
                f"cannot sort by {key!r}: use one of {', '.join(SORT_KEYS)}", field="sort"
            )
        return cls(key, descending)

    def column(self, alias: str = "t") -> str:
        """The key as SQL: a column, or an allow-listed expression."""
        expr = _EXPRESSIONS.get(self.key)
        return expr.format(a=alias) if expr else f"{alias}.{self.key}"

    def order_by(self, alias: str = "t") -> str:
        d = "DESC" if self.descending else "ASC"
        if self.key == "id":
            return f"{alias}.id {d}"
        return f"{self.column(alias)} {d} NULLS LAST, {alias}.id {d}"

    def after(self, cursor: Cursor, alias: str = "t") -> tuple[str, list[Any]]:
        """The keyset condition for the page that follows ``cursor``."""
        op = "<" if self.descending else ">"
        col, ident = self.column(alias), f"{alias}.id"
        if self.key == "id":
            return f"{ident} {op} %s", [cursor.id]
        if cursor.value is None:  # already in the NULLS LAST tail
            return f"({col} IS NULL AND {ident} {op} %s)", [cursor.id]
        nulls = f" OR {col} IS NULL" if self.key in _NULLABLE else ""
        return (
            f"({col} {op} %s OR ({col} = %s AND {ident} {op} %s){nulls})",
            [cursor.value, cursor.value, cursor.id],
        )

    def value_of(self, row: dict[str, Any]) -> Any:
        if self.key == "changed_at":
            return row["finished_at"] or row["attempted_at"] or row["created_at"]
        return row[self.key]


@dataclass(frozen=True)
class Cursor:
    """Where a page ended: the sort it belongs to, the last row's sort value and id."""

    key: str
    descending: bool
    value: Any
    id: int

    def encode(self) -> str:
        value = self.value.isoformat() if isinstance(self.value, datetime) else self.value
        raw = json.dumps([1, self.key, self.descending, value, self.id], separators=(",", ":"))
        return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")

    @classmethod
    def decode(cls, text: str, sort: Sort) -> Cursor:
        try:
            raw = base64.urlsafe_b64decode(check_text(text, "cursor") + "=" * (-len(text) % 4))
            version, key, descending, value, ident = json.loads(raw)
            if version != 1 or not isinstance(ident, int) or isinstance(ident, bool):
                raise ValueError
            if key in _TIMESTAMPS and value is not None:
                value = datetime.fromisoformat(value)
            elif key in _TEXTS:
                if not isinstance(value, str):
                    raise ValueError
                check_text(value, "cursor")
            elif value is not None and (not isinstance(value, int) or isinstance(value, bool)):
                raise ValueError
        except (ValueError, TypeError, binascii.Error, UnicodeDecodeError):
            raise InvalidFilter(
                "the cursor is not one this API handed out; start again without --cursor",
                field="cursor",
            ) from None
        if key != sort.key or descending != sort.descending:
            raise InvalidFilter(
                f"the cursor belongs to a list sorted by {'-' if descending else ''}{key};"
                " pass the same sort or start again without it",
                field="cursor",
            )
        return cls(key, descending, value, ident)
