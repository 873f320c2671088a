"""Workers and drain (key 5): load, heartbeat, and for a draining worker the countdown to its
cutoff and which in-flight jobs will be interrupted."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.widgets import DataTable, Static

from forklift import JobNotFound
from forklift.ops import JobSummary, Operator, Stats, WorkerInfo
from forklift_console.screens.base import ConsoleScreen
from forklift_console.screens.listing import FILTER_KEY, open_filter
from forklift_console.screens.overview import OverviewData, fetch_overview
from forklift_console.widgets.filterbar import FilterLine
from forklift_console.widgets.table import Column, LiveTable, Row
from forklift_console.widgets.text import (
    age,
    badge,
    duration,
    ident,
    idents,
    plural,
    seconds,
    stamp,
    style_of,
    worker_state,
)


def worker_word(w: WorkerInfo) -> str:
    return "stale" if w.stale else w.state


@dataclass(frozen=True)
class WorkersData:
    overview: OverviewData
    #: Progress of the jobs in flight on draining workers (job id -> {done, total, note}).
    progress: dict[int, dict[str, Any]]
    #: Workers that exited recently (the leader prunes them a day after), newest exit first.
    exited: list[WorkerInfo] = field(default_factory=list)


#: How a worker exited, in words (``exit_reason``).
EXITS = {
    "drained": "drained: finished or released its jobs and exited",
    "lease_lost": "drained after losing some of its leases",
    "killed": "killed: its heartbeat stopped and the leader marked it exited",
}


def exited_state() -> Text:
    return badge("○", "exited", "state-idle")


def fetch_workers(op: Operator) -> WorkersData:
    overview = fetch_overview(op)
    # Read after the overview's snapshot: a worker that exits in between is in both, and one
    # row per worker (the live one, until the next refresh) keeps the list from failing.
    live = {w.id for w in overview.stats.workers}
    exited = [w for w in op.workers() if w.state == "exited" and w.id not in live]
    draining = {w.id for w in overview.stats.workers if w.state == "draining"}
    progress: dict[int, dict[str, Any]] = {}
    for j in overview.running:
        if j.worker_id in draining:
            with contextlib.suppress(JobNotFound):
                p = op.job(j.id).job.progress
                if p:
                    progress[j.id] = p
    return WorkersData(overview, progress, exited)


def fate(
    job: JobSummary,
    w: WorkerInfo,
    stats: Stats,
    progress: dict[str, Any] | None,
    now: datetime,
) -> Text:
    """For a job on a draining worker: will it finish before the cutoff? Judged by its own
    progress when it reports some (its pace so far), else by its queue's p95 run time."""
    remaining = w.drain_remaining_seconds
    if remaining is None:
        return Text("")
    if remaining <= 0:
        return Text("⚠ interrupted now: the cutoff passed", style=style_of("state-dead"))
    elapsed = (now - job.attempted_at).total_seconds() if job.attempted_at else 0.0
    done = float((progress or {}).get("done") or 0)
    total = float((progress or {}).get("total") or 0)
    if done > 0 and total > done and elapsed > 0:
        left = elapsed * (total - done) / done
        pace = f"{done:g}/{total:g} done, ~{duration(left)} to go"
        if left > remaining:
            return Text(f"⚠ will be interrupted ({pace})", style=style_of("state-dead"))
        return Text(f"✔ should finish ({pace})", style=style_of("state-completed"))
    q = stats.queue(job.queue)
    p95 = q.run_time.p95_seconds if q is not None else None
    if p95 is not None and elapsed < p95:
        left = p95 - elapsed
        if left > remaining:
            return Text(
                f"⚠ will be interrupted (queue p95 {seconds(p95)})", style=style_of("state-dead")
            )
        return Text(f"✔ should finish (queue p95 {seconds(p95)})", style=style_of("state-completed"))
    return Text(f"? interrupted unless done in {duration(remaining)}", style=style_of("state-warn"))


class WorkersScreen(ConsoleScreen[WorkersData]):
    MODE = "workers"
    HELP = (
        "Every registered worker: state (running, draining, or stale when its heartbeat is older"
        " than a minute), host and pid, queues, slots in use, heartbeat age. A draining worker"
        " claims nothing new; its in-flight jobs get until the cutoff to finish and are then"
        " interrupted and released to retry. The lower pane lists the highlighted worker's"
        " in-flight jobs and, while it drains, which of them will likely be interrupted."
        " Workers that exited in the last day stay listed below the others: when, and how"
        " (drained, lease lost, killed)."
    )
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "open", "Its jobs"),
        Binding("d", "drain", "Drain (demo)"),
        FILTER_KEY,
    ]
    action_focus_filter = open_filter

    def __init__(self) -> None:
        super().__init__()
        self._data: WorkersData | None = None
        self._workers: dict[str, WorkerInfo] = {}
        self._queues_width = 16

    def compose_body(self) -> ComposeResult:
        with Vertical(id="body"):
            yield Static(id="info")
            yield FilterLine("workers", "workers")
            yield LiveTable(
                [
                    Column("state", "State", 10),
                    Column("queues", "Queues", self._queues_column()),
                    Column("slots", "Slots", 6),
                    Column("beat", "Beat", 6),
                    Column("drain", "Cutoff", 8),
                    Column("id", "Worker (host:pid:id)", None),
                ],
                id="workers",
            )
            yield Static(id="inflight")

    def _queues_column(self) -> int:
        """17.13: the queues a worker listens on were cut at 16 characters at 120 columns
        with room to spare; the wide layout gives them twice that."""
        self._queues_width = 16 if self.is_narrow() else 32
        return self._queues_width

    def fetch(self, op: Operator) -> WorkersData:
        return fetch_workers(op)

    def show(self, data: WorkersData) -> None:
        self._data = data
        stats = data.overview.stats
        self._workers = {w.id: w for w in stats.workers}
        rows: list[Row] = []
        for w in stats.workers:
            cutoff = "–"
            if w.state == "draining" and w.drain_remaining_seconds is not None:
                r = w.drain_remaining_seconds
                cutoff = f"in {duration(r)}" if r > 0 else "passed"
            rows.append(
                (
                    w.id,
                    [
                        worker_state(worker_word(w)),
                        idents(w.queues, limit=self._queues_width),
                        f"{stats.held_by(w.id)}/{w.slots}",
                        duration(w.heartbeat_age_seconds),
                        cutoff,
                        ident(w.id, limit=60).append(" (leader)" if w.leader else ""),
                    ],
                )
            )
        now = self.console.now()
        for w in data.exited:
            self._workers[w.id] = w
            how = (w.exit_reason or "exited").replace("_", " ")
            rows.append(
                (
                    w.id,
                    [
                        exited_state(),
                        idents(w.queues, limit=self._queues_width),
                        f"–/{w.slots}",
                        "–",
                        "–",
                        ident(w.id, limit=60).append(
                            f" · exited {age(w.exited_at, now)} ago, {how}", style="dim"
                        ),
                    ],
                )
            )
        self.query_one("#workers", LiveTable).sync(rows)
        t = stats.totals
        info = Text(
            f"{plural(t.live_workers, 'live worker')}, {t.draining_workers} draining,"
            f" {t.workers - t.live_workers} stale · {t.in_use}/{t.slots} slots in use"
        )
        if data.exited:
            info.append(f" · {len(data.exited):,} exited in the last day", style="dim")
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
            (j for j in data.overview.running if j.worker_id == w.id),
            key=lambda j: (j.attempted_at or now, j.id),
        )
        text = Text()
        if w.state == "exited":
            text.append_text(exited_state())
            text.append(" ")
            text.append_text(ident(w.id, limit=60))
            text.append(f" on {w.host} pid {w.pid} · ran from {stamp(w.started_at, now)}")
            text.append(f"\nExited {age(w.exited_at, now)} ago ({stamp(w.exited_at, now)}): ",
                        style="bold")
            reason = w.exit_reason or ""
            text.append(EXITS.get(reason, reason.replace("_", " ") or "no reason recorded"))
            box.update(text)
            return
        text.append_text(worker_state(worker_word(w)))
        text.append(" ")
        text.append_text(ident(w.id, limit=60))
        text.append(f" on {w.host} pid {w.pid} · started {age(w.started_at, now)} ago")
        if w.state == "draining" and w.drain_remaining_seconds is not None:
            r = w.drain_remaining_seconds
            text.append("\n")
            if r > 0:
                text.append(f"DRAINING: cutoff in {duration(r)}", style="bold reverse")
                text.append(". It claims nothing new; what still runs at the cutoff is"
                            " interrupted.")
            else:
                text.append("DRAINING: cutoff passed", style="bold reverse")
                text.append(". Its jobs are interrupted and released to retry.")
        text.append(f"\nIn flight ({len(jobs)}), running for:\n", style="bold")
        if not jobs:
            text.append("  none\n", style="dim")
        width = self.app.size.width - 2
        for j in jobs:
            elapsed = (now - j.attempted_at).total_seconds() if j.attempted_at else None
            line = Text(f"{j.id:>8} ")
            line.append_text(ident(j.kind, limit=20))
            line.append(f" {duration(elapsed):>6} ")
            if w.state == "draining":
                line.append_text(fate(j, w, data.overview.stats, data.progress.get(j.id), now))
            line.truncate(width, overflow="ellipsis")
            text.append_text(line)
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
            w = self.selected()
            return True if w is not None and w.state != "exited" else None
        return True

    def reason(self, action: str, parameters: tuple[object, ...]) -> str | None:
        w = self.selected()
        if w is None:
            return "no worker is registered"
        if action == "drain":
            if w.state == "draining":
                return "that worker is already draining"
            if w.state == "exited":
                return "that worker has exited"
            return ("d drains only the demo's own workers; drain a real worker with"
                    f" SIGTERM (kill -TERM {w.pid} on {w.host})")
        if w.state == "exited":
            return "that worker has exited: it runs nothing"
        return None

    def action_open(self) -> None:
        w = self.selected()
        if w is not None:
            self.console.show_jobs("state:running", came_from="workers")

    def action_drain(self) -> None:
        w, demo = self.selected(), self.console.demo
        if w is None or demo is None:
            return
        self.notify(demo.drain(w.id), title="Drain")
        self.reload()
