"""Schedules (key 8): every cron schedule with its next and last run and the last run's outcome.
``p`` pauses or resumes the highlighted schedule, ``n`` runs it now (confirmed), enter lists its
kind's jobs. Every action is audited by the operator API."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.widgets import DataTable, Static

from forklift.ops import Operator
from forklift.ops.runbook import command
from forklift.ops.schedules import RunNow, ScheduleInfo
from forklift_console.plan import Plan
from forklift_console.screens.base import ConsoleScreen
from forklift_console.screens.listing import FILTER_KEY, open_filter
from forklift_console.widgets.filterbar import FilterLine, quote
from forklift_console.widgets.table import Cell, Column, LiveTable
from forklift_console.widgets.text import (
    NONE,
    ident,
    job_state,
    one_line,
    plain,
    plural,
    stamp,
    until,
)


def schedule_state(s: ScheduleInfo) -> Text:
    return Text("⏸ paused", style="yellow") if s.paused else Text("▶ active", style="green")


def outcome(s: ScheduleInfo) -> Text:
    if s.last_outcome is None:
        return Text(NONE, style="dim")
    text = job_state(s.last_outcome) if s.last_outcome != "pruned" else Text("pruned", style="dim")
    if s.last_manual:
        text.append(" (manual)", style="dim")
    return text


class SchedulesScreen(ConsoleScreen[list[ScheduleInfo]]):
    MODE = "schedules"
    LAYOUT_TABLE = "schedules"
    HELP = (
        "One row per cron schedule: active or paused, its cron expression and time zone, when it"
        " runs next (overdue when no worker leads), when it last ran and how that job ended."
        " p pauses or resumes it (ticks missed while paused are not run later), n enqueues its"
        " job once now (asks first), enter lists its kind's jobs."
    )
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "open", "Its jobs"),
        Binding("p", "toggle_pause", "Pause/resume"),
        Binding("n", "run_now", "Run now"),
        FILTER_KEY,
    ]
    action_focus_filter = open_filter
    DEFAULT_CSS = """
    SchedulesScreen #schedules {
        height: 1fr;
        min-height: 4;
    }
    """

    def __init__(self) -> None:
        super().__init__()
        self._by_name: dict[str, ScheduleInfo] = {}

    def compose_body(self) -> ComposeResult:
        with Vertical(id="body"):
            yield FilterLine("schedules", "schedules")
            yield LiveTable(self.laid_out_columns(), id="schedules")
            yield Static(id="detail")

    def layout_columns(self, narrow: bool) -> list[Column]:
        """At 80 columns the zone and the last run's time give way (the detail below has
        both), so the next run and the last outcome stay in view."""
        return [
            Column("state", "State", 9),
            Column("name", "Schedule", None),
            Column("cron", "Cron", 14),
            *([] if narrow else [Column("tz", "Zone", 14)]),
            Column("next", "Next", 10),
            *([] if narrow else [Column("last", "Last run", 19)]),
            Column("outcome", "Outcome", 14 if narrow else 20),
        ]

    def layout_cells(self, key: str, narrow: bool) -> dict[str, Cell]:
        s, now = self._by_name[key], self.console.now()
        return {
            "state": schedule_state(s),
            "name": ident(s.name, limit=60),
            "cron": one_line(s.cron, limit=14),
            "tz": one_line(s.tz, limit=14),
            "next": NONE if s.next_at is None else until(s.next_at, now),
            "last": stamp(s.last_run_at, now),
            "outcome": outcome(s),
        }

    def fetch(self, op: Operator) -> list[ScheduleInfo]:
        return op.schedules()

    def show(self, data: list[ScheduleInfo]) -> None:
        self._by_name = {s.name: s for s in data}
        self.sync_layout([s.name for s in data])
        self._paint_detail()

    def selected(self) -> ScheduleInfo | None:
        key = self.query_one("#schedules", LiveTable).current_key
        return self._by_name.get(key) if key is not None else None

    @on(DataTable.RowHighlighted, "#schedules")
    def _highlighted(self) -> None:
        self._paint_detail()

    def _paint_detail(self) -> None:
        box = self.query_one("#detail", Static)
        s = self.selected()
        if s is None:
            box.update(Text("No schedules recorded: declare one with @app.periodic(...) above"
                            " @app.job; a worker records it when it leads.", style="dim"))
            return
        now = self.console.now()
        text = schedule_state(s)
        text.append(" ")
        text.append_text(ident(s.name, limit=60))
        text.append(" → kind ")
        text.append_text(ident(s.kind, limit=40))
        text.append(" on queue ")
        text.append_text(ident(s.queue, limit=30))
        text.append(f"\ncron {s.cron} in {s.tz} · missed ticks: ")
        text.append("latest only" if s.policy == "skip" else f"each, up to {s.max_catch_up}")
        if s.next_at is not None:
            overdue = " (overdue: no worker leads?)" if s.next_at <= now else ""
            text.append(f" · next {stamp(s.next_at, now)} UTC, {until(s.next_at, now)}{overdue}")
        if s.paused:
            text.append("\npaused")
            if s.paused_by:
                text.append(" by ")
                text.append_text(ident(s.paused_by, limit=40))
            if s.paused_at is not None:
                text.append(f" {until(s.paused_at, now)}")
            if s.pause_reason:
                text.append(": “")
                text.append_text(one_line(s.pause_reason, limit=120))
                text.append("”")
        if s.last_job_id is not None:
            text.append(f"\nlast run {stamp(s.last_run_at, now)}: job {s.last_job_id} ")
            text.append_text(outcome(s))
        text.append("\nargs ")
        text.append_text(plain(s.args, limit=200))
        box.update(text)

    # -- actions ------------------------------------------------------------------------------
    def can(self, action: str) -> bool | None:
        if action in ("open", "toggle_pause", "run_now"):
            return True if self.selected() is not None else None
        return True

    def action_open(self) -> None:
        s = self.selected()
        if s is not None:
            self.console.show_jobs(f"kind:{quote(s.kind)}", came_from="schedules")

    def action_toggle_pause(self) -> None:
        s = self.selected()
        if s is None:
            return
        name, verb = s.name, "resume" if s.paused else "pause"
        self.console.propose(
            Plan(
                verb=verb.capitalize(),
                noun="schedule",
                count=1,
                ids=(name,),
                cli=command("schedules", verb, args=(name,)),
                run=(lambda op: op.resume_schedule(name)) if s.paused
                else (lambda op: op.pause_schedule(name)),
                destructive=False,
                report=_toggled,
            )
        )

    def action_run_now(self) -> None:
        s = self.selected()
        if s is None:
            return
        name = s.name
        self.console.propose(
            Plan(
                verb="Run now",
                noun="schedule",
                count=1,
                ids=(name,),
                cli=command("schedules", "run-now", args=(name,)),
                run=lambda op: op.run_schedule_now(name),
                report=_ran,
            )
        )


def _toggled(info: ScheduleInfo) -> str:
    if info.paused:
        return f"schedule {info.name} paused: its ticks pass without a job until resumed"
    return f"schedule {info.name} resumed: it runs from its next tick"


def _ran(ran: RunNow) -> str:
    return f"schedule {ran.schedule}: {plural(1, 'job')} enqueued (job {ran.job_id}) on {ran.queue}"
