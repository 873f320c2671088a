"""A DataTable that is refreshed in place, row by row, by key."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from rich.text import Text
from textual.widgets import DataTable
from textual.widgets.data_table import CellDoesNotExist, ColumnKey, RowDoesNotExist, RowKey

Cell = Text | str
#: A row: its key and its cells, in column order.
Row = tuple[Hashable, Sequence[Cell]]


@dataclass(frozen=True)
class Column:
    key: str
    label: str
    width: int | None = None


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

    def __init__(self, columns: Sequence[Column], *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=False)
        self._columns = list(columns)
        self._keys: list[str] = []
        self._cells: dict[str, tuple[Cell, ...]] = {}
        self._rows: list[Row] = []
        self._flex = next(
            (i for i, c in enumerate(self._columns) if c.width is None), None
        )

    def on_mount(self) -> None:
        # The flex column gets a width of its own too: DataTable's auto width is measured
        # on idle, and a row drawn before that measurement stays cached at the label's width.
        for col in self._columns:
            self.add_column(col.label, key=col.key, width=col.width or self.flex_width())

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

    def sync(self, rows: Sequence[Row], *, rebuild: bool = False) -> None:
        self._rows = list(rows)
        new_keys = [str(k) for k, _ in rows]
        cells = {str(k): self._fit(v) for k, v in rows}
        if new_keys == self._keys and not rebuild:
            for key in new_keys:
                old = self._cells.get(key)
                for col, value in zip(self._columns, cells[key], strict=True):
                    index = self._columns.index(col)
                    if old is None or not _same(old[index], value):
                        self.update_cell(key, col.key, value)
            self._cells = cells
            return
        keep = self.current_key
        scroll_y = self.scroll_y
        self.clear()
        for key in new_keys:
            self.add_row(*cells[key], key=key)
        self._keys, self._cells = new_keys, cells
        if keep is not None and keep in cells:
            self.move_cursor(row=new_keys.index(keep), animate=False, scroll=False)
            self.scroll_to(y=scroll_y, animate=False)
        elif new_keys:
            self.move_cursor(row=min(max(self.cursor_row, 0), len(new_keys) - 1), animate=False)

    def move_to_key(self, key: Hashable) -> bool:
        try:
            index = self.get_row_index(RowKey(str(key)))
        except RowDoesNotExist:
            return False
        self.move_cursor(row=index, animate=False)
        return True

    def cell_value(self, key: str, column: str) -> Any:
        return self.get_cell(key, column)


def _same(a: Cell, b: Cell) -> bool:
    if isinstance(a, Text) and isinstance(b, Text):
        return a.plain == b.plain and a.spans == b.spans and a.style == b.style
    return a == b
