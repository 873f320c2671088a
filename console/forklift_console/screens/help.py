"""``?``: what this screen shows, its keys (disabled ones marked), and the glyph legend."""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual.actions import parse as parse_action
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Static

from forklift_console.screens.base import WRITE_ACTIONS, ConsoleScreen
from forklift_console.widgets.header import MORE_SCREENS, TABS
from forklift_console.widgets.table import LiveTable
from forklift_console.widgets.text import (
    CONNECTION_STATES,
    JOB_STATES,
    MARK,
    QUEUE_STATES,
    WORKER_STATES,
    badge,
)

LEGEND_WORDS = {
    ("jobs", "scheduled"): "due later",
    ("jobs", "available"): "waiting for a worker",
    ("jobs", "running"): "claimed, running",
    ("jobs", "retryable"): "failed, will retry",
    ("jobs", "completed"): "done",
    ("jobs", "cancelled"): "cancelled",
    ("jobs", "dead"): "dead letter: failed for good",
    ("queues", "active"): "work flowing",
    ("queues", "idle"): "nothing to do",
    ("queues", "lagging"): "oldest job waits > 1 min",
    ("queues", "failing"): "most recent outcomes failed",
    ("queues", "no_worker"): "work waits, no worker listens",
    ("queues", "paused"): "no claims until resumed",
    ("workers", "running"): "claiming and running",
    ("workers", "draining"): "finishing, then exits",
    ("workers", "stale"): "no heartbeat for 1 min",
    ("database", "connected"): "refreshing normally",
    ("database", "connecting"): "opening a session",
    ("database", "offline"): "unreachable: data is old",
}


def key_rows(screen: Screen[Any], read_only: bool) -> list[tuple[str, str, str]]:
    """(keys, description, note) for the screen's own bindings, then the app's."""
    app = screen.app
    rows: list[tuple[str, str, str]] = []
    seen: set[str] = set()
    # The list's own keys (sort, marks) sit on its table, between the screen's and the app's.
    tables = [t for t in screen.query(LiveTable) if t.display][:1]
    for node in (screen, *tables, app):
        for b in type(node).BINDINGS:
            if not isinstance(b, Binding) or not b.description or b.action in seen:
                continue
            if b.action.startswith("go("):  # the number keys: one line below says it all
                continue
            seen.add(b.action)
            keys = b.key_display or app.get_key_display(b)
            note = ""
            _, name, params = parse_action(b.action)
            state = node.check_action(name, params)
            if state is None:
                if read_only and name in WRITE_ACTIONS:
                    note = "disabled: read-only"
                elif isinstance(node, ConsoleScreen):
                    note = "n/a now: " + node.why_not(name, params)
                else:
                    note = "n/a now"
            elif state is False:
                continue
            rows.append((keys, b.description, note))
    return rows


class HelpScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,question_mark,q", "close", "Close"),
    ]

    def __init__(self, under: Screen[Any], *, read_only: bool) -> None:
        super().__init__(classes="dialog")
        self.under = under
        self.read_only = read_only

    def compose(self) -> ComposeResult:
        under = self.under
        keys = Text()
        name = next((label for mode, _, label in TABS if mode == getattr(under, "MODE", "")), "")
        keys.append(f"{name or 'Console'} — keys\n", style="bold")
        if isinstance(under, ConsoleScreen) and under.HELP:
            keys.append(under.HELP + "\n\n")
        for key, description, note in key_rows(under, self.read_only):
            keys.append(f"  {key:>9}  ", style="bold")
            keys.append(description)
            if note:
                keys.append(f"  ({note})", style="dim")
            keys.append("\n")
        last = TABS[-1][1]
        keys.append(f"\n  1-{last} or :name  switch screen · ctrl+p  every action, searchable\n")
        keys.append("  " + " ".join(f":{m}" for m, _ in MORE_SCREENS)
                    + "  screens without a number key\n")
        keys.append("  ↑ ↓ pgup pgdn home end  move · tab  next pane · esc  back / close\n")
        if self.read_only:
            keys.append("\n  READ-ONLY: actions that change jobs or queues are disabled.\n",
                        style="bold")
        keys.append("\n  esc, ? or q closes this help", style="dim")

        legend = Text().append("Legend: a glyph and a word for every state\n", style="bold")
        for title, states in (
            ("jobs", JOB_STATES),
            ("queues", QUEUE_STATES),
            ("workers", WORKER_STATES),
            ("database", CONNECTION_STATES),
        ):
            legend.append(f"  {title}\n", style="underline")
            for state, (glyph, style) in states.items():
                legend.append("    ")
                legend.append_text(badge(glyph, state, style, width=12))
                legend.append(f" {LEGEND_WORDS.get((title, state), '')}\n")
        legend.append(f"  marks\n    {MARK}            marked: the next action's target\n")
        with VerticalScroll(id="dialog"), Horizontal(id="help-cols"):
            yield Static(keys, id="help")
            yield Static(legend, id="legend")

    def action_close(self) -> None:
        self.dismiss(None)
