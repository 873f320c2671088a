"""Kinds (``:kinds``): per queue and kind, how the work went in a recent window and what waits.

A batch kind shows its batch size after its name (``×100``: the most jobs one handler call
takes), a weighted kind its weight (``w3``: the most slots one of its jobs counted takes).
Completed and dead jobs in the window, the share that died, the share of attempts that failed
(retried or not), completed per minute, run time p50 and p95, and live now: waiting (available
and scheduled), running, retrying, and the live jobs of each payload version. ``w`` steps the
window (5 min, 1 h, 24 h: the Overview's); ``/`` filters, ``s`` sorts; ``enter`` lists the
kind's jobs. A thin view of ``Operator.kind_stats``.
"""

from __future__ import annotations

from datetime import timedelta
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.widgets import Static

from forklift.ops import Operator
from forklift.ops.holds import PauseInfo
from forklift.ops.kinds import KindRow, KindStats
from forklift_console.screens.base import ConsoleScreen
from forklift_console.screens.listing import FILTER_KEY, open_filter
from forklift_console.screens.workflow_actions import paused_words, toggle_kind_pause
from forklift_console.widgets.filterbar import FilterLine, quote
from forklift_console.widgets.table import Column, LiveTable, Row
from forklift_console.widgets.text import count, ident, seconds
from forklift_console.widgets.window_chart import WINDOWS as CHART_WINDOWS

#: The windows ``w`` steps through: the ones every other screen charts.
WINDOWS = tuple(w.window for w in CHART_WINDOWS)


def window_label(w: timedelta) -> str:
    """``5 min``, ``1 h``, ``24 h``."""
    minutes = w.total_seconds() / 60
    return f"{minutes:g} min" if minutes < 60 else f"{minutes / 60:g} h"


def _key(row: KindRow) -> str:
    return f"{row.queue}\x1f{row.kind}"


def kind_cell(r: KindRow) -> Text:
    """The kind, and after it a batch kind's batch size (``mail.send ×100``) or a weighted
    kind's weight (``export w3``): the figure stays whole, the name gives way."""
    size = "".join((f" ×{r.batch}" if r.batch is not None else "",
                    f" w{r.weight}" if r.weight is not None else ""))
    if not size:
        return ident(r.kind, limit=18)
    cell = ident(r.kind, limit=max(18 - len(size), 4))
    cell.append(size, style="dim")
    return cell


def cells(data: KindStats, r: KindRow) -> list[Text | str]:
    rate, attempts = r.failure_rate, r.attempt_failure_rate
    waiting = r.live.get("available", 0) + r.live.get("scheduled", 0)
    return [
        ident(r.queue, limit=10),
        kind_cell(r),
        count(r.completed),
        f"{data.per_minute(r):.1f}",
        count(r.dead),
        "–" if rate is None else f"{rate:.0%}",
        "–" if attempts is None else f"{attempts:.0%}",
        seconds(r.p50),
        seconds(r.p95),
        count(waiting),
        count(r.live.get("running", 0)),
        count(r.live.get("retryable", 0)),
    ]


def versions_line(data: KindStats) -> Text:
    """``payload versions: mail.send v1 3 · v2 10; ...`` for the kinds whose live jobs carry
    a version other than 1 (empty when none does): in words, so an operator reading it sees which
    old version has not drained yet."""
    shown = [(r.kind, r.versions_text) for r in data.rows if r.versions_text]
    if not shown:
        return Text("")
    line = Text("payload versions: ", style="bold")
    for i, (kind, text) in enumerate(shown):
        if i:
            line.append("; ")
        line.append_text(ident(kind, limit=30))
        line.append(f" {text}")
    return line


class KindsScreen(ConsoleScreen[KindStats]):
    MODE = "kinds"
    HELP = (
        "Per queue and kind (a batch kind with its batch size: ×100; a weighted kind with the"
        " most slots one of its jobs takes: w3), over the window shown"
        " (w: 5 min, 1 h, 24 h): completed and dead jobs,"
        " the share of finished jobs that died (Dead%), the share of attempts that failed,"
        " retried or not (Fail%), completed per minute, run time p50 and p95;"
        " and now: waiting (available and scheduled), running, retrying. Under the table,"
        " 'payload versions' lists the live jobs of each payload version of the kinds whose"
        " jobs carry a version other than 1 (mail.send v1 3 · v2 10): an old version has"
        " drained when it is no longer listed. / filters (kind:mail dead%:>10), s sorts, S"
        " reverses; enter lists the kind's jobs; p pauses the kind (none of its jobs starts,"
        " new ones included, until resumed) or resumes it. Paused kinds are named above the"
        " table."
    )
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "open", "Its jobs"),
        Binding("p", "toggle_pause", "Pause/resume kind", show=False),
        Binding("w", "window", "Window"),
        FILTER_KEY,
    ]
    action_focus_filter = open_filter

    def __init__(self) -> None:
        super().__init__()
        self.window = WINDOWS[1]
        self._rows: dict[str, KindRow] = {}
        #: the kinds' pauses in force, read with each refresh
        self._pauses: list[PauseInfo] = []

    def compose_body(self) -> ComposeResult:
        with Vertical(id="body"):
            yield Static(id="info")
            yield FilterLine("kinds", "kinds")
            yield Static(id="versions")
            yield LiveTable(
                [
                    Column("queue", "Queue", 10),
                    Column("kind", "Kind", 18),
                    Column("done", "Done", 8),
                    Column("rate", "/min", 7),
                    Column("dead", "Dead", 6),
                    Column("failed", "Dead%", 6),
                    Column("attempts", "Fail%", 6),
                    Column("p50", "p50", 7),
                    Column("p95", "p95", 7),
                    Column("waiting", "Waiting", 8),
                    Column("running", "Run", 5),
                    Column("retrying", "Retry", 6),
                ],
                id="kinds",
            )

    def on_mount(self) -> None:
        super().on_mount()
        self.query_one("#kinds", LiveTable).focus()

    def fetch(self, op: Operator) -> KindStats:
        self._pauses = [p for p in op.workflows.pauses() if p.target == "kind"]
        return op.kind_stats(window=self.window)

    def show(self, data: KindStats) -> None:
        if data.window_seconds != self.window.total_seconds():
            return  # an answer for the window the operator has since left
        self._rows = {_key(r): r for r in data.rows}
        rows: list[Row] = [(_key(r), cells(data, r)) for r in data.rows]
        self.query_one("#kinds", LiveTable).sync(rows)
        info = Text(f"{len(rows):,} queue/kind pairs · finished in the last"
                    f" {window_label(self.window)}", style="")
        info.append(" · w: another window", style="dim")
        info.append_text(paused_words(self._pauses))
        self.query_one("#info", Static).update(info)
        line = versions_line(data)
        versions = self.query_one("#versions", Static)
        versions.update(line)
        versions.display = bool(line.plain)  # no line at all while every job is version 1

    def action_window(self) -> None:
        self.window = WINDOWS[(WINDOWS.index(self.window) + 1) % len(WINDOWS)]
        self.notify(f"window: the last {window_label(self.window)}",
                    title="Kinds")
        self.reload()

    def selected(self) -> KindRow | None:
        key = self.query_one("#kinds", LiveTable).current_key
        return self._rows.get(key) if key is not None else None

    def can(self, action: str) -> bool | None:
        if action == "open":
            return True if self.selected() is not None else None
        return True

    def reason(self, action: str, parameters: tuple[object, ...]) -> str | None:
        return "no kind is shown" if action == "open" else None

    def action_toggle_pause(self) -> None:
        """p: pause the highlighted kind, or resume it if paused."""
        r = self.selected()
        if r is None:
            self.notify("highlight a kind first")
            return
        toggle_kind_pause(self, r.kind, r.kind in {p.name for p in self._pauses})

    def action_open(self) -> None:
        r = self.selected()
        if r is not None:
            self.console.show_jobs(f"queue:{quote(r.queue)} kind:{quote(r.kind)}", came_from=self.MODE)

