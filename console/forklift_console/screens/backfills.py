"""Backfills (key 9): each backfill's progress bar, pace (items/s, with a sparkline of the last
minute), rate, ETA and state. ``p`` pauses or resumes, ``>`` and ``<`` double or halve the rate
(from the next page, from whatever it is then: two presses double twice), ``C`` cancels the run
(confirmed); all audited by the operator API. ``+``/``-`` keep their console-wide meaning (the
refresh rate)."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.widgets import DataTable, Static

from forklift.ops import Operator
from forklift.ops.backfills import BackfillInfo
from forklift.ops.runbook import command
from forklift_console.plan import Plan
from forklift_console.screens.base import ConsoleScreen
from forklift_console.screens.listing import FILTER_KEY, open_filter
from forklift_console.widgets.filterbar import FilterLine
from forklift_console.widgets.table import Cell, Column, LiveTable
from forklift_console.widgets.text import (
    NONE,
    ident,
    one_line,
    plain,
    plural,
    spark,
    stamp,
    style_of,
)

SPARK_POINTS = 15
LIVE = ("running", "paused", "failed", "stalled")
#: glyph and style per state: the glyph and the word carry the meaning, colour decorates.
STATES: dict[str, tuple[str, str]] = {
    "running": ("▶", "green"),
    "paused": ("⏸", "yellow"),
    "failed": ("✖", "bold red"),
    "stalled": ("⚠", "yellow"),
    "completed": ("✔", "green"),
    "cancelled": ("⊘", "magenta"),
    "never_run": ("·", "dim"),
}


def state_text(state: str) -> Text:
    glyph, style = STATES.get(state, ("?", ""))
    return Text(f"{glyph} {state}", style=style)


def progress_bar(b: BackfillInfo, width: int, *, counts: bool = True) -> Text:
    """Items done (█) and left (░) against the estimate, then the counts (or, without
    ``counts``, only the share); without an estimate only the count."""
    bar = Text()
    if b.fraction is None:
        bar.append("░" * width, style="dim")
        bar.append(f" {b.items_done:,}")
        return bar
    done = round(width * b.fraction)
    bar.append("█" * done, style="green")
    bar.append("░" * (width - done), style="dim")
    total = f"/{b.total:,}" if b.total is not None else ""
    bar.append(f" {b.items_done:,}{total} {b.fraction:.0%}" if counts else f" {b.fraction:.0%}")
    return bar


def pages_rate(rate: float | None) -> str:
    if rate is None:
        return NONE
    return f"{rate:g}/s" if rate >= 1 else f"{rate * 60:.3g}/min"


class BackfillsScreen(ConsoleScreen[list[BackfillInfo]]):
    MODE = "backfills"
    LAYOUT_TABLE = "backfills"
    HELP = (
        "One row per backfill: its state, a progress bar of items done against its estimate,"
        " the rate it is held to (pages per second), its pace (items/s over the last 30 s and a"
        " sparkline of the last minute) and the ETA at that pace (— when unknown). p pauses it"
        " after the page in flight or resumes it from its checkpoint; > doubles and < halves"
        " its rate from the next page (each press from the rate as it is then); C cancels the"
        " run (the page in flight rolls back)."
    )
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("p", "toggle_pause", "Pause/resume"),
        Binding("greater_than_sign", "rate_up", "Rate ×2", key_display=">"),
        Binding("less_than_sign", "rate_down", "Rate ÷2", key_display="<"),
        Binding("C", "cancel", "Cancel run", key_display="C"),
        FILTER_KEY,
    ]
    action_focus_filter = open_filter
    DEFAULT_CSS = """
    BackfillsScreen #backfills {
        height: 1fr;
        min-height: 4;
    }
    """

    def __init__(self) -> None:
        super().__init__()
        self._by_name: dict[str, BackfillInfo] = {}

    def compose_body(self) -> ComposeResult:
        with Vertical(id="body"):
            yield FilterLine("backfills", "runs")
            yield LiveTable(self.laid_out_columns(), id="backfills")
            yield Static(id="detail")

    def layout_columns(self, narrow: bool) -> list[Column]:
        """At 80 columns the sparkline and the counts give way (the detail below has both),
        so the pace and the ETA stay in view (they would be off-screen)."""
        return [
            Column("state", "State", 11),
            Column("name", "Backfill", None),
            Column("progress", "Progress", 12 if narrow else 32),
            Column("rate", "Rate", 9),
            Column("pace", "Items/s", 8 if narrow else 9),
            *([] if narrow else [Column("spark", "Pace", SPARK_POINTS)]),
            Column("eta", "ETA", 8),
        ]

    def layout_cells(self, key: str, narrow: bool) -> dict[str, Cell]:
        b = self._by_name[key]
        return {
            "state": state_text(b.state),
            "name": ident(b.name, limit=60),
            "progress": progress_bar(b, 6, counts=False) if narrow else progress_bar(b, 12),
            "rate": pages_rate(b.rate),
            "pace": f"{b.items_per_s:,.1f}",
            "spark": spark(b.pace, SPARK_POINTS),
            "eta": b.eta,
        }

    def fetch(self, op: Operator) -> list[BackfillInfo]:
        return op.backfills()

    def show(self, data: list[BackfillInfo]) -> None:
        self._by_name = {b.name: b for b in data}
        self.sync_layout([b.name for b in data])
        self._paint_detail()

    def selected(self) -> BackfillInfo | None:
        key = self.query_one("#backfills", LiveTable).current_key
        return self._by_name.get(key) if key is not None else None

    @on(DataTable.RowHighlighted, "#backfills")
    def _highlighted(self) -> None:
        self._paint_detail()

    def _paint_detail(self) -> None:
        box = self.query_one("#detail", Static)
        b = self.selected()
        if b is None:
            box.update(Text("No backfills recorded: declare one with @app.backfill(...) and"
                            " start it with `forklift backfills start NAME`.", style="dim"))
            return
        now = self.console.now()
        text = state_text(b.state)
        text.append(" ")
        text.append_text(ident(b.name, limit=60))
        if b.run_id is None:
            text.append(" · declared, never run")
            box.update(text)
            return
        text.append(f" · run {b.run_id} started {stamp(b.created_at, now)} by ")
        text.append_text(ident(b.started_by or NONE, limit=30))
        if b.changed:
            text.append(" · its code changed since the last completed run", style="yellow")
        text.append("\n")
        text.append_text(progress_bar(b, 40))
        text.append(f"\n{b.pages_done:,} pages of {b.page_size} · rate {pages_rate(b.rate)}"
                    f" pages · pace {b.items_per_s:,.1f} items/s ({b.pages_per_s:,.2f} pages/s)"
                    f" · ETA {b.eta}\n")
        text.append(spark(b.pace), style="cyan")
        text.append("  items/s, last minute", style="dim")
        text.append("\ncursor ")
        text.append_text(plain(b.cursor, limit=80))
        if b.job_id is not None:
            text.append(f" · job {b.job_id} ({b.job_state or NONE})")
        if b.paused_by:
            text.append("\npaused by ")
            text.append_text(ident(b.paused_by, limit=40))
            text.append(f" at {stamp(b.paused_at, now)}")
        if b.last_error:
            e = b.last_error
            text.append(f"\nLast error ({plural(b.error_count, 'error')} in all), attempt"
                        f" {e.get('attempt')}: ", style=style_of("state-dead"))
            # The code once (never "error error:"), then the exception type, then the message.
            code, kind = e.get("code") or "error", e.get("type")
            label = code if not kind or kind == code else f"{code} ({kind})"
            text.append_text(one_line(f"{label} — {e.get('message') or '(no message)'}",
                                      limit=100))
        box.update(text)

    # -- actions ------------------------------------------------------------------------------
    def can(self, action: str) -> bool | None:
        b = self.selected()
        if action in ("toggle_pause", "cancel"):
            return True if b is not None and b.state in LIVE else None
        if action in ("rate_up", "rate_down"):
            return True if b is not None and b.state in LIVE and b.rate is not None else None
        return True

    def action_toggle_pause(self) -> None:
        b = self.selected()
        if b is None or b.state not in LIVE:
            return
        name = b.name
        verb = "pause" if b.state == "running" else "resume"
        self.console.propose(
            Plan(
                verb=verb.capitalize(), noun="backfill", count=1, ids=(name,),
                cli=command("backfills", verb, args=(name,)),
                run=(lambda op: op.pause_backfill(name)) if verb == "pause"
                else (lambda op: op.resume_backfill(name)),
                destructive=False,
                report=_line,
            )
        )

    def _change_rate(self, factor: float) -> None:
        b = self.selected()
        if b is None or b.rate is None or b.state not in LIVE:
            return
        name = b.name
        # Relative, applied by the operator API to the rate as it is when the change lands:
        # a press never computes from a rate shown before the previous press took effect.
        self.console.propose(
            Plan(
                verb="Speed up" if factor > 1 else "Slow down", noun="backfill", count=1,
                ids=(name,), cli=command("backfills", "rate", args=(name, "…")),
                run=lambda op: op.scale_backfill_rate(name, factor),
                destructive=False,
                report=_line,
                cli_of=lambda info: command("backfills", "rate", args=(name, f"{info.rate:g}")),
            )
        )

    def action_rate_up(self) -> None:
        self._change_rate(2.0)

    def action_rate_down(self) -> None:
        self._change_rate(0.5)

    def action_cancel(self) -> None:
        b = self.selected()
        if b is None or b.state not in LIVE:
            return
        name = b.name
        self.console.propose(
            Plan(
                verb="Cancel", noun="backfill run", count=1, ids=(name,),
                cli=command("backfills", "cancel", args=(name,), options={"--yes": True}),
                run=lambda op: op.cancel_backfill(name),
                report=_line,
            )
        )


def _line(b: BackfillInfo) -> str:
    return f"backfill {b.name}: {b.state}, rate {pages_rate(b.rate)} pages, ETA {b.eta}"
