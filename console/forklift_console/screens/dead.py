"""Dead letters (key 4): dead jobs grouped by kind, error code and normalised message.

The groups are built from the newest dead jobs (up to :data:`SCAN`), read through the operator
API's job list sorted by finish time, so the cost is bounded however many dead jobs pile up.
A group's actions act on exactly the jobs the operator sees counted in it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.widgets import DataTable, Static

from forklift.ops import JobFilter, JobSummary, Operator
from forklift.ops.display import clean_text
from forklift_console.screens.base import ConsoleScreen
from forklift_console.screens.job import VERBS
from forklift_console.screens.jobs import bulk_report, ids_cli
from forklift_console.screens.modals import Plan
from forklift_console.widgets.filterbar import quote
from forklift_console.widgets.table import Column, LiveTable, Row
from forklift_console.widgets.text import (
    MARK,
    age,
    count,
    ident,
    idents,
    one_line,
    plain,
    plural,
    stamp,
    style_of,
)

#: Newest dead jobs read per refresh (the API pages by at most 500).
SCAN = 5_000
PAGE = 500

_UUID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.I)
_HEX = re.compile(r"\b0x[0-9a-f]+\b|\b[0-9a-f]{12,}\b", re.I)
_QUOTED = re.compile(r"'[^'\n]{0,200}'|\"[^\"\n]{0,200}\"")
_NUMBER = re.compile(r"(?<![A-Za-z_])\d+(?:\.\d+)?")
_SPACE = re.compile(r"\s+")


def normalise(message: str | None) -> str:
    """The shape of an error message: ids, numbers and quoted values replaced, so that
    ``user 41 not found`` and ``user 97 not found`` fall in one group."""
    if not message:
        return ""
    text = _UUID.sub("<uuid>", clean_text(message))
    text = _HEX.sub("<hex>", text)
    text = _QUOTED.sub("<str>", text)
    text = _NUMBER.sub("<n>", text)
    return _SPACE.sub(" ", text).strip()[:200]


@dataclass
class Group:
    kind: str
    code: str
    message: str
    ids: list[int] = field(default_factory=list)
    hour: int = 0
    day: int = 0
    week: int = 0
    first: datetime | None = None
    last: datetime | None = None
    sample: JobSummary | None = None

    @property
    def key(self) -> str:
        return f"{self.kind}\x1f{self.code}\x1f{self.message}"


@dataclass(frozen=True)
class DeadLetters:
    groups: list[Group]
    scanned: int
    #: More dead jobs exist than were read.
    truncated: bool


def group_dead(jobs: list[JobSummary], now: datetime) -> list[Group]:
    groups: dict[tuple[str, str, str], Group] = {}
    for j in jobs:
        code = j.last_error_code or "unknown"
        key = (j.kind, code, normalise(j.last_error_message))
        g = groups.get(key)
        if g is None:
            g = groups[key] = Group(*key)
        g.ids.append(j.id)
        at = j.finished_at
        if at is not None:
            since = now - at
            g.hour += since <= timedelta(hours=1)
            g.day += since <= timedelta(days=1)
            g.week += since <= timedelta(weeks=1)
            g.first = at if g.first is None or at < g.first else g.first
            if g.last is None or at > g.last:
                g.last, g.sample = at, j
        elif g.sample is None:
            g.sample = j
    return sorted(groups.values(), key=lambda g: (-g.hour, -g.day, -len(g.ids), g.key))


def fetch_dead(op: Operator, now: datetime) -> DeadLetters:
    jobs: list[JobSummary] = []
    cursor: str | None = None
    flt = JobFilter(states=("dead",))
    while len(jobs) < SCAN:
        page = op.jobs(flt, sort="-finished_at", limit=PAGE, cursor=cursor, count=False)
        jobs += page.jobs
        cursor = page.next_cursor
        if cursor is None:
            break
    return DeadLetters(group_dead(jobs, now), len(jobs), cursor is not None)


class DeadScreen(ConsoleScreen[DeadLetters]):
    MODE = "dead"
    #: Grouping reads up to 5,000 rows; dead letters do not need a two-second pulse.
    MIN_INTERVAL = 10.0
    HELP = (
        "Dead jobs grouped by kind, error code and message shape (numbers, ids and quoted values"
        " blanked), busiest in the last hour first, with counts for the last hour, day and week"
        " and when the group was first and last seen. Below: the newest error of the"
        " highlighted group. r requeues the group (or the groups marked with space), D deletes"
        " them; you type the count to confirm. enter lists the group's jobs."
    )
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "open", "Jobs"),
        Binding("space", "mark", "Mark"),
        Binding("r", "act('requeue')", "Requeue group"),
        Binding("D", "act('delete')", "Delete group", key_display="D"),
        Binding("escape", "clear", "Clear marks", show=False),
    ]

    def __init__(self) -> None:
        super().__init__()
        self._data: DeadLetters | None = None
        self._groups: dict[str, Group] = {}
        self.marks: set[str] = set()

    def compose_body(self) -> ComposeResult:
        with Vertical(id="body"):
            yield Static(id="info")
            yield LiveTable(
                [
                    Column("mark", " ", 1),
                    Column("kind", "Kind", 14),
                    Column("code", "Code", 12),
                    Column("hour", "1h", 4),
                    Column("day", "1d", 4),
                    Column("week", "1w", 4),
                    Column("last", "Last", 6),
                    Column("message", "Message", None),
                ],
                id="groups",
            )
            yield Static(id="sample")

    def fetch(self, op: Operator) -> DeadLetters:
        return fetch_dead(op, self.console.now())

    def show(self, data: DeadLetters) -> None:
        self._data = data
        self._groups = {g.key: g for g in data.groups}
        self.marks &= set(self._groups)
        self._paint()

    def _paint(self) -> None:
        data = self._data
        if data is None:
            return
        now = self.console.now()
        rows: list[Row] = []
        for g in data.groups:
            rows.append(
                (
                    g.key,
                    [
                        Text(MARK, style="bold") if g.key in self.marks else " ",
                        ident(g.kind, limit=14),
                        ident(g.code, limit=12),
                        count(g.hour),
                        count(g.day),
                        count(g.week),
                        age(g.last, now),
                        one_line(g.message or "(no message)", limit=200),
                    ],
                )
            )
        self.query_one("#groups", LiveTable).sync(rows)
        info = Text(
            f"{plural(sum(len(g.ids) for g in data.groups), 'dead job')} in "
            f"{plural(len(data.groups), 'group')}"
        )
        if data.truncated:
            info.append(f" (the newest {data.scanned:,}; older dead jobs are not grouped)")
        info.append(" · ages are since the job died", style="dim")
        if self.marks:
            info.append("  ")
            info.append(f" {MARK} {len(self.marks)} groups marked ", style="bold reverse")
        self.query_one("#info", Static).update(info)
        self._paint_sample()

    def selected(self) -> Group | None:
        key = self.query_one("#groups", LiveTable).current_key
        return self._groups.get(key) if key is not None else None

    @on(DataTable.RowHighlighted, "#groups")
    def _highlighted(self) -> None:
        self._paint_sample()

    def _paint_sample(self) -> None:
        g = self.selected()
        box = self.query_one("#sample", Static)
        if g is None:
            box.update(Text("✔ no dead letters", style=style_of("state-completed")))
            return
        now = self.console.now()
        text = Text()
        text.append_text(idents([g.kind, g.code], sep=" / ", limit=60))
        text.append(
            f": {plural(len(g.ids), 'dead job')}, first seen {age(g.first, now)} ago,"
            f" last seen {age(g.last, now)} ago\n"
        )
        text.append("Newest error", style="bold")
        j = g.sample
        if j is not None:
            text.append(f" (job {j.id}, attempt {j.attempt}/{j.max_attempts}, died ")
            text.append(f"{stamp(j.finished_at, now)}, queue ")
            text.append_text(ident(j.queue, limit=30))
            text.append(")\n")
            text.append(f"{g.code}: ", style="bold")
            text.append_text(plain(j.last_error_message or "(no message)", limit=600))
        box.update(text)

    # -- actions ------------------------------------------------------------------------------
    def targets(self) -> list[Group]:
        if self.marks:
            return [self._groups[k] for k in sorted(self.marks) if k in self._groups]
        g = self.selected()
        return [g] if g is not None else []

    def can(self, action: str) -> bool | None:
        if action in ("act", "open", "mark"):
            return True if self.selected() is not None else None
        return True

    def reason(self, action: str, parameters: tuple[object, ...]) -> str | None:
        if action in ("act", "open", "mark"):
            return "there are no dead letters"
        return None

    def action_mark(self) -> None:
        g = self.selected()
        if g is None:
            return
        self.marks.symmetric_difference_update({g.key})
        self._paint()
        self.query_one("#groups", LiveTable).action_cursor_down()

    def action_clear(self) -> None:
        if self.marks:
            self.marks.clear()
            self._paint()

    def action_open(self) -> None:
        g = self.selected()
        if g is None:
            return
        text = f"state:dead kind:{quote(g.kind)}"
        if g.code not in ("error", "unknown"):
            text += f" {quote(g.code)}"
        self.console.show_jobs(text, came_from="dead")

    @on(DataTable.RowSelected, "#groups")
    def _selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_open()

    def action_act(self, action: str) -> None:
        """r, D: requeue or delete every job of the marked groups (or the highlighted one)."""
        groups = self.targets()
        if not groups:
            return
        ids = sorted({i for g in groups for i in g.ids})
        flt = JobFilter(ids=tuple(ids), states=("dead",))
        scope = "; ".join(f"{g.kind} / {g.code}: {g.message or '(no message)'}" for g in groups)
        self.console.propose(
            Plan(
                verb=VERBS[action],
                noun="dead job",
                count=len(ids),
                ids=tuple(ids),
                scope=f"{plural(len(groups), 'group')}: {scope}",
                cli=ids_cli(action, ids),
                run=lambda op: op.bulk(action, flt),
                report=bulk_report,
            ),
            after=self.action_clear,
        )
