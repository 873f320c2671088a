"""The cron calendar: which instants a cron expression names in a time zone, across daylight
saving time (see :mod:`forklift._features.cron` for the rules), computed with croniter on the wall clock.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from forklift._base.errors import ConfigError

if TYPE_CHECKING:
    from croniter import croniter

__all__ = ["instants", "next_tick", "normalise", "ticks_between", "zone_of"]

# Local wall time and instant order agree except across an offset change; no zone moves its
# clock by more than this, so looking this far past a window is enough to see every tick in it.
_DST_MARGIN = timedelta(hours=3)
_ALIASES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_EVERY_HOUR = frozenset({"*", "*/1", "0-23"})

def _croniter() -> type[croniter]:
    from croniter import croniter as cls  # loads only where schedules are declared or fired

    found: type[croniter] = cls
    return found


def zone_of(tz: str) -> ZoneInfo:
    try:
        return ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError):
        raise ConfigError(f"unknown time zone {tz!r}: use an IANA name like 'Europe/Berlin'") from None


def normalise(expr: str) -> str:
    """The expression with aliases expanded; raises ConfigError when cron cannot read it."""
    text = " ".join(expr.split())
    text = _ALIASES.get(text.lower(), text)
    fields = text.split(" ")
    if len(fields) not in (5, 6) or not _croniter().is_valid(text):
        raise ConfigError(
            f"cron expression {expr!r} is not valid: five fields (minute hour day month weekday),"
            " an optional sixth for seconds, or an alias like @daily"
        )
    return text


def _every_hour(expr: str) -> bool:
    return expr.split(" ")[1] in _EVERY_HOUR


def _naive(at: datetime, zone: ZoneInfo) -> datetime:
    return at.astimezone(zone).replace(tzinfo=None)


def _gap_end(naive: datetime, zone: ZoneInfo) -> datetime:
    """The first instant after the gap that swallowed ``naive``: where the clock resumes."""
    # For a wall time in a gap, fold=1 reads it with the offset after the change and fold=0 with
    # the one before, which puts the change between the two readings: bisect for it.
    lo = naive.replace(tzinfo=zone, fold=1).astimezone(UTC)
    hi = naive.replace(tzinfo=zone, fold=0).astimezone(UTC)
    if lo > hi:
        lo, hi = hi, lo
    after = hi.astimezone(zone).utcoffset()
    while hi - lo > timedelta(seconds=1):
        mid = lo + (hi - lo) / 2
        if mid.astimezone(zone).utcoffset() == after:
            hi = mid
        else:
            lo = mid
    return hi.replace(microsecond=0)


def instants(naive: datetime, zone: ZoneInfo, every_hour: bool) -> list[datetime]:
    """The UTC instants at which a matching wall time fires (none, one, or two)."""
    first = naive.replace(tzinfo=zone, fold=0).astimezone(UTC)
    if _naive(first, zone) != naive:  # the wall time does not exist: a spring-forward gap
        return [] if every_hour else [_gap_end(naive, zone)]
    second = naive.replace(tzinfo=zone, fold=1).astimezone(UTC)
    if second == first:
        return [first]
    return [first, second] if every_hour else [first]


def _stable(zone: ZoneInfo, around: datetime) -> bool:
    """Whether the zone keeps one offset within the DST margin of an instant."""
    return (
        (around - _DST_MARGIN).astimezone(zone).utcoffset()
        == around.astimezone(zone).utcoffset()
        == (around + _DST_MARGIN).astimezone(zone).utcoffset()
    )


def _walk(expr: str, start: datetime, backwards: bool) -> Iterator[datetime]:
    it = _croniter()(expr, start)
    step = it.get_prev if backwards else it.get_next
    while True:
        yield step(datetime)


def ticks_between(
    expr: str, tz: str, after: datetime, until: datetime, limit: int = 1
) -> list[datetime]:
    """The latest ``limit`` ticks in (after, until], oldest first, as UTC instants."""
    text, zone = normalise(expr), zone_of(tz)
    if after >= until:
        return []
    every_hour = _every_hour(text)
    margin = timedelta(0) if _stable(zone, until) else _DST_MARGIN
    floor = _naive(after, zone) - (timedelta(0) if _stable(zone, after) else _DST_MARGIN)
    found: set[datetime] = set()
    for naive in _walk(text, _naive(until, zone) + margin + timedelta(seconds=1), backwards=True):
        if naive < floor:
            break
        found.update(i for i in instants(naive, zone, every_hour) if after < i <= until)
        if len(found) >= limit:
            kth = sorted(found, reverse=True)[limit - 1]
            slack = timedelta(0) if _stable(zone, kth) else _DST_MARGIN
            if naive < _naive(kth, zone) - slack:
                break
    return sorted(found)[-limit:]


def next_tick(expr: str, tz: str, after: datetime) -> datetime:
    """The first tick strictly after ``after``, as a UTC instant."""
    text, zone = normalise(expr), zone_of(tz)
    every_hour = _every_hour(text)
    margin = timedelta(0) if _stable(zone, after) else _DST_MARGIN
    best: datetime | None = None
    for naive in _walk(text, _naive(after, zone) - margin - timedelta(seconds=1), backwards=False):
        for i in instants(naive, zone, every_hour):
            if i > after and (best is None or i < best):
                best = i
        if best is not None:
            slack = timedelta(0) if _stable(zone, best) else _DST_MARGIN
            if naive > _naive(best, zone) + slack:
                return best
    raise ConfigError(f"cron expression {expr!r} never fires")  # pragma: no cover
