"""Periods of a range-partitioned table: where one starts, the next, and its partition's name.

Periods are computed in UTC: a day is midnight to midnight UTC, a month starts on its first day
at midnight UTC, so every run, wherever its clock is set, agrees on the same bounds.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Final, Literal

__all__ = ["INTERVALS", "Interval", "period_start", "shift", "suffix"]

Interval = Literal["day", "month"]
INTERVALS: Final[tuple[Interval, ...]] = ("day", "month")


def period_start(moment: datetime, interval: Interval) -> datetime:
    """The start of the period holding ``moment`` (aware; a naive one is taken as UTC)."""
    at = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    day = at.replace(hour=0, minute=0, second=0, microsecond=0)
    return day if interval == "day" else day.replace(day=1)


def shift(start: datetime, periods: int, interval: Interval) -> datetime:
    """The start of the period ``periods`` after (or before, negative) the one at ``start``."""
    if interval == "day":
        return start + timedelta(days=periods)
    months = start.year * 12 + start.month - 1 + periods
    return start.replace(year=months // 12, month=months % 12 + 1)


def suffix(start: datetime, interval: Interval) -> str:
    """The partition name's suffix for the period at ``start``: ``p20260131``, ``p202601``."""
    return start.strftime("p%Y%m%d" if interval == "day" else "p%Y%m")
