"""A live table's marks: ``space`` marks a row, ``shift+↓``/``shift+↑`` a range as the cursor
moves, and "all matching" marks every row; the marks column shows ``✓``, :func:`marks_badge`
the count. A mixin of :class:`~forklift_console.widgets.table.LiveTable`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text

from forklift_console.widgets.text import MARK

if TYPE_CHECKING:
    from textual.widgets import DataTable

    from forklift_console.widgets.table import Cell

    #: The table's mixins are DataTables to the type checker, plain classes at run time (so
    #: Textual sees one widget class); each declares what it uses of the table's own state.
    TableMixin = DataTable[Cell]
else:
    TableMixin = object

#: The key of the marks column, first in a ``markable`` table.
MARK_COLUMN = "_mark"


def marks_badge(count: int, noun: str = "marked") -> Text:
    """`` ✓ 3 marked ``: reverse video and a glyph, so it reads without colour."""
    text = Text()
    if count:
        text.append(f" {MARK} {count:,} {noun} ", style="bold reverse")
    return text


class MarksMixin(TableMixin):
    if TYPE_CHECKING:
        markable: bool
        marks: set[str]
        all_marked: bool
        _keys: list[str]

        @property
        def current_key(self) -> str | None: ...
        def resync(self, *, follow: bool = True) -> None: ...
        def _marks_posted(self) -> None: ...

    def _mark_cell(self, key: str) -> Cell:
        return Text(MARK, style="bold") if self.all_marked or key in self.marks else " "

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("mark", "mark_range"):
            return self.markable
        return True

    def _marks_changed(self) -> None:
        self.resync(follow=True)
        self._marks_posted()

    def toggle_mark(self, key: str | None = None) -> None:
        key = key or self.current_key
        if key is None:
            return
        self.all_marked = False
        self.marks.symmetric_difference_update({key})
        self._marks_changed()

    def clear_marks(self) -> None:
        if self.marks or self.all_marked:
            self.marks.clear()
            self.all_marked = False
            self._marks_changed()

    def mark_all(self, on: bool) -> None:
        self.marks.clear()
        self.all_marked = on
        self._marks_changed()

    def keep_marks(self, keys: set[str]) -> None:
        """Forget marks on rows that no longer exist."""
        if self.marks - keys:
            self.marks &= keys
            self._marks_posted()

    def action_mark(self) -> None:
        self.toggle_mark()
        self.action_cursor_down()

    def action_mark_range(self, step: int) -> None:
        """Mark the row under the cursor, move, mark the next: a range, as text is selected."""
        key = self.current_key
        if key is None:
            return
        self.all_marked = False
        self.marks.add(key)
        row = max(0, min(len(self._keys) - 1, self.cursor_row + step))
        self.marks.add(self._keys[row])
        self.move_cursor(row=row, animate=False)
        self._marks_changed()
