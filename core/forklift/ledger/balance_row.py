"""One currency's total in a book."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["CurrencyTotal"]


@dataclass(frozen=True)
class CurrencyTotal:
    """The sum of every line in ``currency`` (minor units; zero in a balanced book), over
    ``lines`` lines of ``postings`` postings."""

    currency: str
    total: int
    lines: int
    postings: int

    def to_json(self) -> dict[str, Any]:
        return {"currency": self.currency, "total": self.total, "lines": self.lines,
                "postings": self.postings}
