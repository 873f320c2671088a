"""``?``: what this screen shows, its keys (disabled ones marked), and the glyph legend."""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual.actions import parse as parse_action
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Static

from forklift.console.screens.base import WRITE_ACTIONS, ConsoleScreen
from forklift.console.widgets.header import TABS
from forklift.console.widgets.text import (
    CONNECTION_STATES,
    JOB_STATES,
    MARK,
    QUEUE_STATES,
    WORKER_STATES,
    badge,
)

LEGEND_WORDS = {
    "scheduled": "due later",
    "available": "waiting for a worker",
    "running": "claimed, running",
    "retryable": "failed, will retry",
    "completed": "done",
    "cancelled": "cancelled",
    "dead": "dead letter: out of attempts or failed for good",
    "active": "work flowing",
    "idle": "nothing to do",
    "lagging": "oldest job waits over a minute",
    "paused": "workers claim nothing from it",
    "draining": "finishing its jobs, then exits",
    "stale": "heartbeat older than a minute",
    "connected": "refreshing normally",
    "connecting": "opening a session",
    "offline": "database unreachable: stale data",
}


def key_rows(screen: Screen[Any], read_only: bool) -> list[tuple[str, str, str]]:
    """(keys, description, note) for the screen's own bindings, then the app's."""
    app = screen.app
    rows: list[tuple[str, str, str]] = []
    seen: set[str] = set()
    for node in (screen, app):
        for b in type(node).BINDINGS:
            if not isinstance(b, Binding) or not b.description or b.action in seen:
                continue
            seen.add(b.action)
            keys = b.key_display or app.get_key_display(b)
            note = ""
            _, name, params = parse_action(b.action)
            state = node.check_action(name, params)
            if state is None:
                note = "disabled: read-only" if read_only and name in WRITE_ACTIONS else "n/a now"
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
        text = Text()
        name = next((label for mode, _, label in TABS if mode == getattr(under, "MODE", "")), "")
        text.append(f"{name or 'Console'} — keys\n", style="bold")
        if isinstance(under, ConsoleScreen) and under.HELP:
            text.append(under.HELP + "\n\n")
        for keys, description, note in key_rows(under, self.read_only):
            text.append(f"  {keys:>9}  ", style="bold")
            text.append(description)
            if note:
                text.append(f"  ({note})", style="dim")
            text.append("\n")
        text.append("\n  1-6 or :name  switch screen · ctrl+p  every action, searchable\n")
        text.append("  ↑ ↓ pgup pgdn home end  move · tab  next pane · esc  back / close\n")
        if self.read_only:
            text.append("\n  READ-ONLY: actions that change jobs or queues are disabled.\n",
                        style="bold")
        text.append("\nLegend (every state is a glyph and a word)\n", style="bold")
        for title, states in (
            ("jobs", JOB_STATES),
            ("queues", QUEUE_STATES),
            ("workers", WORKER_STATES),
            ("database", CONNECTION_STATES),
        ):
            text.append(f"  {title}\n", style="underline")
            for state, (glyph, style) in states.items():
                text.append("    ")
                text.append_text(badge(glyph, state, style, width=12))
                text.append(f" {LEGEND_WORDS.get(state, '')}\n")
        text.append(f"  marks\n    {MARK}            marked for the next action\n")
        text.append("\n  esc, ? or q closes this help", style="dim")
        with VerticalScroll(id="dialog"):
            yield Static(text, id="help")

    def action_close(self) -> None:
        self.dismiss(None)
