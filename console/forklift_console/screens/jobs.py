"""Jobs (key 3): a filter bar, a keyset-paged list, marks, bulk actions; enter opens a job."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.widgets import DataTable, Input, Static

from forklift.ops import JobFilter, JobPage, JobSummary, Operator, Sort
from forklift_console.plan import Plan
from forklift_console.screens.base import ConsoleScreen
from forklift_console.screens.job import VERBS, JobScreen, copy_out, job_plan
from forklift_console.screens.jobs_bulk import bulk_cli as bulk_cli  # imported from here
from forklift_console.screens.jobs_bulk import bulk_report as bulk_report
from forklift_console.screens.jobs_bulk import ids_cli, marked_report
from forklift_console.screens.jobs_rows import current_line, job_cells, reconciled_total
from forklift_console.screens.listing import MarkedList
from forklift_console.screens.saved import SavedFiltersScreen
from forklift_console.widgets.filterbar import FilterBar, FilterError, parse, to_text
from forklift_console.widgets.saved_filters import SavedFilters
from forklift_console.widgets.table import Column, LiveTable
from forklift_console.widgets.text import MARK, plain

PAGE = 100
#: Recount the matches (capped at 10,000) at most this often; the page itself refreshes
#: on every tick. A count with a text filter can read many rows.
RECOUNT_SECONDS = 10.0



@dataclass(frozen=True)
class Request:
    flt: JobFilter
    cursor: str | None
    count: bool
    sort: Sort


class JobsScreen(MarkedList, ConsoleScreen[tuple[Request, JobPage]]):
    MODE = "jobs"
    HELP = (
        "Type / then a filter: queue:mail state:dead,retryable kind:send_email tag:vip batch:42"
        " id:100..200, a payload field (args.customer.id:42, args.plan:gold; a number also"
        ' matches its text) and free text (or "a quoted phrase") found in args and errors. The list'
        " pages by keyset ([ and ] move a page), so it stays quick on millions of rows; s sorts"
        " the whole list (on the server) by the next column, S reverses. space"
        " marks a job, shift+↑↓ a range, a marks all jobs matching the filter; r requeues,"
        " C cancels, D deletes"
        " the marked jobs (or the one under the cursor). Every action asks first. y copies the"
        " highlighted job's id. F lists the saved filters (enter applies one) and saves the"
        " current filter under a name."
    )
    DEFAULT_CSS = """
    JobsScreen #filter-row { height: 1; }
    JobsScreen #filter-row > #filter { width: 1fr; }
    JobsScreen #filter-why { width: auto; max-width: 60%; height: 1; padding: 0 1; display: none; }
    JobsScreen #filter-why.-shown { display: block; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("slash", "focus_filter", "Filter", key_display="/"),
        Binding("enter", "open", "Detail"),
        Binding("space", "mark", "Mark"),
        Binding("a", "mark_all", "Mark all", show=False),
        Binding("r", "act('requeue')", "Requeue"),
        Binding("C", "act('cancel')", "Cancel", key_display="C"),
        Binding("D", "act('delete')", "Delete", key_display="D"),
        Binding("y", "copy_id", "Copy id", show=False),
        Binding("F", "saved_filters", "Saved filters", show=False, key_display="F"),
        Binding("right_square_bracket", "page(1)", "Next page", key_display="]"),
        Binding("left_square_bracket", "page(-1)", "Prev page", key_display="[", show=False),
        Binding("escape", "back", "Back", show=False),
    ]

    def __init__(self) -> None:
        super().__init__()
        self._narrow = False
        self.filter = JobFilter()
        self.filter_text = ""
        self.sort = Sort()  # newest first
        self.came_from: str | None = None
        #: What is wrong with the filter being typed (shown beside it), or None.
        self.filter_problem: str | None = None
        self._refused: str | None = None  # why the last filter entered was not applied
        self._cursors: list[str | None] = [None]  # start cursor of each page seen so far
        self._page: JobPage | None = None
        self._rows: dict[int, JobSummary] = {}
        self._counted_at: datetime | None = None
        self._count: tuple[int, bool] | None = None

    def compose_body(self) -> ComposeResult:
        with Vertical(id="body"):
            with Horizontal(id="filter-row"):
                yield FilterBar(id="filter")
                yield Static(id="filter-why")
            yield Static(id="info")
            yield LiveTable(self._columns(), id="jobs", markable=True, server_sort=True)
            yield Static(id="current")

    def _columns(self) -> list[Column]:
        """At 80 columns the queue and attempt columns give their room to the error (it
        would have ~12 characters otherwise); the line under the table names them for the highlighted job."""
        self._narrow = self.is_narrow()
        wide = not self._narrow
        # Each sortable column names the operator API's sort key: the server orders the whole
        # list (and its keyset pages), not only the page shown.
        return [
            Column("id", "Id", 7, sort="id"),
            Column("state", "State", 11, sort="state"),
            *([Column("queue", "Queue", 8, sort="queue")] if wide else []),
            Column("kind", "Kind", 12, sort="kind"),
            *([Column("attempt", "Try", 5, sort="attempt")] if wide else []),
            Column("age", "Age", 6, sort="changed_at"),
            Column("info", "Error / args", None),
        ]

    def on_mount(self) -> None:
        super().on_mount()
        bar = self.query_one(FilterBar)
        bar.value = self.filter_text
        self.query_one("#jobs", LiveTable).focus()

    def on_resize(self) -> None:
        if not self.is_mounted or self.is_narrow() == self._narrow:
            return
        table = self.query_one("#jobs", LiveTable)
        key = table.current_key
        table.set_columns(self._columns())
        self._repaint_rows()
        if key is not None:
            table.move_to_key(key)

    @property
    def title_text(self) -> str | None:
        return self.filter_text or None

    # -- filter -------------------------------------------------------------------------------
    def set_filter_text(self, text: str, *, came_from: str | None = None) -> bool:
        """Apply a filter typed by the operator (or handed over by a drill-down)."""
        try:
            flt = parse(text)
        except FilterError as exc:
            self.notify(str(exc), title="filter", severity="error")
            return False
        self.filter, self.filter_text = flt, to_text(flt)
        self.came_from = came_from
        if self.is_mounted:
            self.table.clear_marks()
        self._cursors = [None]
        self._count = None
        self._counted_at = None
        if self.is_mounted:
            self.query_one(FilterBar).value = self.filter_text
            self.paint_chrome()
            self.reload()
        return True

    def action_focus_filter(self) -> None:
        self.query_one(FilterBar).focus()

    def action_saved_filters(self) -> None:
        """F: apply a saved filter, or save the one applied now under a name."""

        def chosen(text: str | None) -> None:
            if text is not None and self.set_filter_text(text, came_from=self.came_from):
                self.notify(f"filter: {text}", title="Saved filters")

        self.app.push_screen(SavedFiltersScreen(SavedFilters(), self.filter_text), chosen)

    @on(Input.Changed, "#filter")
    def _filter_typed(self, event: Input.Changed) -> None:
        """Checked as it is typed: what is wrong shows beside the field before enter."""
        event.stop()
        self.filter_problem = None
        if event.value == self.filter_text and self._refused is not None:
            # The refused filter was put back to what is shown: the reason stays in view.
            self.filter_problem = f"not applied: {self._refused}"
        elif event.value.strip() and event.value != self.filter_text:
            self._refused = None
            try:
                parse(event.value)
            except FilterError as exc:
                self.filter_problem = str(exc)
        why = self.query_one("#filter-why", Static)
        why.update(Text("✖ ").append_text(plain(self.filter_problem))
                   if self.filter_problem else "")
        why.set_class(self.filter_problem is not None, "-shown")

    @on(Input.Submitted, "#filter")
    def _filter_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        try:
            parse(event.value)
            self._refused = None
        except FilterError as exc:
            self._refused = str(exc)
        if self.set_filter_text(event.value, came_from=self.came_from):
            self.query_one("#jobs", LiveTable).focus()
        else:
            # 17.10: a rejected filter must not stay in the line above rows that still show
            # the previous one. Put back what is shown, and say so; the refusal names the typo.
            bar = self.query_one(FilterBar)
            bar.value = self.filter_text
            bar.cursor_position = len(bar.value)
            shown = self.filter_text or "every job (no filter)"
            self.notify(f"still showing: {shown}; you typed: {event.value}",
                        title="filter not applied", severity="warning")

    # -- data ---------------------------------------------------------------------------------
    def fetch(self, op: Operator) -> tuple[Request, JobPage]:
        req = self._request()
        return req, op.jobs(req.flt, sort=req.sort, limit=PAGE, cursor=req.cursor,
                            count=req.count)

    def _request(self) -> Request:
        now = self.console.now()
        recount = (
            self._counted_at is None
            or (now - self._counted_at).total_seconds() >= RECOUNT_SECONDS
        )
        return Request(self.filter, self._cursors[-1], recount, self.sort)

    def show(self, answer: tuple[Request, JobPage]) -> None:
        req, data = answer
        if req.flt != self.filter or req.cursor != self._cursors[-1] or req.sort != self.sort:
            return  # an answer to a filter, page or sort the operator has since left
        self._page = data
        self._rows = {j.id: j for j in data.jobs}
        if req.count:
            self._count = (data.count, data.count_capped)
            self._counted_at = self.console.now()
        elif len(self._cursors) == 1 and self._total(data) != self._count:
            # The count is older than these rows and disagrees with them: count again with
            # the next load (now), and meanwhile say only what the rows prove. (Only on the
            # first page: later pages' positions are themselves estimates.)
            self._counted_at = None
            self.call_after_refresh(self.reload)
        self._repaint_rows()

    def _total(self, page: JobPage) -> tuple[int, bool]:
        """The count reconciled with the rows shown (:func:`reconciled_total`)."""
        return reconciled_total(page, (len(self._cursors) - 1) * PAGE, self._count)

    def _paint_info(self) -> None:
        page = self._page
        text = Text()
        if page is None:
            text.append("loading…", style="dim")
        else:
            first = (len(self._cursors) - 1) * PAGE
            shown = len(page.jobs)
            total, capped = self._total(page)
            count_text = f"{total:,}+" if capped else f"{total:,}"
            if shown:
                text.append(f"jobs {first + 1:,}–{first + shown:,} of {count_text}")
            else:
                text.append("no jobs match" if not first else "no more jobs")
            text.append(f" · page {len(self._cursors)}", style="dim")
            text.append(f" · {self.table.sort_text or 'newest first'}", style="dim")
        if self.all_matching:
            text.append("  ")
            text.append(f" {MARK} ALL MATCHING marked ", style="bold reverse")
        elif self.marks:
            text.append("  ")
            text.append_text(self.marked_badge())
        self.query_one("#info", Static).update(text)

    def _repaint_rows(self) -> None:
        now = self.console.now()
        page = self._page
        if page is not None:
            self.query_one("#jobs", LiveTable).sync(
                [(j.id, job_cells(j, now, wide=not self._narrow)) for j in page.jobs]
            )
        self._paint_info()
        self._paint_current()

    @on(DataTable.RowHighlighted, "#jobs")
    def _highlighted(self) -> None:
        self._paint_current()

    def _paint_current(self) -> None:
        """The highlighted job on one line: what the columns cut or leave out."""
        self.query_one("#current", Static).update(
            current_line(self.current(), self.app.size.width))

    # -- sort, paging and marks ---------------------------------------------------------------
    @on(LiveTable.SortChanged)
    def _sorted(self, event: LiveTable.SortChanged) -> None:
        """s, S, a header click: the server sorts every matching job; back to page 1."""
        column = next((c for c in self.table.data_columns if c.key == event.column), None)
        self.sort = Sort(column.sort, event.descending) if column and column.sort else Sort()
        self._cursors = [None]
        self.table.move_cursor(row=0)
        self.reload()

    def action_page(self, step: int) -> None:
        page = self._page
        if step > 0:
            if page is None or page.next_cursor is None:
                self.notify("this is the last page", severity="information")
                return
            self._cursors.append(page.next_cursor)
        else:
            if len(self._cursors) == 1:
                return
            self._cursors.pop()
        self.query_one("#jobs", LiveTable).move_cursor(row=0)
        self.reload()

    def current(self) -> JobSummary | None:
        key = self.query_one("#jobs", LiveTable).current_key
        return self._rows.get(int(key)) if key is not None else None

    # The marks are the table's (space, shift+↑↓: MarkedList); "all matching" is its all_marked.
    @property
    def table(self) -> LiveTable:
        return self.query_one("#jobs", LiveTable)

    @property
    def marks(self) -> set[int]:
        return {int(k) for k in self.table.marks}

    @property
    def all_matching(self) -> bool:
        return self.table.all_marked

    def paint_marks(self) -> None:
        self._paint_info()

    def action_mark(self) -> None:
        """space (from the palette too): the table's own mark."""
        self.table.action_mark()

    def action_mark_all(self) -> None:
        self.table.mark_all(not self.table.all_marked)

    def action_back(self) -> None:
        if self.marks or self.all_matching:
            self.table.clear_marks()
        elif self.came_from:
            self.console.action_go(self.came_from)

    def action_open(self) -> None:
        job = self.current()
        if job is not None:
            self.app.push_screen(JobScreen(job.id))

    # -- actions ------------------------------------------------------------------------------
    def can(self, action: str) -> bool | None:
        if action == "act":
            return True if (self.marks or self.all_matching or self.current()) else None
        if action == "copy_id":
            return True if self.current() else None
        return True

    def action_copy_id(self) -> None:
        """y: the highlighted job's id to the clipboard (enter, then Y, copies its args)."""
        job = self.current()
        if job is not None:
            copy_out(self.app, str(job.id), f"job {job.id}'s id")

    def reason(self, action: str, parameters: tuple[object, ...]) -> str | None:
        if action in ("act", "copy_id"):
            return ("no job to act on: no job matches the filter" if self.filter_text
                    else "no job to act on: the list is empty")
        return None

    def action_act(self, action: str) -> None:
        """r, C, D on all matching jobs, the marked ones, or the one under the cursor."""
        if self.all_matching:
            self.console.propose_bulk(action, self.filter, self.filter_text, after=self._acted)
            return
        if self.marks:
            ids = sorted(self.marks)
            flt = JobFilter(ids=tuple(ids))
            self.console.propose(
                Plan(
                    verb=VERBS[action],
                    noun="job",
                    count=len(ids),
                    ids=tuple(ids),
                    cli=ids_cli(action, ids),
                    run=lambda op: op.bulk(action, flt),
                    report=lambda r: marked_report(r, len(ids)),
                ),
                after=self._acted,
            )
            return
        job = self.current()
        if job is not None:
            self.console.propose(job_plan(action, job.id, job.state))

    def _acted(self) -> None:
        self.table.clear_marks()

