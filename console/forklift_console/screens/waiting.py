"""Retries and Scheduled (``:retries``, ``:scheduled``): the jobs waiting for their time.

Retries lists retryable jobs (failed, backing off) soonest first, with the attempt and the
last error; Scheduled lists jobs enqueued for later. ``n`` runs the job under the cursor (or
the marked ones) now — a retry now keeps its attempt count and error history — after a
confirmation that shows the CLI command; ``C`` cancels. Both go through the operator API, so
they are audited and refused in read-only mode. ``/`` filters on the server (the jobs filter:
``queue:mail kind:x "text"``), ``s``/``S`` sort on the server, ``]``/``[`` page.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.widgets import Static

from forklift.ops import ActionResult, BulkReport, JobFilter, JobPage, JobSummary, Operator, Sort
from forklift.ops.runbook import cli
from forklift_console.plan import Plan
from forklift_console.screens.base import ConsoleScreen
from forklift_console.screens.job import JobScreen
from forklift_console.screens.listing import FILTER_KEY, MarkedList, open_filter
from forklift_console.widgets.filterbar import FilterError, FilterLine, parse
from forklift_console.widgets.table import Column, LiveTable
from forklift_console.widgets.text import age, ident, one_line, plural, until

PAGE = 100
#: What the ``/`` filter line says it takes.
HINT = '/ filter: queue:mail kind:send_email tag:vip id:100..200 "text in args or errors"'
#: CLI words and sentence verbs of the two actions.
CLI_WORDS = {"run_now": "run-now", "cancel": "cancel"}


@dataclass(frozen=True)
class Request:
    flt: JobFilter
    sort: Sort
    cursor: str | None


def _report(verb: str, report: BulkReport | ActionResult, asked: int) -> str:
    if isinstance(report, ActionResult):
        how = {"made_available": "available now: a worker was woken",
               "cancelled": "cancelled", "cancel_requested": "asked to stop"}
        return f"{verb}: job {report.job_id} {how.get(report.outcome, report.outcome)}"
    done = report.outcomes.get("made_available", 0) + report.outcomes.get("cancelled", 0)
    text = f"{verb}: {plural(done, 'job')}"
    if report.outcomes.get("cancel_requested"):
        text += f", {report.outcomes['cancel_requested']:,} asked to stop"
    left = asked - report.done
    if left > 0:
        text += f"; {plural(left, 'job')} had already moved on (not waiting any more)"
    return text


def keys(run_verb: str) -> list[BindingType]:
    """Each screen lists its keys whole (help and the palette read a class's own BINDINGS)."""
    return [
        Binding("enter", "open", "Detail"),
        Binding("n", "run_now", run_verb),
        Binding("C", "cancel", "Cancel", key_display="C"),
        Binding("right_square_bracket", "page(1)", "Next page", key_display="]"),
        Binding("left_square_bracket", "page(-1)", "Prev page", key_display="[", show=False),
        Binding("escape", "clear", "Clear marks", show=False),
        FILTER_KEY,
    ]


class WaitingScreen(MarkedList, ConsoleScreen[tuple[Request, JobPage]]):
    """Jobs in one waiting state, soonest first, a page at a time."""

    STATE: ClassVar[str] = "scheduled"
    NOUN: ClassVar[str] = "scheduled job"
    NOUNS: ClassVar[str] = "scheduled jobs"
    RUN_VERB: ClassVar[str] = "Run now"
    action_focus_filter = open_filter

    def __init__(self) -> None:
        super().__init__()
        self.filter = JobFilter()
        self.sort = Sort("run_at", descending=False)
        self._cursors: list[str | None] = [None]
        self._page: JobPage | None = None
        self._rows: dict[str, JobSummary] = {}

    def columns(self) -> list[Column]:
        raise NotImplementedError

    def cells(self, j: JobSummary, now: datetime) -> list[Text | str]:
        raise NotImplementedError

    def compose_body(self) -> ComposeResult:
        with Vertical(id="body"):
            yield FilterLine(self.MODE, "jobs", apply=self._apply_filter, hint=HINT)
            yield Static(id="info")
            columns = self.columns()
            first = next(c.key for c in columns if c.sort == self.sort.key)
            yield LiveTable(columns, id=self.MODE, markable=True, server_sort=True,
                            sort=(first, self.sort.descending))

    @property
    def table(self) -> LiveTable:
        return self.query_one(f"#{self.MODE}", LiveTable)

    def on_mount(self) -> None:
        super().on_mount()
        self.table.focus()

    # -- filter, sort, pages ------------------------------------------------------------------
    def _apply_filter(self, text: str) -> str | None:
        try:
            flt = parse(text)
        except FilterError as exc:
            return str(exc)
        if flt.states and flt.states != (self.STATE,):
            return f"this list shows {self.STATE} jobs only; use the Jobs screen (3) for others"
        self.filter = replace(flt, states=())
        self._restart()
        return None

    @on(LiveTable.SortChanged)
    def _sorted(self, event: LiveTable.SortChanged) -> None:
        column = next((c for c in self.table.data_columns if c.key == event.column), None)
        if column is not None and column.sort is not None:
            self.sort = Sort(column.sort, event.descending)
            self._restart()

    def _restart(self) -> None:
        self._cursors = [None]
        self.table.clear_marks()
        self.reload()

    def action_page(self, step: int) -> None:
        page = self._page
        if step > 0:
            if page is None or page.next_cursor is None:
                self.notify("this is the last page")
                return
            self._cursors.append(page.next_cursor)
        elif len(self._cursors) > 1:
            self._cursors.pop()
        else:
            self.notify("this is the first page", title="Prev page")
            return
        self.table.move_cursor(row=0)
        self.reload()

    # -- data ---------------------------------------------------------------------------------
    def fetch(self, op: Operator) -> tuple[Request, JobPage]:
        req = Request(replace(self.filter, states=(self.STATE,)), self.sort, self._cursors[-1])
        return req, op.jobs(req.flt, sort=req.sort, limit=PAGE, cursor=req.cursor, count=True)

    def show(self, answer: tuple[Request, JobPage]) -> None:
        req, page = answer
        if req.sort != self.sort or req.cursor != self._cursors[-1] or (
            replace(req.flt, states=()) != self.filter
        ):
            return  # an answer to a sort, filter or page the operator has since left
        self._page = page
        self._rows = {str(j.id): j for j in page.jobs}
        now = self.console.now()
        self.table.sync([(j.id, self.cells(j, now)) for j in page.jobs])
        self.table.keep_marks(set(self._rows))
        self._paint_info()

    def _paint_info(self) -> None:
        page = self._page
        text = Text()
        if page is None:
            text.append("loading…", style="dim")
        elif not page.jobs:
            text.append(f"no {self.NOUNS}" + (" match the filter" if self.filter != JobFilter()
                                               else ""))
        else:
            first = (len(self._cursors) - 1) * PAGE
            text.append(f"{self.NOUNS} {first + 1:,}–{first + len(page.jobs):,} of"
                        f" {page.count_text} ")
            text.append(f" · page {len(self._cursors)} · {self.table.sort_text}", style="dim")
        if self.table.marks:
            text.append("  ")
            text.append_text(self.marked_badge())
        self.query_one("#info", Static).update(text)
        for line in self.query(FilterLine):
            line.count_text = f"{page.count_text} match" if page is not None else ""

    def paint_marks(self) -> None:
        self._paint_info()

    # -- actions ------------------------------------------------------------------------------
    def current(self) -> JobSummary | None:
        key = self.table.current_key
        return self._rows.get(key) if key is not None else None

    def can(self, action: str) -> bool | None:
        if action in ("run_now", "cancel", "open"):
            return True if (self.current() or (action != "open" and self.table.marks)) else None
        return True

    def reason(self, action: str, parameters: tuple[object, ...]) -> str | None:
        if action in ("run_now", "cancel", "open"):
            return f"no {self.NOUN} is highlighted" + (
                " (none match the filter)" if self.filter != JobFilter() else "")
        return None

    def targets(self) -> list[int]:
        marks = self.table.marks
        if marks:
            return sorted(int(k) for k in marks)
        job = self.current()
        return [job.id] if job is not None else []

    def _propose(self, action: str, verb: str) -> None:
        ids = self.targets()
        if not ids:
            return
        flt = JobFilter(ids=tuple(ids))

        def run(op: Operator) -> BulkReport | ActionResult:
            if len(ids) == 1:  # one job: the one-job call, audited as such
                return op.run_now(ids[0]) if action == "run_now" else op.cancel(ids[0])
            return op.bulk(action, flt)

        self.console.propose(
            Plan(
                verb=verb, noun=self.NOUN, count=len(ids), ids=tuple(ids),
                cli=cli("jobs", CLI_WORDS[action], *ids, "--yes"),
                run=run,
                report=lambda r: _report(verb, r, len(ids)),
            ),
            after=self.table.clear_marks,
        )

    def action_run_now(self) -> None:
        self._propose("run_now", self.RUN_VERB)

    def action_cancel(self) -> None:
        self._propose("cancel", "Cancel")

    def action_clear(self) -> None:
        if not self.table.marks:
            self.notify("no row is marked: space marks one", title="Clear marks")
            return
        self.table.clear_marks()

    def action_open(self) -> None:
        job = self.current()
        if job is not None:
            self.app.push_screen(JobScreen(job.id))


class RetriesScreen(WaitingScreen):
    MODE = "retries"
    STATE = "retryable"
    NOUN = "retryable job"
    NOUNS = "retries"
    RUN_VERB = "Retry now"
    HELP = (
        "Jobs that failed and wait to try again (retryable), soonest retry first: the attempt,"
        " when the next try is due and the last error. n retries the job under the cursor (or"
        " the marked ones: space, shift+↑↓) now, keeping its attempt count and error history;"
        " C cancels; enter opens the job. / filters (queue:mail kind:x \"text\"), s sorts by"
        " the next column (id, next try, last try), S reverses, ] and [ page."
    )
    BINDINGS: ClassVar[list[BindingType]] = keys("Retry now")

    def columns(self) -> list[Column]:
        return [
            Column("id", "Id", 7, sort="id"),
            Column("queue", "Queue", 10),
            Column("kind", "Kind", 14),
            Column("attempt", "Try", 5),
            Column("next", "Next try", 10, sort="run_at"),
            Column("last", "Failed", 7, sort="attempted_at"),
            Column("error", "Last error", None),
        ]

    def cells(self, j: JobSummary, now: datetime) -> list[Text | str]:
        error = Text()
        if j.last_error_code:
            error.append(f"{j.last_error_code}: ", style="bold")
        error.append_text(one_line(j.last_error_message or "", limit=160))
        return [
            str(j.id),
            ident(j.queue, limit=10),
            ident(j.kind, limit=14),
            f"{j.attempt}/{j.max_attempts}",
            until(j.run_at, now),
            age(j.attempted_at, now),
            error,
        ]


class ScheduledScreen(WaitingScreen):
    MODE = "scheduled"
    STATE = "scheduled"
    NOUN = "scheduled job"
    NOUNS = "scheduled jobs"
    RUN_VERB = "Run now"
    BINDINGS: ClassVar[list[BindingType]] = keys("Run now")
    HELP = (
        "Jobs enqueued to run later (scheduled), soonest first: when each is due, when it was"
        " enqueued and its args. n runs the job under the cursor (or the marked ones: space,"
        " shift+↑↓) now; C cancels; enter opens the job. / filters (queue:mail kind:x"
        ' "text"), s sorts by the next column (id, due, enqueued), S reverses, ] and [ page.'
    )

    def columns(self) -> list[Column]:
        return [
            Column("id", "Id", 7, sort="id"),
            Column("queue", "Queue", 10),
            Column("kind", "Kind", 14),
            Column("due", "Due", 10, sort="run_at"),
            Column("created", "Enqueued", 8, sort="created_at"),
            Column("args", "Args", None),
        ]

    def cells(self, j: JobSummary, now: datetime) -> list[Text | str]:
        return [
            str(j.id),
            ident(j.queue, limit=10),
            ident(j.kind, limit=14),
            until(j.run_at, now),
            age(j.created_at, now),
            one_line(j.args_preview, limit=160),
        ]
