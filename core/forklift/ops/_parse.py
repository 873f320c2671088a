"""Operator input checked and parsed: text PostgreSQL can hold, durations, moments, LIKE patterns.

Shared by every operator call that takes loose text (filters, queues, retention, locks...).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from forklift.ops.errors import InvalidFilter

__all__ = ["MAX_TEXT", "MAX_VALUES", "check_text", "duration", "like_pattern", "moment"]

MAX_TEXT = 500
MAX_VALUES = 100

_DURATION = re.compile(r"^\s*(?:(\d+(?:\.\d+)?)\s*(ms|w|d|h|m|s)\s*)+$", re.I)
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|w|d|h|m|s)", re.I)
_UNIT = {"w": 604800.0, "d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def check_text(value: str, what: str) -> str:
    if "\x00" in value:
        raise InvalidFilter(
            f"{what} contains a NUL character (\\x00), which PostgreSQL text cannot hold;"
            " remove it",
            field=what,
        )
    if len(value) > MAX_TEXT:
        raise InvalidFilter(f"{what} is longer than {MAX_TEXT} characters", field=what)
    return value


def duration(value: str | float | timedelta, what: str = "duration") -> timedelta:
    """``90``, ``"90s"``, ``"15m"``, ``"1h30m"``, ``"7d"``, ``"2w"`` or a timedelta."""
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, (int, float)):
        seconds = float(value)
    else:
        text = check_text(value, what).strip()
        try:
            seconds = float(text)
        except ValueError:
            if not _DURATION.match(text):
                raise InvalidFilter(
                    f"{what} {text!r} is not a duration: use e.g. 90s, 15m, 2h, 7d or 1h30m",
                    field=what,
                ) from None
            seconds = sum(float(n) * _UNIT[u.lower()] for n, u in _DURATION_PART.findall(text))
    if seconds < 0 or seconds != seconds or seconds > 10 * 365 * 86400:
        raise InvalidFilter(f"{what} must be between 0 and ten years", field=what)
    return timedelta(seconds=seconds)


def moment(value: str | datetime, what: str = "time", *, now: datetime | None = None) -> datetime:
    """An ISO 8601 time (naive means UTC) or a duration meaning that long ago (``"2h"``)."""
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    text = check_text(value, what).strip()
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        try:
            ago = duration(text, what)
        except InvalidFilter:
            raise InvalidFilter(
                f"{what} {text!r} is neither an ISO 8601 time (2024-05-01T12:00:00+00:00) nor a"
                " duration ago (2h)",
                field=what,
            ) from None
        return (now or datetime.now(UTC)) - ago
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def like_pattern(text: str) -> str:
    """A substring match where ``%``, ``_`` and ``\\`` stand for themselves."""
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


_GROUP_ID = re.compile(r"^[0-9a-f]{16}$")


def check_group_id(group: str) -> str:
    text = check_text(group, "group").strip().lower()
    if not _GROUP_ID.match(text):
        raise InvalidFilter(
            f"{group!r} is not a dead-letter group id (16 hex digits, as `forklift dead groups`"
            " shows them)",
            field="group",
        )
    return text
