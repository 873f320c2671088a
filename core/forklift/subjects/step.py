"""One table of a subject's walk, resolved: its treatment and how it joins its parent."""

from __future__ import annotations

from dataclasses import dataclass

from forklift.subjects.treatment import Treatment

__all__ = ["Step"]


@dataclass(frozen=True)
class Step:
    """A table of the walk. The root's rows are ``via = <key>``; any other table's rows are
    those whose ``via`` is among its parent's rows' ``parent_key``."""

    table: str
    treatment: Treatment
    via: str
    parent: int | None = None
    parent_key: str | None = None
