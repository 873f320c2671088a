"""Audit (key 6): every operator action, newest first, from every door (console, CLI, scripts)."""

from __future__ import annotations

import json
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.widgets import Static

from forklift.ops import AuditEntry, Operator
from forklift_console.screens.base import ConsoleScreen
from forklift_console.screens.listing import FILTER_KEY, open_filter
from forklift_console.widgets.filterbar import FilterLine
from forklift_console.widgets.table import Column, LiveTable, Row
from forklift_console.widgets.text import (
    count,
    ident,
    one_line,
    stamp,
    style_of,
)

PAGE = 200


def target_text(target: dict[str, object]) -> str:
    if set(target) == {"job"}:
        return f"job {target['job']}"
    if set(target) == {"queue"}:
        return f"queue {target['queue']}"
    return json.dumps(target, separators=(",", ":"), sort_keys=True, default=str)


class AuditScreen(ConsoleScreen[list[AuditEntry]]):
    MODE = "audit"
    NOTHING_TO_OPEN = ("an audit entry is shown whole in its row (who, what, target, when, why,"
                       " outcome): there is no detail behind it")
    HELP = (
        "The audit trail: who did what to which jobs or queues, when, why and with what"
        " outcome, newest first. Refusals are recorded too. ] and [ page through older"
        " entries. The trail is append-only."
    )
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("right_square_bracket", "page(1)", "Older", key_display="]"),
        Binding("left_square_bracket", "page(-1)", "Newer", key_display="["),
        FILTER_KEY,
    ]
    action_focus_filter = open_filter

    def __init__(self) -> None:
        super().__init__()
        self._starts: list[int | None] = [None]
        self._last: list[AuditEntry] = []

    def compose_body(self) -> ComposeResult:
        with Vertical(id="body"):
            yield Static(id="info")
            yield FilterLine("audit", "entries")
            yield LiveTable(
                [
                    Column("at", "When (UTC)", 10),
                    Column("actor", "Actor", 12),
                    Column("action", "Action", 12),
                    Column("count", "Jobs", 6),
                    Column("outcome", "Outcome", 18),
                    Column("target", "Target / reason", None),
                ],
                id="audit",
            )

    def fetch(self, op: Operator) -> list[AuditEntry]:
        return op.audit(limit=PAGE, before_id=self._starts[-1])

    def show(self, data: list[AuditEntry]) -> None:
        self._last = data
        now = self.console.now()
        rows: list[Row] = []
        for e in data:
            target = one_line(target_text(e.target), limit=120)
            if e.reason:
                target.append(" — ")
                target.append_text(one_line(e.reason, limit=120))
            outcome = one_line(e.outcome, limit=18)
            if e.outcome.startswith("refused"):
                outcome.stylize(style_of("state-dead"))
            rows.append(
                (
                    e.id,
                    [
                        stamp(e.at, now),  # the date only when it is not today
                        ident(e.actor, limit=12),
                        ident(e.action, limit=12),
                        count(e.count),
                        outcome,
                        target,
                    ],
                )
            )
        self.query_one("#audit", LiveTable).sync(rows)
        page = len(self._starts)
        info = Text(f"{len(data)} entries, newest first · page {page}")
        if not data:
            info = Text("no operator actions recorded yet" if page == 1 else "no older entries")
        self.query_one("#info", Static).update(info)

    def action_page(self, step: int) -> None:
        if step > 0:
            if len(self._last) < PAGE:
                self.notify("these are the oldest entries")
                return
            self._starts.append(self._last[-1].id)
        elif len(self._starts) > 1:
            self._starts.pop()
        else:
            self.notify("these are the newest entries", title="Newer")
            return
        self.reload()
