"""Dead letters (key 4): every dead job grouped by kind, error code and message shape.

The groups are the server's (:mod:`forklift.ops.dead`, over all dead jobs, kept by triggers in
``dead_letters``), so one refresh is one scan of that narrow table however many jobs died, and
a group's actions and its drill-down (``group:ID`` on Jobs) cover exactly the jobs counted in it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.widgets import DataTable, Static

from forklift.ops import BulkReport, JobFilter, JobSummary, Operator
from forklift.ops.dead import DeadGroup
from forklift.ops.runbook import cli
from forklift_console.plan import Plan
from forklift_console.screens.base import ConsoleScreen
from forklift_console.screens.job import VERBS
from forklift_console.screens.jobs import bulk_report
from forklift_console.screens.listing import FILTER_KEY, MarkedList, open_filter
from forklift_console.widgets.filterbar import FilterLine
from forklift_console.widgets.table import Column, LiveTable, Row
from forklift_console.widgets.text import (
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

#: Groups shown (the busiest first); the header says how many more there are.
GROUPS = 200


@dataclass(frozen=True)
class DeadLetters:
    groups: list[DeadGroup]
    #: Every group and every dead job, not only those shown.
    group_count: int
    dead: int
    #: The newest dead job of each group shown (by its id).
    samples: dict[int, JobSummary]


def fetch_dead(op: Operator) -> DeadLetters:
    with op.snapshot():  # the groups and their newest jobs agree
        found = op.dead_groups(limit=GROUPS)
        ids = tuple(g.sample_job_id for g in found.groups)
        jobs = op.jobs(JobFilter(ids=ids), limit=len(ids), count=False).jobs if ids else []
    return DeadLetters(found.groups, found.group_count, found.dead, {j.id: j for j in jobs})


def group_cli(action: str, groups: list[DeadGroup]) -> str:
    return " && ".join(cli("dead", action, g.id, "--yes") for g in groups)


def act_on_groups(op: Operator, action: str, groups: list[DeadGroup]) -> BulkReport:
    """Each group as its own bulk action (re-checked under the row lock, audited); one
    report adding them up."""
    reports = [op.requeue_dead_group(g.id) if action == "requeue" else op.delete_dead_group(g.id)
               for g in groups]
    return replace(reports[0], done=sum(r.done for r in reports),
                   skipped=sum(r.skipped for r in reports), more=any(r.more for r in reports))


class DeadScreen(MarkedList, ConsoleScreen[DeadLetters]):
    MODE = "dead"
    #: Dead letters do not need a two-second pulse.
    MIN_INTERVAL = 10.0
    HELP = (
        "Every dead job, grouped by kind, error code and message shape (numbers, ids and quoted"
        " values blanked), busiest in the last hour first, with counts for the last hour, day"
        " and week and when the group was last seen. Below: the newest error of the"
        " highlighted group. r requeues the group (or the groups marked with space or"
        " shift+↑↓), D deletes"
        " them; you type the count to confirm. enter lists exactly the group's jobs"
        " (group:ID on Jobs)."
    )
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "open", "Jobs"),
        Binding("space", "mark", "Mark"),
        Binding("r", "act('requeue')", "Requeue group"),
        Binding("D", "act('delete')", "Delete group", key_display="D"),
        Binding("escape", "clear", "Clear marks", show=False),
        FILTER_KEY,
    ]
    action_focus_filter = open_filter
    MARKED_NOUN = "groups marked"

    def __init__(self) -> None:
        super().__init__()
        self._data: DeadLetters | None = None
        self._groups: dict[str, DeadGroup] = {}

    def compose_body(self) -> ComposeResult:
        with Vertical(id="body"):
            yield Static(id="info")
            yield FilterLine("groups", "groups")
            yield LiveTable(
                [
                    Column("kind", "Kind", 14),
                    Column("code", "Code", 12),
                    Column("hour", "1h", 4),
                    Column("day", "1d", 4),
                    Column("week", "1w", 4),
                    Column("last", "Last", 6),
                    Column("message", "Message", None),
                ],
                id="groups", markable=True,
            )
            yield Static(id="sample")

    def fetch(self, op: Operator) -> DeadLetters:
        return fetch_dead(op)

    def show(self, data: DeadLetters) -> None:
        self._data = data
        self._groups = {g.id: g for g in data.groups}
        self.marked_table.keep_marks(set(self._groups))
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
                    g.id,
                    [
                        ident(g.kind, limit=14),
                        ident(g.code, limit=12),
                        count(g.last_hour),
                        count(g.last_day),
                        count(g.last_week),
                        age(g.last_at, now),
                        one_line(g.fingerprint or "(no message)", limit=200),
                    ],
                )
            )
        self.query_one("#groups", LiveTable).sync(rows)
        info = Text(
            f"{plural(data.dead, 'dead job')} in {plural(data.group_count, 'group')}"
        )
        if data.group_count > len(data.groups):
            info.append(f" (the busiest {len(data.groups):,} shown)")
        info.append(" · ages are since the job died", style="dim")
        if self.marks:
            info.append("  ")
            info.append_text(self.marked_badge())
        self.query_one("#info", Static).update(info)
        self._paint_sample()

    @property
    def marks(self) -> set[str]:
        """The marked groups' ids (the table's marks: space, shift+↑↓)."""
        return self.marked_table.marks

    def paint_marks(self) -> None:
        self._paint()

    def selected(self) -> DeadGroup | None:
        key = self.query_one("#groups", LiveTable).current_key
        return self._groups.get(key) if key is not None else None

    @on(DataTable.RowHighlighted, "#groups")
    def _highlighted(self) -> None:
        self._paint_sample()

    def _paint_sample(self) -> None:
        g = self.selected()
        box = self.query_one("#sample", Static)
        if g is None or self._data is None:
            box.update(Text("✔ no dead letters", style=style_of("state-completed")))
            return
        now = self.console.now()
        text = Text()
        text.append_text(idents([g.kind, g.code], sep=" / ", limit=60))
        text.append(
            f": {plural(g.count, 'dead job')}, first seen {age(g.first_at, now)} ago,"
            f" last seen {age(g.last_at, now)} ago · group {g.id}\n"
        )
        text.append("Newest error", style="bold")
        j = self._data.samples.get(g.sample_job_id)
        if j is not None:
            text.append(f" (job {j.id}, attempt {j.attempt}/{j.max_attempts}, died ")
            text.append(f"{stamp(j.finished_at, now)}, queue ")
            text.append_text(ident(j.queue, limit=30))
            text.append(")")
        else:
            text.append(f" (job {g.sample_job_id})")
        text.append("\n")
        text.append(f"{g.code}: ", style="bold")
        text.append_text(plain(g.sample_message or "(no message)", limit=600))
        box.update(text)

    # -- actions ------------------------------------------------------------------------------
    def targets(self) -> list[DeadGroup]:
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
        """space (from the palette too): the table's own mark."""
        self.marked_table.action_mark()

    def action_clear(self) -> None:
        self.marked_table.clear_marks()

    def action_open(self) -> None:
        """enter: exactly this group's jobs (``state:dead kind:K`` would be wider: it holds the
        kind's other groups too)."""
        g = self.selected()
        if g is not None:
            self.console.show_jobs(f"group:{g.id}", came_from="dead")

    def action_act(self, action: str) -> None:
        """r, D: requeue or delete every job of the marked groups (or the highlighted one)."""
        groups = self.targets()
        if not groups:
            return
        scope = "; ".join(f"{g.kind} / {g.code}: {g.fingerprint or '(no message)'}"
                          f" (group {g.id})" for g in groups)
        self.console.propose(
            Plan(
                verb=VERBS[action],
                noun="dead job",
                count=sum(g.count for g in groups),
                scope=f"{plural(len(groups), 'group')}: {scope}",
                cli=group_cli(action, groups),
                run=lambda op: act_on_groups(op, action, groups),
                report=bulk_report,
            ),
            after=self.action_clear,
        )
