"""Charts (``:charts``): per bucket over a chosen window, for one queue or all.

Completed jobs, failed attempts, jobs picked up and deaths per bucket; pickup lag and run time
p50 and p95 per bucket. Textual's own :class:`~textual.widgets.Sparkline` draws each series;
beside it the axis in numbers (the highest and the lowest point drawn) and under it the time
axis (the window's start, its middle, now), so a chart reads without guessing its scale. ``w``
steps the window through the same three the Overview and Queues chart (5 min in 10-second
buckets, 1 h in 1-minute buckets, 24 h in 30-minute buckets:
:data:`~forklift_console.widgets.window_chart.WINDOWS`); ``n`` steps the queue (all, then each
by name). The figures are ``Operator.charts``'s: one statement per
refresh, computed on the server.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import ClassVar

from rich.markup import escape
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Grid, Horizontal, Vertical, VerticalScroll
from textual.widgets import Sparkline, Static

from forklift.ops import Operator
from forklift.ops.charts import ChartSeries
from forklift_console.screens.base import ConsoleScreen
from forklift_console.screens.kinds import window_label
from forklift_console.widgets.text import ident, seconds
from forklift_console.widgets.window_chart import WINDOWS

AXIS = 7  # the width of the numbers left of a chart


def _count(v: float | None) -> str:
    return f"{int(v or 0):,}"


@dataclass(frozen=True)
class Chart:
    key: str  # the ChartSeries field
    label: str
    #: A count per bucket (summed in the title), or a duration (seconds).
    count: bool = True

    def fmt(self) -> Callable[[float | None], str]:
        return _count if self.count else seconds


#: In reading order; two to a row where the screen is wide.
CHARTS: tuple[Chart, ...] = (
    Chart("completed", "Completed"),
    Chart("failed", "Failed attempts"),
    Chart("picked", "Picked up"),
    Chart("dead", "Died"),
    Chart("lag_p50", "Pickup lag p50", count=False),
    Chart("lag_p95", "Pickup lag p95", count=False),
    Chart("run_p50", "Run time p50", count=False),
    Chart("run_p95", "Run time p95", count=False),
)


def time_axis(window_seconds: float, width: int) -> Text:
    """``-1h            -30m             now``, as wide as the chart."""
    start = f"-{window_label(timedelta(seconds=window_seconds))}"
    middle = f"-{window_label(timedelta(seconds=window_seconds / 2))}"
    width = max(width, len(start) + len(middle) + 5)
    gap = width - len(start) - len(middle) - 3
    return Text(start + " " * (gap // 2) + middle + " " * (gap - gap // 2) + "now", style="dim")


def per(bucket_seconds: float) -> str:
    if bucket_seconds < 60:
        return f"{bucket_seconds:g} s"
    return "minute" if bucket_seconds == 60 else window_label(timedelta(seconds=bucket_seconds))


def heading(chart: Chart, values: Sequence[float | None], bucket_seconds: float) -> Text:
    """``Completed per minute  total 1,234 · peak 56``; a duration: its peak and latest."""
    text = Text(f"{chart.label} per {per(bucket_seconds)}", style="bold")
    if chart.count:
        counts = [int(v or 0) for v in values]
        text.append(f"  total {sum(counts):,} · peak {max(counts, default=0):,}", style="")
        return text
    seen = [v for v in values if v is not None]
    if not seen:
        text.append("  no jobs in the window", style="dim")
        return text
    text.append(f"  peak {seconds(max(seen))} · latest {seconds(seen[-1])}", style="")
    return text


def axis(chart: Chart, values: Sequence[float | None]) -> str:
    """The highest and lowest points drawn (a bucket without jobs draws as 0): Textual's
    Sparkline spans exactly that range."""
    drawn = [float(v or 0) for v in values]
    fmt = chart.fmt()
    return f"{fmt(max(drawn, default=0))}\n{fmt(min(drawn, default=0))}"


class ChartsScreen(ConsoleScreen[ChartSeries]):
    MODE = "charts"
    HELP = (
        "Per bucket over the window (w: 5 min in 10-second buckets, 1 h in 1-minute buckets,"
        " 24 h in 30-minute buckets, as on the Overview and Queues), for all queues or one (n steps through them): completed jobs, failed"
        " attempts, jobs picked up, deaths; pickup lag (due to started) and run time p50 and"
        " p95 of the jobs picked up or completed in each bucket. The left axis gives the"
        " highest and lowest points drawn, the time runs below. A bucket without jobs draws"
        " as 0."
    )
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("w", "window", "Window"),
        Binding("n", "queue", "Queue"),
    ]
    DEFAULT_CSS = """
    ChartsScreen #charts { layout: grid; grid-size: 2; grid-gutter: 0 2; height: auto; }
    ChartsScreen #charts.narrow { grid-size: 1; }
    ChartsScreen .cell { height: 5; }
    ChartsScreen .chart { height: 2; }
    ChartsScreen .axis { width: 7; height: 2; text-align: right; padding-right: 1; }
    ChartsScreen Sparkline { height: 2; width: 1fr; }
    ChartsScreen .time { padding-left: 7; height: 1; }
    """

    def __init__(self, queue: str | None = None) -> None:
        super().__init__()
        self.window, self.bucket = WINDOWS[1].window, WINDOWS[1].bucket
        #: The queue charted; None: all queues.
        self.queue = queue
        self._queues: list[str] = []

    def compose_body(self) -> ComposeResult:
        with Vertical(id="body"):
            yield Static(id="info")
            with VerticalScroll(), Grid(id="charts"):
                for chart in CHARTS:
                    with Vertical(classes="cell"):
                        yield Static(id=f"{chart.key}-title")
                        with Horizontal(classes="chart"):
                            yield Static(id=f"{chart.key}-axis", classes="axis")
                            yield Sparkline([], id=f"{chart.key}-chart")
                        yield Static(id=f"{chart.key}-time", classes="time")

    def on_mount(self) -> None:
        super().on_mount()
        self._layout()

    def on_resize(self) -> None:
        self._layout()

    def _columns(self) -> int:
        return 1 if self.is_narrow() else 2

    def _layout(self) -> None:
        self.query_one("#charts", Grid).set_class(self._columns() == 1, "narrow")

    def fetch(self, op: Operator) -> ChartSeries:
        return op.charts(window=self.window, bucket=self.bucket, queue=self.queue)

    def show(self, data: ChartSeries) -> None:
        if data.window_seconds != self.window.total_seconds() or data.queue != self.queue:
            return  # an answer for a window or queue the operator has since left
        self._queues = data.queues
        width = max(self.app.size.width // self._columns() - AXIS - 4, 10)
        for chart in CHARTS:
            values: list[float | None] = list(getattr(data, chart.key))
            self.query_one(f"#{chart.key}-title", Static).update(
                heading(chart, values, data.bucket_seconds))
            self.query_one(f"#{chart.key}-axis", Static).update(axis(chart, values))
            drawn = [float(v or 0) for v in values]
            # Nothing to draw reads as a flat floor: Textual's Sparkline fills the box for a
            # single point, and an all-zero window is no peak.
            self.query_one(f"#{chart.key}-chart", Sparkline).data = (
                drawn if any(drawn) and len(drawn) > 1 else [])
            self.query_one(f"#{chart.key}-time", Static).update(
                time_axis(data.window_seconds, width))
        self._paint_info(len(data.buckets))

    def _paint_info(self, buckets: int | None = None) -> None:
        info = Text()
        if self.queue is None:
            info.append("all queues", style="bold")
        else:
            info.append("queue ", style="")
            info.append_text(ident(self.queue, limit=40))
        info.append(f" · the last {window_label(self.window)}")
        if buckets is not None:
            info.append(f" in {buckets} buckets")
        info.append(" · w: another window · n: another queue", style="dim")
        self.query_one("#info", Static).update(info)

    def action_window(self) -> None:
        i = next(i for i, w in enumerate(WINDOWS) if w.window == self.window)
        after = WINDOWS[(i + 1) % len(WINDOWS)]
        self.window, self.bucket = after.window, after.bucket
        self.notify(f"window: the last {window_label(self.window)}", title="Charts")
        self.reload()

    def action_queue(self) -> None:
        """All queues, then each queue by name, then all again."""
        order: list[str | None] = [None, *self._queues]
        at = order.index(self.queue) if self.queue in order else 0
        self.queue = order[(at + 1) % len(order)]
        what = "all queues" if self.queue is None else f"queue {escape(self.queue)}"
        self.notify(f"charting {what}", title="Charts")
        self._paint_info()
        self.reload()
