"""Charts (``:charts``): completed, failed and dead jobs per bucket over a chosen window.

Textual's own :class:`~textual.widgets.Sparkline` draws each series; beside it the axis in
numbers (the highest bucket and 0) and under it the time axis (the window's start, its middle,
now), so a chart reads without guessing its scale. ``w`` steps the window: 15 min and 1 h in
1-minute buckets, 24 h in 15-minute buckets. The figures are ``Operator.stats``'s, the same the
overview shows.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.widgets import Sparkline, Static

from forklift.ops import Operator, Stats
from forklift_console.screens.base import ConsoleScreen
from forklift_console.screens.kinds import window_label

#: (window, bucket): what ``w`` steps through.
WINDOWS: tuple[tuple[timedelta, timedelta], ...] = (
    (timedelta(minutes=15), timedelta(minutes=1)),
    (timedelta(hours=1), timedelta(minutes=1)),
    (timedelta(hours=24), timedelta(minutes=15)),
)
SERIES = (("completed", "Completed"), ("failed", "Failed attempts"), ("dead", "Died"))
AXIS = 7  # the width of the numbers left of a chart


def time_axis(window_seconds: float, width: int) -> Text:
    """``-1h            -30m             now``, as wide as the chart."""
    start = f"-{window_label(timedelta(seconds=window_seconds))}"
    middle = f"-{window_label(timedelta(seconds=window_seconds / 2))}"
    width = max(width, len(start) + len(middle) + 5)
    gap = width - len(start) - len(middle) - 3
    return Text(start + " " * (gap // 2) + middle + " " * (gap - gap // 2) + "now", style="dim")


def heading(label: str, values: Sequence[int], bucket_seconds: float) -> Text:
    per = "minute" if bucket_seconds == 60 else window_label(timedelta(seconds=bucket_seconds))
    text = Text(f"{label} per {per}", style="bold")
    text.append(f"  total {sum(values):,} · peak {max(values, default=0):,}", style="")
    return text


class ChartsScreen(ConsoleScreen[Stats]):
    MODE = "charts"
    HELP = (
        "Completed jobs, failed attempts and deaths per bucket over the window (w: 15 min,"
        " 1 h in 1-minute buckets; 24 h in 15-minute buckets), with the peak on the left axis"
        " and the time below. The figures are those of forklift stats."
    )
    BINDINGS: ClassVar[list[BindingType]] = [Binding("w", "window", "Window")]
    DEFAULT_CSS = """
    ChartsScreen .chart { height: 2; }
    ChartsScreen .axis { width: 7; height: 2; text-align: right; padding-right: 1; }
    ChartsScreen Sparkline { height: 2; width: 1fr; }
    ChartsScreen .time { padding-left: 7; height: 1; margin-bottom: 1; }
    """

    def __init__(self) -> None:
        super().__init__()
        self.window, self.bucket = WINDOWS[1]

    def compose_body(self) -> ComposeResult:
        with Vertical(id="body"):
            yield Static(id="info")
            for key, _ in SERIES:
                yield Static(id=f"{key}-title")
                with Horizontal(classes="chart"):
                    yield Static(id=f"{key}-axis", classes="axis")
                    yield Sparkline([], id=f"{key}-chart")
                yield Static(id=f"{key}-time", classes="time")

    def fetch(self, op: Operator) -> Stats:
        return op.stats(window=self.window, bucket=self.bucket)

    def show(self, data: Stats) -> None:
        if data.window_seconds != self.window.total_seconds():
            return  # an answer for a window the operator has since left
        series = data.totals.series
        width = max(self.app.size.width - AXIS - 2, 10)
        for key, label in SERIES:
            values: list[int] = list(getattr(series, key))
            self.query_one(f"#{key}-title", Static).update(
                heading(label, values, data.bucket_seconds))
            peak = max(values, default=0)
            self.query_one(f"#{key}-axis", Static).update(f"{peak:,}\n0")
            self.query_one(f"#{key}-chart", Sparkline).data = [float(v) for v in values]
            self.query_one(f"#{key}-time", Static).update(time_axis(data.window_seconds, width))
        info = Text(f"all queues · the last {window_label(self.window)}"
                    f" in {len(data.buckets)} buckets", style="")
        info.append(" · w: another window", style="dim")
        self.query_one("#info", Static).update(info)

    def action_window(self) -> None:
        i = next(i for i, (w, _) in enumerate(WINDOWS) if w == self.window)
        self.window, self.bucket = WINDOWS[(i + 1) % len(WINDOWS)]
        self.notify(f"window: the last {window_label(self.window)}",
                    title="Charts")
        self.reload()
