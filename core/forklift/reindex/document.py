"""A row's search document, as a reindex sends it to an index."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Document"]


@dataclass(frozen=True)
class Document:
    """``id`` is the row's key as text; ``version`` grows with every write of the row (the
    index keeps only the newest version of each id); ``fields`` are the searchable columns and
    ``text`` their words, joined; ``tenant`` the row's tenant, when the table has one."""

    id: str
    version: int
    fields: dict[str, Any] = field(default_factory=dict)
    text: str = ""
    tenant: str | None = None
