"""Queues (key 2): depth by state, pickup lag, throughput; pause and resume, the concurrency
limit, prune; ``/`` filter, ``s`` sort; drill down."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.widgets import DataTable, Static

from forklift.ops import (
    Explanation,
    Operator,
    PruneReport,
    QueueInfo,
    QueueNotFound,
    QueueStats,
    Stats,
)
from forklift.ops.display import show_id
from forklift_console.plan import Plan
from forklift_console.screens.base import ConsoleScreen
from forklift_console.screens.forms import (
    LimitAnswer,
    LimitScreen,
    PruneAnswer,
    PruneScreen,
    limit_cli,
)
from forklift_console.screens.insight import LAG_ALERT_SECONDS, queue_state, window_label
from forklift_console.screens.listing import FILTER_KEY, open_filter
from forklift_console.screens.pausing import toggle_pause
from forklift_console.widgets.filterbar import FilterLine, quote
from forklift_console.widgets.table import Column, LiveTable, Row
from forklift_console.widgets.text import (
    age,
    count,
    duration,
    ident,
    one_line,
    plural,
    seconds,
    spark,
    until,
)
from forklift_console.widgets.text import queue_state as queue_badge
from forklift_console.widgets.window_chart import ChartWindow, chart_text, next_window

SPARK_POINTS = 30
COLUMNS: tuple[Column, ...] = (
    Column("state", "State", 11),  # "∅ no worker" whole
    Column("queue", "Queue", 12),
    Column("available", "Avail", 6),
    Column("running", "Run/lim", 8),  # "37/30w": a limit, or the workers' slots
    Column("retryable", "Retry", 5),
    Column("dead", "Dead", 5),
    Column("lag", "Lag", 6),
    Column("spark", "Done/min", None),
)


@dataclass(frozen=True)
class QueuesData:
    stats: Stats
    #: "Why is this queue (not) moving?" for the queue highlighted when the data was read.
    why: Explanation | None
    #: The highlighted queue the fetch saw.
    asked: str | None
    #: The stats over the window chosen with w, for the highlighted queue's chart (else None).
    chart: Stats | None = None


class QueuesScreen(ConsoleScreen[QueuesData]):
    MODE = "queues"
    HELP = (
        "One row per queue: its state, jobs waiting (available), running against the queue's"
        " concurrency limit (without one, against the slots of the live workers listening on"
        " it, marked w: 37/30w), waiting to retry, dead; the pickup lag (how long the oldest"
        f" available job has waited; over {LAG_ALERT_SECONDS:g}s the queue shows 'lagging') and"
        " completed jobs per minute. A queue past its ceiling (forklift queues ceiling) shows"
        " 'full': producers' enqueues are refused, wait or shed as their kind declares until"
        " workers bring it under; the detail below names the ceiling. Below: the highlighted queue's pause, scheduled jobs,"
        " workers, run times and why it is (not) moving. p pauses (asks why) or resumes it;"
        " l sets its concurrency limit (none lifts it); P prunes finished jobs older than an"
        " age (counted first, the count typed to confirm); enter shows its jobs."
        " / filters the rows (state:paused lag:>60 mail), s sorts by the next column, S"
        " reverses. w charts the highlighted queue's throughput below over the last 5 min,"
        " 1 h or 24 h (w again: the next window, then none)."
    )
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "open", "Jobs"),
        Binding("p", "toggle_pause", "Pause/resume"),
        Binding("l", "limit", "Limit"),
        Binding("P", "prune", "Prune", key_display="P"),
        Binding("w", "window", "Chart window", show=False),
        FILTER_KEY,
    ]
    action_focus_filter = open_filter
    ROW_ACTIONS = ConsoleScreen.ROW_ACTIONS | {"limit"}

    def __init__(self) -> None:
        super().__init__()
        self._stats: Stats | None = None
        self._why: Explanation | None = None
        self._want: str | None = None
        #: A queue to put the cursor on once its row is shown (:meth:`show_queue`).
        self._place: str | None = None
        #: The window charted for the highlighted queue (w), or None.
        self.window: ChartWindow | None = None
        self._chart: Stats | None = None

    def compose_body(self) -> ComposeResult:
        with Vertical(id="body"):
            yield FilterLine("queues", "queues")
            yield LiveTable(COLUMNS, id="queues")
            yield Static(id="detail")

    def fetch(self, op: Operator) -> QueuesData:
        stats = op.stats()
        name = self._want if self._want and stats.queue(self._want) else None
        if name is None and stats.queues:
            name = stats.queues[0].name
        why = None
        if name is not None:
            with contextlib.suppress(QueueNotFound):
                why = op.explain_queue(name)
        window = self.window
        chart = (op.stats.get(window=window.window, bucket=window.bucket, cached=False)
                 if window is not None else None)
        return QueuesData(stats, why, self._want, chart)

    def show(self, answer: QueuesData) -> None:
        data = answer.stats
        self._stats, self._why, self._chart = data, answer.why, answer.chart
        rows: list[Row] = []
        table = self.query_one("#queues", LiveTable)
        points = min(SPARK_POINTS, table.flex_width())  # the newest points, as many as fit
        for q in data.queues:
            rows.append(
                (
                    q.name,
                    [
                        queue_badge(queue_state(q)),
                        ident(q.name, limit=12),
                        count(q.counts.get("available", 0)),
                        run_bound(q, data),
                        count(q.counts.get("retryable", 0)),
                        count(q.counts.get("dead", 0)),
                        duration(q.pickup_lag_seconds) if q.pickup_lag_seconds is not None else "–",
                        spark(q.series.completed, points),
                    ],
                )
            )
        table.sync(rows)
        if self._place is not None and table.move_to_key(self._place):
            self._place = None
        self._show_detail()
        if answer.asked != self._want:
            self.call_after_refresh(self.reload)  # the highlight moved while this was read

    def show_queue(self, name: str) -> None:
        """Put the cursor on queue ``name``: now if its row is shown, else when it is."""
        self._want = self._place = name
        if self.is_mounted:
            table = self.query_one("#queues", LiveTable)
            if table.move_to_key(name):
                self._place = None
            table.focus()

    def selected(self) -> QueueStats | None:
        key = self.query_one("#queues", LiveTable).current_key
        if key is None or self._stats is None:
            return None
        return self._stats.queue(key)

    @on(DataTable.RowHighlighted, "#queues")
    def _highlighted(self) -> None:
        self._want = self.query_one("#queues", LiveTable).current_key
        self._show_detail()
        if self._want is not None and (self._why is None or self._why.queue != self._want):
            self.reload()  # explain the newly highlighted queue now, not at the next tick

    def _show_detail(self) -> None:
        q = self.selected()
        box = self.query_one("#detail", Static)
        if q is None or self._stats is None:
            box.update(Text("No queues yet: they appear with their first job.", style="dim"))
            return
        now = self.console.now()
        text = Text()
        text.append_text(queue_badge(queue_state(q)))
        text.append(" ")
        text.append_text(ident(q.name, limit=60))
        if q.paused:
            text.append(" — paused")
            if q.paused_by:
                text.append(" by ")
                text.append_text(ident(q.paused_by, limit=40))
            if q.paused_at:
                text.append(f" {age(q.paused_at, now)} ago")
            if q.pause_reason:
                text.append(": “")
                text.append_text(one_line(q.pause_reason, limit=120))
                text.append("”")
            if q.pause_expires_at:
                text.append(f"; resumes by itself {until(q.pause_expires_at, now)}")
        if q.ceiling is not None:
            text.append(f"\nCeiling: {q.ceiling}")
            if q.full_by is not None:
                text.append(f" — full (past its {q.full_by} ceiling): enqueues are refused,"
                            " wait or shed", style="bold")
            else:
                text.append(" — room")
        text.append("\n")
        text.append(
            f"{q.counts.get('scheduled', 0):,} scheduled · "
            f"{plural(q.workers, 'live worker')} listening, {plural(q.free_slots, 'free slot')} · "
            f"{window_label(self._stats)}: {q.completed:,} completed, {q.failed:,} failed, "
            f"{q.dead_in_window:,} dead"
        )
        why = self._why
        if why is not None and why.queue == q.name:
            text.append("\nWhy: ", style="bold")
            text.append_text(one_line("; ".join(r.text for r in why.reasons), limit=400))
        rt = q.run_time
        if rt.samples:
            text.append(
                f" · run time mean {seconds(rt.mean_seconds)}, p95 {seconds(rt.p95_seconds)}"
            )
        chart, window = self._chart, self.window
        if window is not None:
            text.append("\n")
            charted = chart.queue(q.name) if chart is not None else None
            if (chart is not None and charted is not None
                    and chart.window_seconds == window.window.total_seconds()):
                text.append_text(chart_text(charted.series, window, self.app.size.width - 2,
                                            what=f"Throughput, queue {show_id(q.name)}"))
            else:
                text.append(f"Throughput, the last {window.label}: loading…", style="dim")
        box.update(text)

    def action_window(self) -> None:
        """w: the highlighted queue's throughput over 5 min, 1 h, 24 h, then no chart."""
        self.window = next_window(self.window)
        self.notify(f"the highlighted queue's throughput over the last {self.window.label}"
                    if self.window is not None else "no throughput chart", title="Queues")
        self._show_detail()
        self.reload()

    # -- actions ------------------------------------------------------------------------------
    def can(self, action: str) -> bool | None:
        if action in ("toggle_pause", "open", "limit"):
            return True if self.selected() is not None else None
        return True

    def reason(self, action: str, parameters: tuple[object, ...]) -> str | None:
        if action in ("toggle_pause", "open", "limit"):
            return "no queue is shown" + (" (the filter hides them all)"
                                          if self.query_one(FilterLine).applied else "")
        return None

    def action_limit(self) -> None:
        q = self.selected()
        if q is None:
            return
        name = q.name

        def answered(answer: object) -> None:
            if not isinstance(answer, LimitAnswer):
                return
            limit, reason = answer.limit, answer.reason
            self.console.propose(
                Plan(
                    verb="Set limit", noun="queue", count=1, ids=(name,),
                    cli=limit_cli(name, limit, reason),
                    run=lambda op: op.set_concurrency(name, limit, reason=reason or None),
                    destructive=False,
                    report=_limited,
                )
            )

        self.app.push_screen(LimitScreen(name, q.concurrency), answered)

    def action_prune(self) -> None:
        def answered(answer: object) -> None:
            if isinstance(answer, PruneAnswer):
                kw = answer.kwargs()
                self.console.propose_checked(
                    "Prune", lambda op: op.prune(dry_run=True, **kw),
                    lambda report: _prune_plan(answer, report),
                )

        self.app.push_screen(PruneScreen(), answered)

    def action_open(self) -> None:
        q = self.selected()
        if q is not None:
            self.console.show_jobs(f"queue:{quote(q.name)}")

    def action_toggle_pause(self) -> None:
        q = self.selected()
        if q is not None:
            toggle_pause(self, q)


def run_bound(q: QueueStats, stats: Stats) -> str:
    """``running/limit``; without a queue limit the live workers' slots bound it, marked ``w``
    (``37/30w``: 37 running, 30 slots among the workers listening), never an unbounded ``∞``
    or a bare ``–`` beside a queue that cannot run more than its workers take."""
    running = q.counts.get("running", 0)
    if q.concurrency is not None:
        return f"{running}/{q.concurrency}"
    slots = sum(w.slots for w in stats.workers if w.live and q.name in w.queues)
    return f"{running}/{slots}w"


def _prune_plan(answer: PruneAnswer, report: PruneReport) -> Plan | str:
    """The confirmation after the dry run (its count is typed), or why there is none."""
    if not report.total:
        return "nothing is old enough to prune"
    kw = answer.kwargs()
    scope = ", ".join(
        f"{n:,} {state} finished over {answer.older_than[state]} ago"
        for state, n in report.deleted.items() if n
    )
    if report.more:
        scope += f" (the first {report.max_rows:,}; run it again for the rest)"
    # max_rows: never more than the count typed, even if more jobs aged since the count
    return Plan(
        verb="Prune", noun="finished job", count=report.total, scope=scope,
        cli=answer.cli(), run=lambda op: op.prune(max_rows=report.total, **kw),
        report=_pruned,
    )


def _pruned(r: PruneReport) -> str:
    parts = ", ".join(f"{n:,} {s}" for s, n in r.deleted.items())
    more = "; more remain: run it again" if r.more else ""
    return f"pruned {parts or 'nothing'}{more}"


def _limited(info: QueueInfo) -> str:
    limit = "no limit" if info.concurrency is None else f"at most {info.concurrency:,} running"
    return f"queue {show_id(info.name)}: {limit}, from the workers' next claim"
