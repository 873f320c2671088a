"""A declared subject: a person's root row and the walk from it through the app's tables."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from forklift._base.errors import ConfigError
from forklift._base.names import check_name
from forklift.subjects.reach import Reach
from forklift.subjects.treatment import Treatment

__all__ = ["Subject"]


@dataclass(frozen=True)
class Subject:
    """A kind of person (a user, a customer) whose rows can be exported and erased.

    ``table`` and ``key`` name the root row (``WHERE key = <the subject's key>``); ``erase`` is
    what an erase does to it; ``reaches`` are the tables reached from it, each from the root
    or from a table listed before it. ``personal`` marks columns of the root table.
    """

    name: str
    table: str
    key: str
    erase: Treatment
    reaches: Sequence[Reach] = ()
    personal: Sequence[str] = field(default=())

    def __post_init__(self) -> None:
        check_name(self.name, "kind", field="name")
        if not isinstance(self.erase, Treatment):
            raise ConfigError(
                f"subject {self.name!r}: erase must be delete(), anonymize(...) or retain(reason)",
                field="erase")
        object.__setattr__(self, "reaches", tuple(self.reaches))
        object.__setattr__(self, "personal", tuple(self.personal))
        seen = {self.table}
        for reach in self.reaches:
            if reach.table in seen:
                raise ConfigError(
                    f"subject {self.name!r} reaches table {reach.table!r} twice", field="reaches")
            parent = reach.parent or self.table
            if parent not in seen:
                raise ConfigError(
                    f"subject {self.name!r}: {reach.table!r} is reached from {parent!r}, which"
                    " is neither the subject's table nor listed before it", field="reaches")
            seen.add(reach.table)

    @property
    def tables(self) -> tuple[str, ...]:
        """Every table the walk reaches, the root first."""
        return (self.table, *(r.table for r in self.reaches))

    def treatment(self, table: str) -> Treatment:
        if table == self.table:
            return self.erase
        return next(r.erase for r in self.reaches if r.table == table)
