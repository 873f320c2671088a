"""What an erase does to the rows of one table: delete them, anonymize named columns, or keep
them for a stated reason."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from forklift._base.errors import ConfigError

__all__ = ["Action", "Treatment", "anonymize", "delete", "retain"]

Action = Literal["delete", "anonymize", "retain"]


@dataclass(frozen=True)
class Treatment:
    """How an erase treats a table's rows of the subject.

    ``anonymize`` overwrites ``values`` (column -> the value written, None for NULL) and keeps
    the row; ``delete`` removes the row; ``retain`` keeps it untouched, and ``reason`` says why
    (a legal hold, an invoice kept for the tax office), so the choice is on record.
    """

    action: Action
    values: dict[str, Any] = field(default_factory=dict)
    reason: str | None = None

    @property
    def erased_columns(self) -> frozenset[str]:
        """The columns whose values an erase removes (all of them for a delete)."""
        return frozenset(self.values)

    def covers(self, columns: frozenset[str]) -> frozenset[str]:
        """The marked ``columns`` this treatment would leave holding the person's data."""
        if self.action in ("delete", "retain"):
            return frozenset()
        return columns - self.erased_columns

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"action": self.action}
        if self.action == "anonymize":
            out["columns"] = sorted(self.values)
        if self.reason is not None:
            out["reason"] = self.reason
        return out


def delete() -> Treatment:
    """Delete the subject's rows of the table."""
    return Treatment("delete")


def anonymize(*columns: str, **values: Any) -> Treatment:
    """Overwrite columns and keep the rows: ``anonymize("phone", email="erased@example.invalid")``
    sets ``phone`` to NULL and ``email`` to the value given."""
    chosen: dict[str, Any] = dict.fromkeys(columns)
    for name, value in values.items():
        if name in chosen:
            raise ConfigError(f"anonymize: column {name!r} is named twice", field=name)
        chosen[name] = value
    if not chosen:
        raise ConfigError("anonymize needs at least one column", field="columns")
    for name in chosen:
        if not isinstance(name, str) or not name:
            raise ConfigError(f"anonymize: {name!r} is not a column name", field="columns")
    return Treatment("anonymize", chosen)


def retain(reason: str) -> Treatment:
    """Keep the rows untouched, for ``reason`` (required: a kept row must say why)."""
    if not isinstance(reason, str) or not reason.strip():
        raise ConfigError("retain needs a reason: why these rows outlive an erase", field="reason")
    return Treatment("retain", reason=reason.strip())
