"""A DataTable that is refreshed in place, row by row, by key; sorted, filtered and marked.

Every list in the console is a :class:`LiveTable`, so every list has the same tools:

- ``s`` sorts by the next column and ``S`` flips the direction, ``o`` picks the column and the
  direction from a list (:mod:`~forklift_console.widgets.sort_pick`; a click on a header sorts by
  that column); the header names the sort with ``▲``/``▼``, not colour alone. A table whose
  rows come from the server a page at a time (``server_sort``) does not reorder its page: it
  posts :class:`LiveTable.SortChanged` and the screen fetches in that order (the table's
  :class:`~forklift_console.widgets.sort_order.SortOrder`).
- a ``/`` filter (see :mod:`forklift_console.widgets.rows`), applied to each snapshot;
- marks, on a ``markable`` table: ``space`` marks a row, ``shift+↓``/``shift+↑`` mark a range
  as the cursor moves; the marks column shows ``✓``, :func:`marks_badge` the count (the
  table's :class:`~forklift_console.widgets.marks.Marks`).

The cursor stays on its row (by key) across a refresh, a re-sort and a new filter.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any, ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widgets import DataTable
from textual.widgets.data_table import CellDoesNotExist, ColumnKey, RowDoesNotExist, RowKey

# Screens import a table's parts from here, with the table.
from forklift_console.widgets.columns import Cell as Cell
from forklift_console.widgets.columns import Column as Column
from forklift_console.widgets.columns import Row as Row
from forklift_console.widgets.marks import MARK_COLUMN, Marks
from forklift_console.widgets.marks import marks_badge as marks_badge
from forklift_console.widgets.rows import RowFilter, column_names
from forklift_console.widgets.sort_order import DOWN as DOWN
from forklift_console.widgets.sort_order import UP as UP
from forklift_console.widgets.sort_order import SortOrder
from forklift_console.widgets.sort_pick import SortPicker


class LiveTable(DataTable[Cell]):
    """Rows carry stable keys (a job id, a queue name); :meth:`sync` applies a new snapshot.

    When the keys come back in the same order only the changed cells are rewritten, so the
    cursor, the scroll position and the operator's place in the list do not move. When rows
    appear, vanish or reorder, the table is rebuilt and the cursor follows its row by key.

    A column declared without a width takes the room the others leave (its text is cut with
    an ellipsis), so the table never scrolls sideways at 80 columns, and keeps that width
    whatever the rows hold, so columns do not jump as the data changes.
    """

    #: Room kept for the vertical scrollbar.
    SCROLLBAR = 2

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("s", "sort_next", "Sort"),
        Binding("S", "sort_reverse", "Reverse sort", key_display="S", show=False),
        Binding("o", "sort_pick", "Sort by…", show=False),
        Binding("space", "mark", "Mark"),
        Binding("shift+down", "mark_range(1)", "Mark range", key_display="⇧↓", show=False),
        Binding("shift+up", "mark_range(-1)", "Mark range up", key_display="⇧↑", show=False),
        # A row cursor goes to the first and last row (DataTable's own home/end scroll
        # sideways, which a table that never scrolls sideways ignores).
        Binding("home", "scroll_top", "", show=False),
        Binding("end", "scroll_bottom", "", show=False),
    ]

    class SortChanged(Message):
        """The operator chose another sort (posted by every table; a ``server_sort`` table's
        screen must fetch in that order)."""

        def __init__(self, table: LiveTable, column: str | None, descending: bool) -> None:
            super().__init__()
            self.table = table
            self.column = column
            self.descending = descending

    class NothingSelected(Message):
        """enter on a list with no row (DataTable says nothing then): the screen says why."""

        def __init__(self, table: LiveTable) -> None:
            super().__init__()
            self.table = table

    def action_select_cursor(self) -> None:
        if self.row_count == 0:
            self.post_message(self.NothingSelected(self))
            return
        super().action_select_cursor()

    class MarksChanged(Message):
        def __init__(self, table: LiveTable) -> None:
            super().__init__()
            self.table = table

    def __init__(
        self,
        columns: Sequence[Column],
        *,
        id: str | None = None,
        markable: bool = False,
        server_sort: bool = False,
        sort: tuple[str, bool] | None = None,
    ) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=False)
        self.markable = markable
        self.server_sort = server_sort
        self._columns = ([Column(MARK_COLUMN, " ", 1)] if markable else []) + list(columns)
        self._keys: list[str] = []
        self._cells: dict[str, tuple[Cell, ...]] = {}
        self._rows: list[Row] = []
        self._flex = next(
            (i for i, c in enumerate(self._columns) if c.width is None), None
        )
        # (not "sort_order": Textual's widgets keep their place among siblings in that name)
        self.ordering = SortOrder(sort)
        self.row_filter = RowFilter()
        self.marking = Marks()
        self.total = 0  # rows in the last snapshot, before the filter
        #: Called after each sync (the filter line's count).
        self.on_synced: list[Callable[[], None]] = []

    def on_mount(self) -> None:
        self._add_columns()
        if self._rows:  # a snapshot that arrived before the table was mounted (see sync)
            self.sync(self._rows, rebuild=True)

    def _add_columns(self) -> None:
        # The flex column gets a width of its own too: DataTable's auto width is measured
        # on idle, and a row drawn before that measurement stays cached at the label's width.
        for col in self._columns:
            self.add_column(self.ordering.label(col), key=col.key, width=col.width or self.flex_width())

    def set_columns(self, columns: Sequence[Column]) -> None:
        """Other columns in place (a compact layout at another width): the rows go, the
        caller syncs them again. The table stays mounted, so it is never missing."""
        self.clear(columns=True)
        self._columns = ([Column(MARK_COLUMN, " ", 1)] if self.markable else []) + list(columns)
        self._flex = next((i for i, c in enumerate(self._columns) if c.width is None), None)
        self._keys, self._cells, self._rows = [], {}, []
        self._add_columns()

    # -- what is shown ------------------------------------------------------------------------
    @property
    def keys(self) -> list[str]:
        return list(self._keys)

    @property
    def current_key(self) -> str | None:
        """The key of the row under the cursor, or None for an empty table."""
        if not self._keys or self.cursor_row < 0:
            return None
        try:
            return str(self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value)
        except (CellDoesNotExist, RowDoesNotExist):
            return None

    @property
    def data_columns(self) -> list[Column]:
        """The screen's columns (without the marks column)."""
        return [c for c in self._columns if c.key != MARK_COLUMN]

    def flex_width(self) -> int:
        # The app's width, not the widget's: before its first layout a widget measures 0.
        width = self.app.size.width
        fixed = sum((c.width or 0) + 2 * self.cell_padding for c in self._columns if c.width)
        return max(8, width - fixed - 2 * self.cell_padding - self.SCROLLBAR)

    def _fit(self, cells: Sequence[Cell]) -> tuple[Cell, ...]:
        if self._flex is None:
            return tuple(cells)
        out = list(cells)
        value = out[self._flex]
        text = value.copy() if isinstance(value, Text) else Text(value)
        text.truncate(self.flex_width(), overflow="ellipsis")
        out[self._flex] = text
        return tuple(out)

    def on_resize(self) -> None:
        if self._flex is None:
            return
        column = self.columns.get(ColumnKey(self._columns[self._flex].key))
        width = self.flex_width()
        if column is not None and column.width != width:
            column.width = width
            self.sync(self._rows, rebuild=True)  # a new width: rewrite every row


    def _arrange(self, rows: Sequence[Row]) -> list[tuple[str, tuple[Cell, ...]]]:
        """The snapshot as shown: filtered, sorted, with the marks column."""
        out = [(str(k), tuple(v)) for k, v in rows]
        self.total = len(out)
        if self.row_filter:
            out = [(k, v) for k, v in out if self.row_filter.keep(v)]
        if not self.server_sort:
            out = self.ordering.apply(out, self.data_columns)
        if self.markable:
            out = [(k, (self.marking.cell(k), *v)) for k, v in out]
        return out

    def sync(self, rows: Sequence[Row], *, rebuild: bool = False, follow: bool = False) -> None:
        """Show a new snapshot. ``follow``: scroll to keep the cursor's row in view (its
        place moved: a re-sort, a new filter)."""
        self._rows = list(rows)
        if not self.columns:
            # A screen's first load can finish before its table is mounted (the columns come
            # with the mount): rows added now would find no columns. on_mount shows them.
            return
        arranged = self._arrange(rows)
        new_keys = [k for k, _ in arranged]
        cells = {k: self._fit(v) for k, v in arranged}
        if new_keys == self._keys and not rebuild:
            for key in new_keys:
                old = self._cells.get(key)
                for index, (col, value) in enumerate(zip(self._columns, cells[key], strict=True)):
                    if old is None or not _same(old[index], value):
                        self.update_cell(key, col.key, value)
            self._cells = cells
            self._synced()
            return
        keep = self.current_key
        scroll_y = self.scroll_y
        self.clear()
        for key in new_keys:
            self.add_row(*cells[key], key=key)
        self._keys, self._cells = new_keys, cells
        if keep is not None and keep in cells:
            self.move_cursor(row=new_keys.index(keep), animate=False, scroll=follow)
            if not follow:
                self.scroll_to(y=scroll_y, animate=False)
        elif new_keys:
            self.move_cursor(row=min(max(self.cursor_row, 0), len(new_keys) - 1), animate=False)
        self._synced()

    def _synced(self) -> None:
        for callback in self.on_synced:
            callback()

    def resync(self, *, follow: bool = True) -> None:
        """Show the last snapshot again (the sort, the filter or the marks changed)."""
        self.sync(self._rows, rebuild=True, follow=follow)

    def move_to_key(self, key: Hashable) -> bool:
        try:
            index = self.get_row_index(RowKey(str(key)))
        except RowDoesNotExist:
            return False
        self.move_cursor(row=index, animate=False)
        return True

    def cell_value(self, key: str, column: str) -> Any:
        return self.get_cell(key, column)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("mark", "mark_range"):
            return self.markable
        return True

    # -- sort ---------------------------------------------------------------------------------
    @property
    def sort_by(self) -> tuple[str, bool] | None:
        """(column key, descending), or None for the order the screen gave."""
        return self.ordering.by

    def sortable(self) -> list[Column]:
        cols = self.data_columns
        return [c for c in cols if c.sort] if self.server_sort else cols

    def set_sort(self, column: str | None, descending: bool = False) -> None:
        """Sort by ``column`` (a column key), or None for the order the screen gives."""
        if column is not None and column not in {c.key for c in self.sortable()}:
            return
        self.ordering.by = None if column is None else (column, descending)
        for col in self._columns:
            dt_column = self.columns.get(ColumnKey(col.key))
            if dt_column is not None:
                dt_column.label = self.ordering.label(col)
        self._clear_caches()
        self.refresh()
        if not self.server_sort:
            self.resync()
        self.post_message(self.SortChanged(self, column, descending))

    @property
    def sort_text(self) -> str:
        """``sorted by Lag ▼``, for a screen's info line; empty in the screen's own order."""
        return self.ordering.text(self._columns)

    def _numeric(self, column: str) -> bool:
        return SortOrder.numeric(column, self.data_columns, self._rows, server=self.server_sort)

    def action_sort_next(self) -> None:
        """The next column, in its natural first direction (text A→Z, numbers high→low);
        after the last column, back to the screen's own order."""
        cols = [c.key for c in self.sortable()]
        if not cols:
            self.notify("this list cannot be sorted", severity="warning")
            return
        current = self.sort_by[0] if self.sort_by is not None else None
        index = cols.index(current) + 1 if current in cols else 0
        if index >= len(cols) and not self.server_sort:
            self.set_sort(None)
            self.notify("sort: the screen's own order", title="Sort")
            return
        column = cols[index % len(cols)]
        self.set_sort(column, descending=self._numeric(column))
        self.notify(self.sort_text, title="Sort")

    def action_sort_reverse(self) -> None:
        if self.sort_by is None:
            self.action_sort_next()
            return
        self.set_sort(self.sort_by[0], not self.sort_by[1])
        self.notify(self.sort_text, title="Sort")

    def action_sort_pick(self) -> None:
        """o: the column and direction chosen from a list, the current sort highlighted."""
        cols = self.sortable()
        if not cols:
            self.notify("this list cannot be sorted", severity="warning")
            return

        def picked(answer: tuple[bool, tuple[str, bool] | None] | None) -> None:
            if answer is None or not answer[0]:
                return
            choice = answer[1]
            if choice is None:
                self.set_sort(None)
                self.notify("sort: the screen's own order", title="Sort")
            else:
                self.set_sort(*choice)
                self.notify(self.sort_text, title="Sort")

        self.app.push_screen(
            SortPicker(cols, self.sort_by, own_order=not self.server_sort), picked)

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        event.stop()
        column = str(event.column_key.value)
        if self.sort_by is not None and self.sort_by[0] == column:
            self.set_sort(column, not self.sort_by[1])
        else:
            self.set_sort(column, self._numeric(column) if column != MARK_COLUMN else False)

    # -- marks --------------------------------------------------------------------------------
    @property
    def marks(self) -> set[str]:
        """The keys of the marked rows."""
        return self.marking.keys

    @property
    def all_marked(self) -> bool:
        """Every row shows as marked (the jobs screen's "all matching")."""
        return self.marking.everything

    def _marks_changed(self) -> None:
        self.resync(follow=True)
        self.post_message(self.MarksChanged(self))

    def toggle_mark(self, key: str | None = None) -> None:
        key = key or self.current_key
        if key is None:
            return
        self.marking.toggle(key)
        self._marks_changed()

    def clear_marks(self) -> None:
        if self.marking.clear():
            self._marks_changed()

    def mark_all(self, on: bool) -> None:
        self.marking.all(on)
        self._marks_changed()

    def keep_marks(self, keys: set[str]) -> None:
        """Forget marks on rows that no longer exist."""
        if self.marking.keep(keys):
            self.post_message(self.MarksChanged(self))

    def action_mark(self) -> None:
        self.toggle_mark()
        self.action_cursor_down()

    def action_mark_range(self, step: int) -> None:
        """Mark the row under the cursor, move, mark the next: a range, as text is selected."""
        key = self.current_key
        if key is None:
            return
        row = max(0, min(len(self._keys) - 1, self.cursor_row + step))
        if row == self.cursor_row and key in self.marks:
            self.notify("the marked range already reaches the " +
                        ("last row" if step > 0 else "first row"), title="Mark range")
            return
        self.marking.add(key, self._keys[row])
        self.move_cursor(row=row, animate=False)
        self._marks_changed()

    # -- filter -------------------------------------------------------------------------------
    def filter_names(self) -> dict[str, int]:
        """Column names a ``/`` qualifier may use, to each column's index in a row."""
        cols = self.data_columns
        return column_names([c.key for c in cols], [c.label for c in cols])

    def set_filter(self, flt: RowFilter) -> None:
        self.row_filter = flt
        self.resync()


def _same(a: Cell, b: Cell) -> bool:
    if isinstance(a, Text) and isinstance(b, Text):
        return a.plain == b.plain and a.spans == b.spans and a.style == b.style
    return a == b
