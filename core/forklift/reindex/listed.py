"""What an index lists of a document: enough for the sweep to tell whether its row is gone."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Listed"]


@dataclass(frozen=True)
class Listed:
    id: str
    version: int
    tenant: str | None = None
