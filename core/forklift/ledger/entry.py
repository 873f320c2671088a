"""One line of a posting: an account and the money moved on it."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from forklift.ledger.money import Money

__all__ = ["Entry"]


class Entry(BaseModel):
    """A debit (positive) or credit (negative) of ``amount`` on ``account``, the app's own
    account name (``"cash"``, ``"customer:42"``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    account: str
    amount: Money
