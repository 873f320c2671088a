"""Overview (key 1): totals by state, throughput and failures over a named window, alerts."""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.widgets import OptionList, Static

from forklift import ForkliftError
from forklift.ops import JobFilter, JobSummary, Operator, QueueStats, Stats
from forklift.ops.dead import DeadGroup
from forklift.ops.health import Health
from forklift_console.screens.base import ConsoleScreen
from forklift_console.screens.insight import (
    Alert,
    alerts,
    health_alerts,
    queue_state,
    window_label,
    worker_lost_alerts,
)
from forklift_console.screens.modals import PickScreen
from forklift_console.screens.pausing import toggle_pause
from forklift_console.widgets.filterbar import quote
from forklift_console.widgets.table import Column, LiveTable, Row
from forklift_console.widgets.text import (
    JOB_STATES,
    count,
    duration,
    ident,
    job_state,
    one_line,
    seconds,
    spark,
    style_of,
)
from forklift_console.widgets.text import (
    queue_state as queue_badge,
)
from forklift_console.widgets.window_chart import ChartWindow, chart_text, next_window

#: Running jobs read for the lease alert; there are never more than the workers' slots.
RUNNING_LIMIT = 500
#: Seconds between the overview's health reads (as the Health screen's).
HEALTH_EVERY = 10.0


@dataclass(frozen=True)
class OverviewData:
    stats: Stats
    running: list[JobSummary]
    live_batches: int = 0
    #: Dead-letter groups of jobs that died worker_lost (the overview's alert reads them).
    lost: list[DeadGroup] = field(default_factory=list)
    health: Health | None = None
    #: Why health could not be read (a role without access to the statistics views...).
    health_error: str | None = None
    #: The stats over the window chosen with w (None: the half hour of ``stats``).
    chart: Stats | None = None


def fetch_overview(op: Operator) -> OverviewData:
    # One snapshot: the counts, the workers' slots and the running jobs listed beside them
    # agree (never "Slots 8/10" beside "In flight (12)").
    with op.snapshot():
        snapshot = op.stats()
        running = op.jobs(JobFilter(states=("running",)), limit=RUNNING_LIMIT, count=False).jobs
        batches = op.live_batches()
    return OverviewData(snapshot, running, batches)


class OverviewScreen(ConsoleScreen[OverviewData]):
    MODE = "overview"
    HELP = (
        "Where to start. Totals by state, completed and failed jobs over the last half hour,"
        " and alerts: jobs that died because their worker vanished (worker_lost), paused"
        " queues, expired leases, dead letters growing, workers gone quiet, queues whose work"
        " waits too long, the database's health alerts. Enter on an alert opens what it is"
        " about: its jobs, its queue (a paused one: p there resumes it) or the Health screen;"
        " enter on a queue shows its jobs. p resumes a paused queue (asks which when several"
        " are, then why, like the Queues screen). w charts the throughput over the last 5 min,"
        " 1 h or 24 h instead of the half hour (and back)."
    )
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "open", "Open", show=True),
        Binding("p", "resume_paused", "Resume paused"),
        Binding("w", "window", "Chart window", show=False),
    ]

    def __init__(self) -> None:
        super().__init__()
        self._alerts: list[Alert] = []
        self._stats: Stats | None = None
        self._health: tuple[Health | None, str | None] = (None, None)
        self._lost: list[DeadGroup] = []
        self._slow_at = float("-inf")
        #: The window charted instead of the half hour (w), or None.
        self.window: ChartWindow | None = None

    def compose_body(self) -> ComposeResult:
        with Vertical(id="body"):
            yield Static(id="totals")
            yield Static(id="rates")
            yield Static(id="alerts-title")
            yield OptionList(id="alerts")
            yield LiveTable(
                [
                    Column("state", "State", 11),  # "∅ no worker" whole
                    Column("queue", "Queue", 16),
                    Column("available", "Avail", 7),
                    Column("running", "Run", 5),
                    Column("retryable", "Retry", 5),
                    Column("dead", "Dead", 6),
                    Column("lag", "Lag", 6),  # as on Queues: 80 columns hold the table
                    Column("done", "Done/30m", 8),
                ],
                id="queues",
            )

    def fetch(self, op: Operator) -> OverviewData:
        data = fetch_overview(op)
        # The worker_lost groups (a scan of dead_letters, which grows with the dead jobs) and
        # health (statistics views) change slowly: read at most every HEALTH_EVERY seconds.
        if time.monotonic() - self._slow_at >= HEALTH_EVERY:
            self._lost = [g for g in op.dead_groups(limit=1000).groups
                          if g.code == "worker_lost"]
            try:
                self._health = (op.health(), None)
            except ForkliftError as exc:  # health alone: the rest of the overview still shows
                self._health = (None, exc.message)
            self._slow_at = time.monotonic()
        health, error = self._health
        window = self.window
        chart = (op.stats.get(window=window.window, bucket=window.bucket, cached=False)
                 if window is not None else None)
        return replace(data, lost=self._lost, health=health, health_error=error, chart=chart)

    def show(self, data: OverviewData) -> None:
        s = self._stats = data.stats
        now = self.console.now()
        totals = Text()
        for state in ("scheduled", "available", "running", "retryable", "dead"):
            totals.append_text(job_state(state))
            totals.append(f" {count(s.totals.counts.get(state, 0))}   ")
        t = s.totals
        totals.append("\n")
        totals.append(
            f"workers {t.live_workers} live"
            + (f" ({t.draining_workers} draining)" if t.draining_workers else "")
            + f" · slots {t.in_use}/{t.slots} in use · queues {t.queues}"
            + (f" ({t.paused_queues} paused)" if t.paused_queues else "")
            + f" · batches {data.live_batches} running"
        )
        self.query_one("#totals", Static).update(totals)

        self.query_one("#rates", Static).update(self._rates(data))

        self._alerts = [*worker_lost_alerts(data.lost), *alerts(s, data.running, now),
                        *health_alerts(data.health, data.health_error)]
        title = Text().append(f"Alerts ({len(self._alerts)})", style="bold")
        if not self._alerts:
            title.append("  ✔ nothing needs attention", style="not bold " + style_of("state-completed"))
        self.query_one("#alerts-title", Static).update(title)
        prompts = []
        box = self.query_one("#alerts", OptionList)
        width = max(20, self.app.size.width - 3)
        for alert in self._alerts:
            line = Text()
            line.append(f"{alert.glyph} ", style=alert.style)
            line.append_text(alert.text)
            line.truncate(width, overflow="ellipsis")
            prompts.append(line)
        if [str(p) for p in prompts] != [str(o.prompt) for o in box.options]:
            highlighted = box.highlighted or 0
            box.set_options(prompts)
            if prompts:
                box.highlighted = min(highlighted, len(prompts) - 1)
        box.display = bool(prompts)

        def backlog(q: Any) -> tuple[int, str]:
            return (-(q.counts.get("available", 0) + q.counts.get("dead", 0)), q.name)

        rows: list[Row] = []
        for q in sorted(s.queues, key=backlog):
            running = str(q.counts.get("running", 0))
            rows.append(
                (
                    q.name,
                    [
                        queue_badge(queue_state(q)),
                        ident(q.name, limit=16),
                        count(q.counts.get("available", 0)),
                        running,
                        count(q.counts.get("retryable", 0)),
                        count(q.counts.get("dead", 0)),
                        duration(q.pickup_lag_seconds) if q.pickup_lag_seconds is not None else "–",
                        count(q.completed),
                    ],
                )
            )
        self.query_one("#queues", LiveTable).sync(rows)

    def _rates(self, data: OverviewData) -> Text:
        """Throughput: over the window chosen with w, else the stats' own half hour."""
        chart, window = data.chart, self.window
        if (chart is not None and window is not None
                and chart.window_seconds == window.window.total_seconds()):
            return chart_text(chart.totals.series, window, self.app.size.width - 2,
                              what="Throughput")
        s, t = data.stats, data.stats.totals
        rates = Text().append(f"Throughput, {window_label(s)}\n", style="bold")
        width = len(t.series.completed)
        for label, glyph, series, total, per_min in (
            ("completed", JOB_STATES["completed"][0], t.series.completed, t.completed,
             t.completed_per_minute),
            ("failed", JOB_STATES["retryable"][0], t.series.failed, t.failed,
             t.failed_per_minute),
            ("dead", JOB_STATES["dead"][0], t.series.dead, t.dead_in_window, None),
        ):
            rates.append(f" {glyph} {label:<10}")
            rates.append(spark(series, width))
            rates.append(f" {total:>7,}")
            if per_min is not None:
                rates.append(f"  {per_min:,.1f}/min")
            rates.append("\n")
        rt = t.run_time
        rates.append(
            f" run time: mean {seconds(rt.mean_seconds)}"
            f", p95 {seconds(rt.p95_seconds)}"
            f" over {rt.samples:,} completed",
            style="dim",
        )
        return rates

    def action_window(self) -> None:
        """w: 5 min, 1 h, 24 h, then the half hour again."""
        self.window = next_window(self.window)
        label = self.window.label if self.window is not None else "half hour (the stats' own)"
        self.notify(f"throughput over the last {label}", title="Overview")
        self.reload()

    def action_open(self) -> None:
        """Enter: what the highlighted alert is about, or the highlighted queue's jobs."""
        box = self.query_one("#alerts", OptionList)
        if box.has_focus and box.highlighted is not None:
            self._open_alert(box.highlighted)
            return
        table = self.query_one("#queues", LiveTable)
        if table.current_key is not None:
            self.console.show_jobs(f"queue:{quote(table.current_key)}")

    # -- p: resume a paused queue --------------------------------------------------------------
    def _paused(self) -> list[QueueStats]:
        return [q for q in self._stats.queues if q.paused] if self._stats is not None else []

    def can(self, action: str) -> bool | None:
        if action == "resume_paused":
            return True if self._paused() else None
        return True

    def reason(self, action: str, parameters: tuple[object, ...]) -> str | None:
        if action == "resume_paused" and self._stats is not None and not self._paused():
            return "no queue is paused"
        return None

    def action_resume_paused(self) -> None:
        paused = self._paused()
        if len(paused) == 1:
            toggle_pause(self, paused[0])
            return
        by_name = {q.name: q for q in paused}

        def picked(name: str | None) -> None:
            if name is not None and name in by_name:
                toggle_pause(self, by_name[name])

        choices = []
        for q in paused:
            label = ident(q.name, limit=40)
            if q.pause_reason:
                label.append(": ").append_text(one_line(q.pause_reason, limit=60))
            choices.append((q.name, label))
        self.app.push_screen(PickScreen("Resume which paused queue?", choices), picked)

    def _open_alert(self, index: int) -> None:
        if not 0 <= index < len(self._alerts):
            return
        alert = self._alerts[index]
        if alert.queue is not None:
            self.console.show_queue(alert.queue)
        elif alert.jobs_filter:
            self.console.show_jobs(alert.jobs_filter)
        elif alert.screen:
            self.console.action_go(alert.screen)

    @on(OptionList.OptionSelected, "#alerts")
    def _alert_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self._open_alert(event.option_index)

