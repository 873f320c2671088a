"""What every console screen shares: the chrome, live refresh, and the read-only policy."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable
from typing import ClassVar, Generic, TypeVar, cast

from rich.text import Text
from textual.actions import parse as parse_action
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.css.query import NoMatches
from textual.screen import Screen
from textual.widgets import DataTable, Footer
from textual.worker import get_current_worker

from forklift.ops import Operator
from forklift_console.host import ConsoleHost
from forklift_console.widgets.filterbar import FilterLine
from forklift_console.widgets.header import (
    CommandEcho,
    StaleBanner,
    StatusBar,
    TabBar,
    screen_label,
)
from forklift_console.widgets.rows import RowFilterError, parse_rows
from forklift_console.widgets.table import Cell, Column, LiveTable

D = TypeVar("D")

#: Actions that change the database. Read-only mode disables exactly these, here and only here
#: (the operator API refuses them too, in core, whoever calls it).
WRITE_ACTIONS: frozenset[str] = frozenset(
    {"act", "requeue", "cancel", "delete", "toggle_pause", "pause", "resume", "drain",
     "run_now", "rate_up", "rate_down", "step_rate", "limit", "prune", "enable", "disable",
     "resume_paused", "replay"}
)
#: Actions on the row under the cursor. Run from the command palette, they first ask which
#: row (the palette may be opened on another screen, where that cursor is out of sight).
ROW_ACTIONS: frozenset[str] = frozenset(
    {"act", "requeue", "cancel", "delete", "toggle_pause", "pause", "resume", "drain",
     "run_now", "rate_up", "rate_down", "step_rate", "retry", "edit_limit", "open", "enable",
     "disable"}
)
#: Below this many columns a screen may use its compact layout.
NARROW = 100
READ_ONLY_WHY = (
    "the console is read-only (--read-only, FORKLIFT_READ_ONLY or a read-only database role)"
)


def own_bindings(node: object) -> list[BindingType]:
    """The console's bindings of ``node`` (its class's, or the nearest console class's):
    Textual's own (tab "Focus Next", ctrl+c) are not the console's keys to list."""
    for cls in type(node).__mro__:
        if cls.__module__.startswith("forklift_console") and "BINDINGS" in cls.__dict__:
            return list(cls.__dict__["BINDINGS"])
    return []


class ConsoleScreen(Screen[None], Generic[D]):
    """A screen that shows a snapshot fetched in a background thread and refreshed on a tick.

    Subclasses implement :meth:`fetch` (runs in a worker thread, calls the operator API) and
    :meth:`show` (runs on the UI thread with the result). A failing fetch never reaches the
    screen: the app shows a stale banner and the old data stays up.
    """

    MODE: ClassVar[str] = ""
    #: Ticks never start a fetch sooner than this after the last one started (seconds).
    MIN_INTERVAL: ClassVar[float] = 0.0
    #: ...nor before the last fetch's duration times this: a query that takes 0.7 s on a
    #: million rows runs at most a third of the time, whatever the refresh rate.
    DUTY: ClassVar[float] = 3.0
    #: Shown in the help screen above the keys.
    HELP: ClassVar[str] = ""
    #: This screen's actions that act on the highlighted row (see :data:`ROW_ACTIONS`).
    ROW_ACTIONS: ClassVar[frozenset[str]] = ROW_ACTIONS

    #: What enter says on a row of this screen that nothing opens (a screen with an ``open``
    #: key opens its main list's rows with it).
    NOTHING_TO_OPEN: ClassVar[str] = "a row here is shown whole: there is nothing more to open"
    #: The ``open`` key opens a row of any list of the screen, not only the first one.
    OPENS_EVERY_LIST: ClassVar[bool] = False

    #: The first visit focuses the list (not a filter field above it); so does every arrival.
    AUTO_FOCUS = "LiveTable, OptionList"

    #: The id of the table whose columns change with the width (see :meth:`layout_columns`).
    LAYOUT_TABLE: ClassVar[str | None] = None

    def __init__(self) -> None:
        super().__init__()
        self._narrow = False
        #: The last rows given to :meth:`sync_layout`, by column key, to lay out again.
        self._layout_rows: list[tuple[str, dict[str, Cell]]] = []
        # Both flags change only on the UI thread, together with ``loads``: a load is over
        # exactly when its snapshot is shown (or its failure reported), never later.
        self._loading = False
        self._again = False  # a reload was asked for while a load was on its way
        self._next_tick = 0.0  # monotonic time before which a tick does not fetch
        self.loads = 0  # completed loads, for tests waiting on fresh data
        self.failures = 0  # loads that failed (reported in the banner)
        self._when_loaded: list[Callable[[], None]] = []
        #: Set by the app when it switches to this screen (not when a dialog closes).
        self.arriving = False

    @property
    def console(self) -> ConsoleHost:
        """The app, as a screen sees it (the app is a :class:`ConsoleHost`)."""
        return cast("ConsoleHost", self.app)

    # -- layout -------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield StatusBar(id="status")
        yield TabBar(id="tabs")
        yield StaleBanner(id="banner")
        yield from self.compose_body()
        yield CommandEcho(id="echo")
        yield Footer(compact=self.is_narrow(), show_command_palette=not self.is_narrow())

    def compose_body(self) -> ComposeResult:
        yield from ()

    @property
    def title_text(self) -> str | None:
        """Extra words after the tabs (the job being shown, the filter)."""
        return None

    def on_mount(self) -> None:
        self.paint_chrome()

    # -- a table laid out for the width -------------------------------------------------------
    def layout_columns(self, narrow: bool) -> list[Column]:
        """The columns of :attr:`LAYOUT_TABLE` at this width (below :data:`NARROW` columns:
        ``narrow``), for a screen whose table keeps what matters in view at 80 columns."""
        raise NotImplementedError

    def layout_cells(self, key: str, narrow: bool) -> dict[str, Cell]:
        """A row's cells by column key; a narrow layout leaves some out (or draws them
        shorter). Called again for every row when the width crosses :data:`NARROW`."""
        raise NotImplementedError

    def laid_out_columns(self) -> list[Column]:
        self._narrow = self.is_narrow()
        return self.layout_columns(self._narrow)

    def sync_layout(self, keys: Iterable[str]) -> None:
        """Show these rows (by key, cells from :meth:`layout_cells`) in the layout table."""
        assert self.LAYOUT_TABLE is not None
        table = self.query_one(f"#{self.LAYOUT_TABLE}", LiveTable)
        shown = [c.key for c in table.data_columns]
        rows = [(k, self.layout_cells(k, self._narrow)) for k in keys]
        self._layout_rows = rows
        table.sync([(k, [cells.get(c, "") for c in shown]) for k, cells in rows])

    def on_resize(self) -> None:
        # Below NARROW columns the keys go closer together and the palette key (ctrl+p, in
        # the help) gives way: at 80 columns the Dead letters footer lost its last keys.
        narrow = self.is_narrow()
        for footer in self.query(Footer):
            if footer.compact != narrow:
                footer.compact = narrow
                footer.show_command_palette = not narrow
                footer.refresh(recompose=True)
        if self.LAYOUT_TABLE is None or not self.is_mounted or self.is_narrow() == self._narrow:
            return
        table = self.query_one(f"#{self.LAYOUT_TABLE}", LiveTable)
        key = table.current_key
        table.set_columns(self.laid_out_columns())
        # A / filter names columns by their place in the row: place it on the new columns.
        for line in self.query(FilterLine):
            if line.target == self.LAYOUT_TABLE and line.applied and line.apply is None:
                with contextlib.suppress(RowFilterError):
                    table.row_filter = parse_rows(line.applied, table.filter_names())
        self.sync_layout([k for k, _ in self._layout_rows])
        if key is not None:
            table.move_to_key(key)

    def focus_list(self) -> None:
        """Focus this screen's main list (what :attr:`AUTO_FOCUS` names), if it has one."""
        lists = [w for w in self.query(self.AUTO_FOCUS or "LiveTable") if w.display]
        if lists and self.is_attached:
            lists[0].focus()

    def on_screen_resume(self) -> None:
        if self.arriving:
            # Arriving on a screen puts the focus on its list, whatever an earlier visit
            # left focused: tab then always leads to the same pane.
            self.arriving = False
            self.focus_list()
        self.paint_chrome()
        self.reload()

    def on_screen_suspend(self) -> None:
        # A dialog opening over this screen holds the refresh: the header says so at once,
        # not at the next tick.
        self.paint_chrome()

    def paint_chrome(self) -> None:
        app = self.console
        now = app.now()
        for bar in self.query(StatusBar):
            bar.show(app.status, now)
        for banner in self.query(StaleBanner):
            banner.show(app.status, now)
        for tabs in self.query(TabBar):
            tabs.show(self.MODE, self.title_text)
        for echo in self.query(CommandEcho):
            echo.show(app.last_command)

    # -- read-only, in one place --------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in WRITE_ACTIONS and self.console.read_only:
            return None  # shown, disabled
        try:
            state = self.can_with(action, parameters) if parameters else self.can(action)
        except NoMatches:
            # Asked (by the footer) while the screen's widgets are not mounted yet, or no
            # longer: the key is shown disabled until they are, never an error that ends the app.
            return None
        if state and action in self.ROW_ACTIONS and self._no_row():
            return None  # a row action with no row: the key says why (list_state)
        return state

    def _no_row(self) -> bool:
        focused = self.focused
        return isinstance(focused, LiveTable) and focused.row_count == 0

    def palette(self) -> Iterable[tuple[str, str, str]]:
        """(title, help, action) for the command palette: this screen's keyed actions."""
        label = screen_label(self.MODE)
        for b in own_bindings(self):
            if not isinstance(b, Binding) or not b.description:
                continue
            _, name, _ = parse_action(b.action)
            if name == "back":
                continue
            title = f"{label}: {b.description}"
            if name in WRITE_ACTIONS and self.console.read_only:
                title += " (disabled: read-only)"
            yield title, f"key {b.key_display or b.key}", b.action

    def can(self, action: str) -> bool | None:
        """Whether ``action`` applies right now (True), is shown disabled (None) or hidden."""
        return True

    def can_with(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """:meth:`can` for an action with parameters (``act('requeue')``)."""
        return self.can(action)

    def why_not(self, action: str, parameters: tuple[object, ...] = ()) -> str:
        """Why ``action`` is disabled right now, in words for the operator (a disabled key
        pressed says this, and the help shows it beside the key)."""
        if action in WRITE_ACTIONS and self.console.read_only:
            return READ_ONLY_WHY
        return self.reason(action, parameters) or self.list_state()

    def list_state(self) -> str:
        """The cause a key finds nothing to act on, when the screen names none of its own."""
        if self.loads == 0:
            return "nothing is loaded yet: the first refresh has not answered"
        table = self.main_list()
        if table is None:
            return "this screen shows no list to act on"
        if table.row_count == 0:
            if table.total:
                return f"the filter hides all {table.total:,} rows"
            return "the list is empty"
        return f"not for the highlighted row ({table.current_key})"

    def main_list(self) -> LiveTable | None:
        """The list the keys act on: the focused one, else the first shown."""
        focused = self.focused
        if isinstance(focused, LiveTable):
            return focused
        return next((t for t in self.query(LiveTable) if t.display), None)

    # -- enter on a row ------------------------------------------------------------------------
    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        """enter on a row: the screen's ``open`` key (through the same check as the key, so a
        row that cannot be opened says why), or a sentence saying there is nothing to open."""
        event.stop()
        table = event.data_table
        if isinstance(table, LiveTable):
            self.enter_row(table)

    def on_live_table_nothing_selected(self, event: LiveTable.NothingSelected) -> None:
        event.stop()
        self.notify(f"enter: nothing to open: {self.list_state()}", title="nothing to open",
                    severity="warning")

    def enter_row(self, table: LiveTable) -> None:
        first = next((t for t in self.query(LiveTable) if t.display), None)
        opens = any(isinstance(b, Binding) and b.action == "open" for b in type(self).BINDINGS)
        if opens and (table is first or self.OPENS_EVERY_LIST):
            self.call_later(self._run_picked, "open")
        else:
            self.notify(f"enter: {self.NOTHING_TO_OPEN}", title="nothing to open")

    def reason(self, action: str, parameters: tuple[object, ...]) -> str | None:
        """A screen's own :meth:`why_not` (read-only is handled for every screen)."""
        return None

    # -- the command palette's "which one?" ---------------------------------------------------
    def palette_targets(self, action: str) -> list[tuple[str, Text]]:
        """The rows an action from the palette may act on: (key, the row as shown)."""
        tables = self.query(LiveTable)
        if not tables:
            return []
        table = tables.first()
        out = []
        for key in table.keys:
            cells = table.get_row(key)
            label = Text("  ").join(
                c if isinstance(c, Text) else Text(str(c)) for c in cells
            )
            label.rstrip()
            out.append((key, label))
        return out

    def palette_current(self) -> str | None:
        tables = self.query(LiveTable)
        return tables.first().current_key if tables else None

    def act_on(self, action: str, key: str) -> None:
        """Run ``action`` on the row ``key`` (picked in the palette): the cursor goes there
        first, so the action's dialog names it as every key press would."""
        tables = self.query(LiveTable)
        if not tables or not tables.first().move_to_key(key):
            self.notify(f"{key!r} is no longer on this screen", severity="warning")
            return
        self.call_after_refresh(self._run_picked, action)

    async def _run_picked(self, action: str) -> None:
        _, name, params = parse_action(action)
        if self.check_action(name, params):
            await self.run_action(action)
        else:
            self.notify(self.why_not(name, params), title="not available", severity="warning")

    def is_narrow(self) -> bool:
        return self.app.size.width < NARROW

    def on_data_table_row_highlighted(self) -> None:
        self.refresh_bindings()  # what the keys act on just changed

    # -- live data ----------------------------------------------------------------------------
    def fetch(self, op: Operator) -> D:
        """Runs in a worker thread: read what the screen shows, through the operator API."""
        raise NotImplementedError

    def show(self, data: D) -> None:
        raise NotImplementedError

    def reload(self) -> None:
        """Fetch a fresh snapshot now (the operator asked, or an action changed the data).

        While a load is on its way, one more runs after it: that load may have read the
        database before whatever prompted this call, and must not be the last word.
        """
        if not self.is_attached:
            return
        if self._loading:
            self._again = True
            return
        self._loading = True
        self._load()

    def when_loaded(self, fn: Callable[[], None]) -> None:
        """Call ``fn`` on the UI thread once this screen shows data (now, if it already does)."""
        if self.loads > 0 and self.is_attached:
            fn()
        else:
            self._when_loaded.append(fn)

    def tick(self) -> None:
        """The refresh timer's fetch: skipped while the last one says the database is busy."""
        if time.monotonic() >= self._next_tick:
            self.reload()

    def _load(self) -> None:
        self.run_worker(
            self._load_thread, thread=True, exclusive=True, group="load", exit_on_error=False
        )

    def _load_thread(self) -> None:
        app = self.console
        worker = get_current_worker()
        began = time.monotonic()
        data: D | None = None
        error: Exception | None = None
        try:
            data = app.backend.call(self.fetch, deadline=app.backend.fetch_deadline)
            took = time.monotonic() - began
            self._next_tick = began + max(self.MIN_INTERVAL, self.DUTY * took)
        except Exception as exc:  # the console must outlive any failure
            error = exc
        # Always back to the UI thread, cancelled or not: that is where the load ends. (A
        # RuntimeError: the app is shutting down and nobody is left to show the result.)
        with contextlib.suppress(RuntimeError):
            self.app.call_from_thread(self._finished, data, error, worker.is_cancelled)

    def _finished(self, data: D | None, error: Exception | None, cancelled: bool) -> None:
        self._loading = False
        try:
            if cancelled:
                return
            if error is not None:
                self.failures += 1
                self.console.fetch_failed(error)
                return
            try:
                self.show(cast("D", data))
            except Exception as exc:  # a rendering bug shows in the banner, not a dead app
                self.failures += 1
                self.console.fetch_failed(exc)
            else:
                self.console.fetch_ok()
                self.loads += 1
                waiting, self._when_loaded = self._when_loaded, []
                for fn in waiting:
                    fn()
            finally:
                self.refresh_bindings()  # actions that apply to what is shown now
        finally:
            if self._again:
                self._again = False
                self.reload()
