"""A posting: the lines written together, once per (tenant, key)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from forklift.ledger.entry import Entry

__all__ = ["Posting"]


class Posting(BaseModel):
    """``key`` names the posting (a payment provider's id, an order number): the book stores a
    key once per tenant, so a retry, a replay or a second enqueue posts nothing new.
    ``tenant`` is optional; with the kind's ``tenant`` set, a posting may omit it or repeat it.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    key: str
    entries: list[Entry]
    tenant: str | None = None
