"""A book summed per currency: the one invariant of double entry, checked on the table."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from forklift.ledger.balance_row import CurrencyTotal

__all__ = ["BookCheck"]


@dataclass(frozen=True)
class BookCheck:
    """Every currency's total in ``table`` (for ``tenant`` only, when given)."""

    table: str
    tenant: str | None
    currencies: tuple[CurrencyTotal, ...]

    @property
    def balanced(self) -> bool:
        return all(c.total == 0 for c in self.currencies)

    def to_json(self) -> dict[str, Any]:
        return {"table": self.table, "tenant": self.tenant, "balanced": self.balanced,
                "currencies": [c.to_json() for c in self.currencies]}
