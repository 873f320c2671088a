"""An amount of money: a whole number of minor units in one currency."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Money"]


class Money(BaseModel):
    """``minor`` is an integer count of the currency's minor unit (cents for EUR, yen for JPY):
    never a float, so a sum is exact. ``currency`` is an ISO 4217 code such as ``"EUR"``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # Strict: 12.5, "12" and True are refused rather than turned into an integer.
    minor: Annotated[int, Field(strict=True)]
    currency: str
