"""A live table's sort: ``s`` sorts by the next column and ``S`` flips the direction (a click on
a header sorts by that column); the header names the sort with ``▲``/``▼``, not colour alone.
A ``server_sort`` table does not reorder its page: the screen fetches in the order chosen. A
mixin of :class:`~forklift_console.widgets.table.LiveTable`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual.widgets import DataTable
from textual.widgets.data_table import ColumnKey

from forklift_console.widgets.rows import natural
from forklift_console.widgets.table_marks import MARK_COLUMN, TableMixin

if TYPE_CHECKING:
    from forklift_console.widgets.table import Column, Row

UP, DOWN = "▲", "▼"


class SortMixin(TableMixin):
    if TYPE_CHECKING:
        _columns: list[Column]
        _rows: list[Row]
        server_sort: bool
        sort_by: tuple[str, bool] | None

        @property
        def data_columns(self) -> list[Column]: ...
        def resync(self, *, follow: bool = True) -> None: ...
        def _sort_changed(self, column: str | None, descending: bool) -> None: ...

    def sortable(self) -> list[Column]:
        cols = self.data_columns
        return [c for c in cols if c.sort] if self.server_sort else cols

    def _label(self, col: Column) -> Text:
        if self.sort_by is None or self.sort_by[0] != col.key:
            return Text(col.label)
        glyph = DOWN if self.sort_by[1] else UP
        width = col.width or 200
        label = col.label.strip()
        # the glyph always shows: a label too long gives way
        text = f"{label} {glyph}" if len(label) + 2 <= width else label[: max(width - 1, 1)] + glyph
        return Text(text, style="bold underline")

    def set_sort(self, column: str | None, descending: bool = False) -> None:
        """Sort by ``column`` (a column key), or None for the order the screen gives."""
        if column is not None and column not in {c.key for c in self.sortable()}:
            return
        self.sort_by = None if column is None else (column, descending)
        for col in self._columns:
            dt_column = self.columns.get(ColumnKey(col.key))
            if dt_column is not None:
                dt_column.label = self._label(col)
        self._clear_caches()
        self.refresh()
        if not self.server_sort:
            self.resync()
        self._sort_changed(column, descending)

    @property
    def sort_text(self) -> str:
        """``sorted by Lag ▼``, for a screen's info line; empty in the screen's own order."""
        if self.sort_by is None:
            return ""
        label = next((c.label for c in self._columns if c.key == self.sort_by[0]), "")
        return f"sorted by {label.strip() or self.sort_by[0]} {DOWN if self.sort_by[1] else UP}"

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

    def _numeric(self, column: str) -> bool:
        """Whether the column holds numbers (sorted biggest first): text sorts A→Z, on the
        server as here. A server-sorted column without a number shown is taken as one."""
        index = next(i for i, c in enumerate(self.data_columns) if c.key == column)
        values = [v for _, cells in self._rows if (v := natural(cells[index])) is not None]
        if self.server_sort and not values:
            return True
        return any(v[0] == 0 for v in values)

    def action_sort_reverse(self) -> None:
        if self.sort_by is None:
            self.action_sort_next()
            return
        self.set_sort(self.sort_by[0], not self.sort_by[1])
        self.notify(self.sort_text, title="Sort")

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        event.stop()
        column = str(event.column_key.value)
        if self.sort_by is not None and self.sort_by[0] == column:
            self.set_sort(column, not self.sort_by[1])
        else:
            self.set_sort(column, self._numeric(column) if column != MARK_COLUMN else False)
