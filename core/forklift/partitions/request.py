"""The payload of an upkeep job."""

from __future__ import annotations

from datetime import datetime

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

__all__ = ["UpkeepRequest"]


class UpkeepRequest(BaseModel):
    """``now``: the instant the run plans for (default: the kind's clock when it runs).
    ``from``: create every partition back to the one holding this instant, dropping nothing
    (before a backfill of old rows). ``tables``: only these of the kind's tables."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    now: AwareDatetime | None = None
    from_: AwareDatetime | None = Field(default=None, alias="from")
    tables: list[str] | None = None

    def start(self) -> datetime | None:
        return self.from_
