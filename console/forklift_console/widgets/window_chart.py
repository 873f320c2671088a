"""Throughput over a chosen time window (5 min, 1 h, 24 h), as lines of bars a panel shows.

The Overview (for every queue) and the Queues screen (for the highlighted queue) step through
the windows with ``w``; the figures are the operator API's stats for that window
(``op.stats.get(window=..., cached=False)``: closed minutes from the stats rollup, so 24 h costs
about what 5 min does; read only while a window is chosen). Each line names what it counts and its total, the heading names the window and the
bucket in words, so nothing depends on colour or on guessing the scale. A series with nothing in
the window draws no bars at all (a row of the lowest block reads as "a little"), and says so.
When the buckets outnumber the columns, neighbouring buckets are added together so the whole
window still fits.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from rich.text import Text

from forklift.ops.stats import Series
from forklift_console.widgets.text import JOB_STATES, SPARK_BLOCKS


@dataclass(frozen=True)
class ChartWindow:
    label: str  # "5 min"
    window: timedelta
    bucket: timedelta
    bucket_label: str  # "10 s"


#: What ``w`` steps through, after the screen's own view.
WINDOWS: tuple[ChartWindow, ...] = (
    ChartWindow("5 min", timedelta(minutes=5), timedelta(seconds=10), "10 s"),
    ChartWindow("1 h", timedelta(hours=1), timedelta(minutes=1), "1 min"),
    ChartWindow("24 h", timedelta(hours=24), timedelta(minutes=30), "30 min"),
)


def next_window(current: ChartWindow | None) -> ChartWindow | None:
    """The window after ``current``; after the last, None (the screen's own view)."""
    if current is None:
        return WINDOWS[0]
    at = WINDOWS.index(current)
    return WINDOWS[at + 1] if at + 1 < len(WINDOWS) else None


def fit(values: Sequence[float], width: int) -> list[float]:
    """At most ``width`` points: neighbours added together, newest group ending at now."""
    points = [float(v) for v in values]
    if width <= 0 or len(points) <= width:
        return points
    group = -(-len(points) // width)  # ceiling
    head = len(points) % group
    out = [sum(points[:head])] if head else []
    out += [sum(points[i:i + group]) for i in range(head, len(points), group)]
    return out


def bars(values: Sequence[float], width: int) -> str | None:
    """Block bars scaled to the highest point; None when every point is zero."""
    points = fit(values, width)
    top = max(points, default=0.0)
    if top <= 0:
        return None
    steps = len(SPARK_BLOCKS) - 1
    return "".join(" " if v <= 0 else SPARK_BLOCKS[max(1, round(v / top * steps))]
                   for v in points)


def _span(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:g} s"
    if seconds < 3600:
        return f"{seconds / 60:g} min"
    return f"{seconds / 3600:g} h"


def chart_text(series: Series, window: ChartWindow, width: int, *, what: str) -> Text:
    """``what`` (e.g. "Throughput, queue mail"), the window in words, one line per outcome."""
    label_width, total_width = 13, 9
    room = max(10, width - label_width - total_width - 2)
    drawn = len(fit(series.completed, room))
    group = -(-len(series.completed) // drawn) if drawn else 1
    text = Text().append(f"{what}, the last {window.label}", style="bold")
    per = window.bucket_label if group == 1 else _span(window.bucket.total_seconds() * group)
    text.append(f" · a bar per {per} · w: next window\n", style="dim")
    for label, glyph, values in (
        ("completed", JOB_STATES["completed"][0], series.completed),
        ("failed", JOB_STATES["retryable"][0], series.failed),
        ("dead", JOB_STATES["dead"][0], series.dead),
    ):
        total = sum(values)
        text.append(f" {glyph} {label:<10}")
        drawing = bars(values, room)
        if drawing is None:
            text.append(f"none in the last {window.label}".ljust(drawn), style="dim")
        else:
            text.append(drawing.ljust(drawn))
        text.append(f" {total:>{total_width - 1},}\n")
    text.rstrip()
    return text
