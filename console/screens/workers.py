"""Workers and drain (key 5): load, heartbeat, and for a draining worker the countdown to its
cutoff and which in-flight jobs will be interrupted."""

from __future__ import annotations

from datetime import datetime
from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.widgets import DataTable, Static

from forklift.console.screens.base import ConsoleScreen
from forklift.console.screens.overview import OverviewData, fetch_overview
from forklift.console.widgets.table import Column, LiveTable, Row
from forklift.console.widgets.text import (
    age,
    duration,
    job_state,
    one_line,
    plural,
    worker_state,
)
from forklift.ops import JobSummary, Operator, Stats, WorkerInfo


def worker_word(w: WorkerInfo) -> str:
    return "stale" if w.stale else w.state


def fate(job: JobSummary, w: WorkerInfo, stats: Stats, now: datetime) -> Text:
    """For a job on a draining worker: will it finish before the cutoff, going by the p95 run
    time of its queue over the stats window?"""
    remaining = w.drain_remaining_seconds
    if remaining is None:
        return Text("")
    if remaining <= 0:
        return Text("⚠ interrupting now (cutoff passed)", style="bold red")
    elapsed = (now - job.attempted_at).total_seconds() if job.attempted_at else 0.0
    q = stats.queue(job.queue)
    p95 = q.run_time.p95_seconds if q is not None else None
    if p95 is None:
        return Text(f"? interrupted unless done within {duration(remaining)}", style="yellow")
    if elapsed >= p95:
        return Text(
            f"⚠ likely interrupted: already past its queue's p95 run time ({duration(p95)})",
            style="bold red",
        )
    if p95 - elapsed > remaining:
        return Text(
            f"⚠ will be interrupted: needs ~{duration(p95 - elapsed)} more (p95)",
            style="bold red",
        )
    return Text(f"✔ expected to finish (p95 {duration(p95)})", style="green")


class WorkersScreen(ConsoleScreen[OverviewData]):
    MODE = "workers"
    HELP = (
        "Every registered worker: state (running, draining, or stale when its heartbeat is older"
        " than a minute), host and pid, queues, slots in use, heartbeat age. A draining worker"
        " claims nothing new; its in-flight jobs get until the cutoff to finish and are then"
        " interrupted and released to retry. The lower pane lists the highlighted worker's"
        " in-flight jobs and, while it drains, which of them will likely be interrupted."
    )
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "open", "Its jobs"),
        Binding("d", "drain", "Drain (demo)"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self._data: OverviewData | None = None
        self._workers: dict[str, WorkerInfo] = {}

    def compose_body(self) -> ComposeResult:
        with Vertical(id="body"):
            yield Static(id="info")
            yield LiveTable(
                [
                    Column("state", "State", 10),
                    Column("host", "Host:pid", 18),
                    Column("queues", "Queues", 16),
                    Column("slots", "Slots", 7),
                    Column("beat", "Beat", 6),
                    Column("drain", "Cutoff", 9),
                    Column("id", "Worker id", None),
                ],
                id="workers",
            )
            yield Static(id="inflight")

    def fetch(self, op: Operator) -> OverviewData:
        return fetch_overview(op)

    def show(self, data: OverviewData) -> None:
        self._data = data
        self._workers = {w.id: w for w in data.stats.workers}
        rows: list[Row] = []
        for w in data.stats.workers:
            cutoff = "–"
            if w.state == "draining" and w.drain_remaining_seconds is not None:
                r = w.drain_remaining_seconds
                cutoff = f"in {duration(r)}" if r > 0 else "passed"
            rows.append(
                (
                    w.id,
                    [
                        worker_state(worker_word(w)),
                        one_line(f"{w.host}:{w.pid}", limit=18),
                        one_line(",".join(w.queues), limit=16),
                        f"{w.in_use}/{w.slots}",
                        duration(w.heartbeat_age_seconds),
                        cutoff,
                        one_line(w.id + (" (leader)" if w.leader else ""), limit=60),
                    ],
                )
            )
        self.query_one("#workers", LiveTable).sync(rows)
        t = data.stats.totals
        info = Text(
            f"{plural(t.live_workers, 'live worker')}, {t.draining_workers} draining,"
            f" {t.workers - t.live_workers} stale · {t.in_use}/{t.slots} slots in use"
        )
        self.query_one("#info", Static).update(info)
        self._paint_inflight()

    def selected(self) -> WorkerInfo | None:
        key = self.query_one("#workers", LiveTable).current_key
        return self._workers.get(key) if key is not None else None

    @on(DataTable.RowHighlighted, "#workers")
    def _highlighted(self) -> None:
        self._paint_inflight()

    def _paint_inflight(self) -> None:
        box = self.query_one("#inflight", Static)
        w = self.selected()
        data = self._data
        if w is None or data is None:
            box.update(Text("No workers registered: start one with `forklift worker`.", style="dim"))
            return
        now = self.console.now()
        jobs = sorted(
            (j for j in data.running if j.worker_id == w.id),
            key=lambda j: (j.attempted_at or now, j.id),
        )
        text = Text()
        text.append_text(worker_state(worker_word(w)))
        text.append(" ")
        text.append_text(one_line(f"{w.host}:{w.pid}", limit=40))
        text.append(f" · started {age(w.started_at, now)} ago")
        if w.state == "draining" and w.drain_remaining_seconds is not None:
            r = w.drain_remaining_seconds
            text.append(" · ")
            if r > 0:
                text.append(f"DRAINING: cutoff in {duration(r)}", style="bold reverse")
                text.append(" — claims nothing new; jobs still running then are interrupted")
            else:
                text.append("DRAINING: cutoff passed", style="bold reverse")
                text.append(" — interrupting its jobs and releasing them to retry")
        text.append(f"\nIn flight ({len(jobs)}):\n", style="bold")
        if not jobs:
            text.append("  none\n", style="dim")
        for j in jobs:
            elapsed = (now - j.attempted_at).total_seconds() if j.attempted_at else None
            text.append(f"  {j.id:>8}  ")
            text.append_text(job_state(j.state))
            text.append("  ")
            text.append_text(one_line(j.kind, limit=24))
            text.append(f"  running {duration(elapsed)}  ")
            if w.state == "draining":
                text.append_text(fate(j, w, data.stats, now))
            text.append("\n")
        box.update(text)

    # -- actions ------------------------------------------------------------------------------
    def can(self, action: str) -> bool | None:
        if action == "drain":
            demo = self.console.demo
            if demo is None:
                return False  # a demo-only action: hidden everywhere else
            w = self.selected()
            return True if w is not None and w.state == "running" and demo.owns(w.id) else None
        if action == "open":
            return True if self.selected() is not None else None
        return True

    def action_open(self) -> None:
        w = self.selected()
        if w is not None:
            self.console.show_jobs("state:running", came_from="workers")

    @on(DataTable.RowSelected, "#workers")
    def _selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_open()

    def action_drain(self) -> None:
        w, demo = self.selected(), self.console.demo
        if w is None or demo is None:
            return
        self.notify(demo.drain(w.id), title="Drain")
        self.reload()
