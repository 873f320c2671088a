"""A live table's sort: the column and direction the operator chose, how the header names it
(``▲``/``▼``, not colour alone), which column ``s`` goes to next and what it sorts first."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text

from forklift_console.widgets.columns import Cell, Column
from forklift_console.widgets.rows import natural, sort_key

UP, DOWN = "▲", "▼"


class SortOrder:
    """``by`` is (column key, descending), or None for the order the screen gave."""

    def __init__(self, by: tuple[str, bool] | None = None) -> None:
        self.by = by

    def label(self, col: Column) -> Text:
        """The column's header: bold, underlined and with the glyph when it is the sort."""
        if self.by is None or self.by[0] != col.key:
            return Text(col.label)
        glyph = DOWN if self.by[1] else UP
        width = col.width or 200
        label = col.label.strip()
        # the glyph always shows: a label too long gives way
        text = f"{label} {glyph}" if len(label) + 2 <= width else label[: max(width - 1, 1)] + glyph
        return Text(text, style="bold underline")

    def text(self, columns: Sequence[Column]) -> str:
        """``sorted by Lag ▼``, for a screen's info line; empty in the screen's own order."""
        if self.by is None:
            return ""
        label = next((c.label for c in columns if c.key == self.by[0]), "")
        return f"sorted by {label.strip() or self.by[0]} {DOWN if self.by[1] else UP}"

    def apply(
        self, rows: list[tuple[str, tuple[Cell, ...]]], columns: Sequence[Column]
    ) -> list[tuple[str, tuple[Cell, ...]]]:
        """The rows in this order (cells in ``columns``' order); as given without a sort."""
        if self.by is None:
            return rows
        column, descending = self.by
        index = next((i for i, c in enumerate(columns) if c.key == column), None)
        if index is None:
            return rows
        return sorted(rows, key=lambda kv: sort_key(natural(kv[1][index]), descending))

    @staticmethod
    def numeric(
        column: str, columns: Sequence[Column], rows: Sequence[tuple[object, Sequence[Cell]]],
        *, server: bool,
    ) -> bool:
        """Whether the column holds numbers (sorted biggest first): text sorts A→Z, on the
        server as here. A server-sorted column without a number shown is taken as one."""
        index = next(i for i, c in enumerate(columns) if c.key == column)
        values = [v for _, cells in rows if (v := natural(cells[index])) is not None]
        if server and not values:
            return True
        return any(v[0] == 0 for v in values)
