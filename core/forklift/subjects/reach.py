"""One step of a subject's walk: a table reached from its parent through a foreign key."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from forklift._base.errors import ConfigError
from forklift.subjects.treatment import Treatment

__all__ = ["Reach"]


@dataclass(frozen=True)
class Reach:
    """``table`` holds rows of the subject: those whose ``via`` column references ``parent``'s
    ``parent_key``.

    ``parent`` defaults to the subject's own table; ``via`` and ``parent_key`` default to the
    one foreign key from ``table`` to ``parent`` the database declares (a declared ``via`` is
    for tables without one). ``erase`` is what an erase does to these rows; ``personal`` marks
    columns as personal data, beside any ``COMMENT ON COLUMN ... IS 'personal ...'``.
    """

    table: str
    erase: Treatment
    via: str | None = None
    parent: str | None = None
    parent_key: str | None = None
    personal: Sequence[str] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.table, str) or not self.table:
            raise ConfigError(f"a reached table needs a name, not {self.table!r}", field="table")
        if not isinstance(self.erase, Treatment):
            raise ConfigError(
                f"reach {self.table!r}: erase must be delete(), anonymize(...) or retain(reason)",
                field="erase")
        object.__setattr__(self, "personal", tuple(self.personal))
