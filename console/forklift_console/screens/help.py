"""``?``: what this screen shows, its keys (disabled ones marked), and the glyph legend."""

from __future__ import annotations

from typing import Any, ClassVar, NamedTuple

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.actions import parse as parse_action
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Static

from forklift_console.screens.base import WRITE_ACTIONS, ConsoleScreen, own_bindings
from forklift_console.screens.job import JobScreen
from forklift_console.widgets.header import MORE_KEYS, MORE_SCREENS, TABS, screen_label
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
    ("queues", "full"): "past its ceiling: enqueues refused",
    ("workers", "running"): "claiming and running",
    ("workers", "draining"): "finishing, then exits",
    ("workers", "stale"): "no heartbeat for 1 min",
    ("database", "connected"): "refreshing normally",
    ("database", "connecting"): "opening a session",
    ("database", "offline"): "unreachable: data is old",
}


class KeyRow(NamedTuple):
    """A line of the help: the keys as shown, what they do, why not now; ``key`` is the key
    to press (the test that presses every key the help lists uses it)."""

    keys: str
    description: str
    note: str
    key: str


def key_rows(screen: Screen[Any], read_only: bool) -> list[KeyRow]:
    """The screen's own bindings, its list's, then the app's."""
    app = screen.app
    rows: list[KeyRow] = []
    seen: set[str] = set()
    # The list's own keys (sort, marks) sit on its table, between the screen's and the app's:
    # those of the list that has the focus, where the keys go.
    focused = screen.focused
    tables = [focused] if isinstance(focused, LiveTable) else []
    for node in (screen, *tables, app):
        for b in own_bindings(node):
            if not isinstance(b, Binding) or not b.description or b.action in seen:
                continue
            if b.action.startswith("go(") or b.action == "goto":  # the lines below say it all
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
            rows.append(KeyRow(keys, b.description, note, b.key.split(",")[0].strip()))
    return rows


def help_title(screen: Screen[Any]) -> str:
    """The screen's own name: each help box says which screen its keys belong to."""
    mode = getattr(screen, "MODE", "")
    if isinstance(screen, JobScreen):
        return "Job detail"
    return screen_label(mode) if mode else "Console"


def general_keys(screen: Screen[Any]) -> list[tuple[str, str]]:
    """The keys every screen shares, as they work on this one: moving only where there is a
    list or text to move in, tab only where there is another pane, esc as the screen has it."""
    rows: list[tuple[str, str]] = []
    last = TABS[-1][1]
    rows.append((f"1-{last}", "switch screen (" + ", ".join(
        f"{key} {label}" for mode, label in MORE_SCREENS if (key := MORE_KEYS.get(mode))
    ) + ")"))
    rows.append((":name", "go to any screen: " + " ".join(
        f":{m}" for m, _, _ in TABS) + " " + " ".join(f":{m}" for m, _ in MORE_SCREENS)))
    rows.append(("ctrl+p", "every action, searchable"))
    focused = screen.focused
    if isinstance(focused, LiveTable):
        rows.append(("↑ ↓ pgup pgdn", "move in the list"))
        if focused.row_count > 1:
            rows.append(("home end", "first / last row"))
    panes = [w for w in screen.query("*") if w.focusable and w.display]
    if len(panes) > 1:
        rows.append(("tab", "next pane"))
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
        head = Text()
        head.append(f"{help_title(under)} — keys\n", style="bold")
        if isinstance(under, ConsoleScreen) and under.HELP:
            head.append(under.HELP + "\n")
        # Keys in a grid: a long note wraps inside its own column, never back to column 0.
        keys = Table.grid(padding=(0, 2))
        keys.add_column(justify="right", no_wrap=True, style="bold")
        keys.add_column()
        for key, description, note, _ in key_rows(under, self.read_only):
            line = Text(description)
            if note:
                line.append(f"  ({note})", style="dim")
            keys.add_row(key, line)
        for key, words in general_keys(under):
            keys.add_row(key, words)
        tail = Text()
        if self.read_only:
            tail.append("\nREAD-ONLY: actions that change jobs or queues are disabled.\n",
                        style="bold")
        tail.append("\nesc, ? or q closes this help", style="dim")

        legend = Table.grid(padding=(0, 1))
        legend.add_column(no_wrap=True)
        legend.add_column()
        for title, states in (
            ("jobs", JOB_STATES),
            ("queues", QUEUE_STATES),
            ("workers", WORKER_STATES),
            ("database", CONNECTION_STATES),
        ):
            legend.add_row(Text(f"  {title}", style="underline"))
            for state, (glyph, style) in states.items():
                legend.add_row(Text("    ").append_text(badge(glyph, state, style, width=12)),
                               LEGEND_WORDS.get((title, state), ""))
        legend.add_row(Text("  marks", style="underline"))
        legend.add_row(Text(f"    {MARK}"), "marked: the next action's target")
        with VerticalScroll(id="dialog"), Horizontal(id="help-cols"):
            yield Static(Group(head, keys, tail), id="help")
            yield Static(Group(Text("Legend: a glyph and a word for every state",
                                    style="bold"), legend), id="legend")

    def action_close(self) -> None:
        self.dismiss(None)
