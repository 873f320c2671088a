"""Consumers (``:consumers``): each consumer's lag and health: its state, its cursor and how long
since the cursor moved, items done, its failure streak and when the next try is due. ``p``
pauses or resumes the highlighted consumer, enter lists its runs. Moving a cursor is a
``forklift consumers reset-cursor`` (it takes a value). Every action is audited by the
operator API."""

from __future__ import annotations

import json
from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.widgets import DataTable, Static

from forklift.ops import Operator
from forklift.ops.consumers import ConsumerInfo
from forklift.ops.runbook import command
from forklift_console.plan import Plan
from forklift_console.screens.base import ConsoleScreen
from forklift_console.screens.listing import FILTER_KEY, open_filter
from forklift_console.widgets.filterbar import FilterLine, quote
from forklift_console.widgets.table import Cell, Column, LiveTable
from forklift_console.widgets.text import NONE, age, ident, one_line, stamp, until

_STATES = {
    "paused": ("⏸ paused", "yellow"),
    "backing_off": ("✖ backing off", "red"),
    "failing": ("✖ failing", "red"),
    "running": ("▶ running", "green"),
    "waiting": ("… waiting", ""),
    "idle": ("✓ idle", "dim"),
}


def consumer_state(c: ConsumerInfo) -> Text:
    label, style = _STATES.get(c.state, (c.state, ""))
    return Text(label, style=style)


def cursor_text(c: ConsumerInfo, limit: int = 24) -> Text:
    if c.cursor is None:
        return Text("start", style="dim")
    return one_line(json.dumps(c.cursor), limit=limit)


def streak(c: ConsumerInfo) -> Text:
    if not c.failures:
        return Text("0", style="dim")
    return Text(f"{c.failures} in a row", style="red")


class ConsumersScreen(ConsoleScreen[list[ConsumerInfo]]):
    MODE = "consumers"
    LAYOUT_TABLE = "consumers"
    HELP = (
        "One row per consumer: running, waiting for its run, idle (caught up), paused, failing"
        " or backing off after failures; its cursor and how long since it moved (how far"
        " behind it may be), the items it has done, and its failure streak with the next try."
        " p pauses or resumes it (a batch in flight finishes first), enter lists its runs."
    )
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "open", "Its runs"),
        Binding("p", "toggle_pause", "Pause/resume"),
        FILTER_KEY,
    ]
    action_focus_filter = open_filter
    DEFAULT_CSS = """
    ConsumersScreen #consumers {
        height: 1fr;
        min-height: 4;
    }
    """

    def __init__(self) -> None:
        super().__init__()
        self._by_name: dict[str, ConsumerInfo] = {}

    def compose_body(self) -> ComposeResult:
        with Vertical(id="body"):
            yield FilterLine("consumers", "consumers")
            yield LiveTable(self.laid_out_columns(), id="consumers")
            yield Static(id="detail")

    def layout_columns(self, narrow: bool) -> list[Column]:
        """At 80 columns the items done and the next try give way (the detail has both)."""
        return [
            Column("state", "State", 14),
            Column("name", "Consumer", None),
            Column("cursor", "Cursor", 14 if narrow else 24),
            Column("age", "Moved", 9),
            *([] if narrow else [Column("items", "Items", 10)]),
            Column("failures", "Failures", 11),
            *([] if narrow else [Column("next", "Next try", 12)]),
        ]

    def layout_cells(self, key: str, narrow: bool) -> dict[str, Cell]:
        c, now = self._by_name[key], self.console.now()
        return {
            "state": consumer_state(c),
            "name": ident(c.name, limit=60),
            "cursor": cursor_text(c, 14 if narrow else 24),
            "age": age(c.cursor_at, now),
            "items": f"{c.items_done:,}",
            "failures": streak(c),
            "next": until(c.retry_at, now) if c.state == "backing_off" else NONE,
        }

    def fetch(self, op: Operator) -> list[ConsumerInfo]:
        return op.consumers.list()

    def show(self, data: list[ConsumerInfo]) -> None:
        self._by_name = {c.name: c for c in data}
        self.sync_layout([c.name for c in data])
        self._paint_detail()

    def selected(self) -> ConsumerInfo | None:
        key = self.query_one("#consumers", LiveTable).current_key
        return self._by_name.get(key) if key is not None else None

    @on(DataTable.RowHighlighted, "#consumers")
    def _highlighted(self) -> None:
        self._paint_detail()

    def _paint_detail(self) -> None:
        box = self.query_one("#detail", Static)
        c = self.selected()
        if c is None:
            box.update(Text("No consumers recorded: declare one with @app.consumer(...); a"
                            " worker of the app records it when it first runs.", style="dim"))
            return
        now = self.console.now()
        text = consumer_state(c)
        text.append(" ")
        text.append_text(ident(c.name, limit=60))
        text.append(" on queue ")
        text.append_text(ident(c.queue, limit=30))
        text.append(f" · batches of {c.batch_size}")
        text.append("\ncursor ")
        text.append_text(cursor_text(c, 60))
        text.append(f", moved {until(c.cursor_at, now)}")
        text.append(f" · {c.items_done:,} items in {c.batches_done:,} batches")
        if c.caught_up_at is not None:
            text.append(f" · caught up {until(c.caught_up_at, now)}")
        if c.run_job_id is not None:
            text.append(f"\nrun: job {c.run_job_id} ({c.run_state})")
        if c.failures:
            text.append(f"\n{c.failures} failures in a row", style="red")
            if c.failed_at is not None:
                text.append(f", last {stamp(c.failed_at, now)} UTC")
            if c.retry_at is not None and c.state == "backing_off":
                text.append(f"; next try {until(c.retry_at, now)}")
            error = c.last_error or {}
            if error.get("message"):
                text.append("\n")
                text.append_text(one_line(f"{error.get('type') or 'error'}: {error['message']}",
                                          limit=200))
        if c.paused:
            text.append("\npaused")
            if c.paused_by:
                text.append(" by ")
                text.append_text(ident(c.paused_by, limit=40))
            if c.paused_at is not None:
                text.append(f" {until(c.paused_at, now)}")
            if c.pause_reason:
                text.append(": “")
                text.append_text(one_line(c.pause_reason, limit=120))
                text.append("”")
        box.update(text)

    # -- actions ------------------------------------------------------------------------------
    def can(self, action: str) -> bool | None:
        if action in ("open", "toggle_pause"):
            return True if self.selected() is not None else None
        return True

    def action_open(self) -> None:
        c = self.selected()
        if c is not None:
            self.console.show_jobs(f"kind:{quote(c.kind)}", came_from="consumers")

    @on(DataTable.RowSelected, "#consumers")
    def _selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_open()

    def action_toggle_pause(self) -> None:
        c = self.selected()
        if c is None:
            return
        name, verb = c.name, "resume" if c.paused else "pause"
        self.console.propose(
            Plan(
                verb=verb.capitalize(),
                noun="consumer",
                count=1,
                ids=(name,),
                cli=command("consumers", verb, args=(name,)),
                run=(lambda op: op.consumers.resume(name)) if c.paused
                else (lambda op: op.consumers.pause(name)),
                destructive=False,
                report=_toggled,
            )
        )


def _toggled(info: ConsumerInfo) -> str:
    if info.paused:
        return f"consumer {info.name} paused: no batch starts until it is resumed"
    return f"consumer {info.name} resumed: a run starts at once"
