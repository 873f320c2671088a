"""Webhooks (``:webhooks``): outbound endpoints' health, one row each: enabled or why not, the
last status, the failure streak, deliveries still owed. ``e`` enables the highlighted endpoint
(its held deliveries go out), ``d`` disables it (asks first), enter lists its deliveries' jobs.
Every action is audited by the operator API."""

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
from forklift.ops.webhooks import EndpointChange, EndpointInfo
from forklift_console.plan import Plan
from forklift_console.screens.base import ConsoleScreen
from forklift_console.screens.listing import FILTER_KEY, open_filter
from forklift_console.widgets.filterbar import FilterLine, quote
from forklift_console.widgets.table import Cell, Column, LiveTable
from forklift_console.widgets.text import NONE, count, ident, one_line, plural, stamp, until


def health(e: EndpointInfo) -> Text:
    if not e.enabled:
        return Text("⏸ disabled", style="yellow")
    if e.failure_streak:
        return Text("✗ failing", style="red")
    return Text("✓ ok", style="green")


def status(e: EndpointInfo) -> Text:
    if e.last_status is None:
        return Text(NONE if e.last_at is None else "no answer", style="dim")
    ok = 200 <= e.last_status < 300
    return Text(str(e.last_status), style="green" if ok else "red")


class WebhooksScreen(ConsoleScreen[list[EndpointInfo]]):
    MODE = "webhooks"
    LAYOUT_TABLE = "webhooks"
    HELP = (
        "One row per outbound webhook endpoint: ok, failing or disabled, the status of its last"
        " answer, how many attempts in a row failed, and how many deliveries it still owes. A"
        " disabled endpoint holds its deliveries (they are not lost). e enables it and sends"
        " what it held, d disables it (asks first), enter lists its deliveries' jobs."
    )
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "open", "Its jobs"),
        Binding("e", "enable", "Enable"),
        Binding("d", "disable", "Disable"),
        FILTER_KEY,
    ]
    action_focus_filter = open_filter
    DEFAULT_CSS = """
    WebhooksScreen #webhooks {
        height: 1fr;
        min-height: 4;
    }
    """

    def __init__(self) -> None:
        super().__init__()
        self._by_name: dict[str, EndpointInfo] = {}

    def compose_body(self) -> ComposeResult:
        with Vertical(id="body"):
            yield FilterLine("webhooks", "endpoints")
            yield LiveTable(self.laid_out_columns(), id="webhooks")
            yield Static(id="detail")

    def layout_columns(self, narrow: bool) -> list[Column]:
        return [
            Column("health", "Health", 11),
            Column("name", "Endpoint", None),
            Column("status", "Last", 9),
            Column("streak", "Streak", 7),
            *([] if narrow else [Column("last", "Last try", 10)]),
            Column("owed", "Owed", 7),
            *([] if narrow else [Column("delivered", "Delivered", 10)]),
        ]

    def layout_cells(self, key: str, narrow: bool) -> dict[str, Cell]:
        e, now = self._by_name[key], self.console.now()
        return {
            "health": health(e),
            "name": ident(e.name, limit=60),
            "status": status(e),
            "streak": count(e.failure_streak),
            "last": stamp(e.last_at, now),
            "owed": count(e.pending),
            "delivered": count(e.delivered),
        }

    def fetch(self, op: Operator) -> list[EndpointInfo]:
        return op.webhooks.endpoints()

    def show(self, data: list[EndpointInfo]) -> None:
        self._by_name = {e.name: e for e in data}
        self.sync_layout([e.name for e in data])
        self._paint_detail()

    def selected(self) -> EndpointInfo | None:
        key = self.query_one("#webhooks", LiveTable).current_key
        return self._by_name.get(key) if key is not None else None

    @on(DataTable.RowHighlighted, "#webhooks")
    def _highlighted(self) -> None:
        self._paint_detail()

    def _paint_detail(self) -> None:
        box = self.query_one("#detail", Static)
        e = self.selected()
        if e is None:
            box.update(Text("No webhook endpoint has delivered yet: declare one with"
                            " forklift.webhooks.Endpoint(app, ...).", style="dim"))
            return
        now = self.console.now()
        text = health(e)
        text.append(" ")
        text.append_text(ident(e.name, limit=60))
        if e.url:
            text.append(" → ")
            text.append_text(one_line(e.url, limit=100))
        if not e.enabled:
            text.append("\ndisabled")
            if e.disabled_by:
                text.append(" by ")
                text.append_text(ident(e.disabled_by, limit=40))
            if e.disabled_at is not None:
                text.append(f" {until(e.disabled_at, now)}")
            if e.disabled_reason:
                text.append(": “")
                text.append_text(one_line(e.disabled_reason, limit=120))
                text.append("”")
            text.append(f" · {plural(e.pending, 'delivery', 'deliveries')} held")
        text.append(f"\nlast answer {status(e).plain} at {stamp(e.last_at, now)}")
        if e.last_size is not None:
            text.append(f" ({e.last_size:,} bytes)")
        if e.last_error:
            text.append(" · ")
            text.append_text(one_line(e.last_error, limit=120))
        text.append(f"\n{e.failure_streak} failed in a row · last delivered"
                    f" {stamp(e.last_ok_at, now)} · {e.delivered:,} delivered, {e.failed:,}"
                    " failed attempts")
        box.update(text)

    # -- actions ------------------------------------------------------------------------------
    def can(self, action: str) -> bool | None:
        e = self.selected()
        if action == "open":
            return True if e is not None else None
        if action == "enable":
            return True if e is not None and not e.enabled else None
        if action == "disable":
            return True if e is not None and e.enabled else None
        return True

    def action_open(self) -> None:
        e = self.selected()
        if e is not None:
            self.console.show_jobs(f"kind:{quote(e.kind)}", came_from="webhooks")

    @on(DataTable.RowSelected, "#webhooks")
    def _selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_open()

    def action_enable(self) -> None:
        e = self.selected()
        if e is None or e.enabled:
            return
        name = e.name
        self.console.propose(Plan(
            verb="Enable", noun="webhook endpoint", count=1, ids=(name,),
            cli=command("webhooks", "enable", args=(name,)),
            run=lambda op: op.webhooks.enable(name), destructive=False, report=_enabled))

    def action_disable(self) -> None:
        e = self.selected()
        if e is None or not e.enabled:
            return
        name = e.name
        self.console.propose(Plan(
            verb="Disable", noun="webhook endpoint", count=1, ids=(name,),
            cli=command("webhooks", "disable", args=(name,), options={"--yes": True}),
            run=lambda op: op.webhooks.disable(name), report=_disabled))


def _enabled(change: EndpointChange) -> str:
    return (f"endpoint {change.endpoint.name} enabled:"
            f" {plural(change.released, 'held delivery', 'held deliveries')} sent now")


def _disabled(change: EndpointChange) -> str:
    return (f"endpoint {change.endpoint.name} disabled: its deliveries are held until it is"
            " enabled")
