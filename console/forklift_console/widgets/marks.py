"""A live table's marks: the rows the operator marked (``space``, a ``shift+↓``/``shift+↑``
range) or "all matching"; the marks column shows ``✓``, :func:`marks_badge` the count."""

from __future__ import annotations

from rich.text import Text

from forklift_console.widgets.columns import Cell
from forklift_console.widgets.text import MARK

#: The key of the marks column, first in a ``markable`` table.
MARK_COLUMN = "_mark"


def marks_badge(count: int, noun: str = "marked") -> Text:
    """`` ✓ 3 marked ``: reverse video and a glyph, so it reads without colour."""
    text = Text()
    if count:
        text.append(f" {MARK} {count:,} {noun} ", style="bold reverse")
    return text


class Marks:
    """The marked rows of one table, by key. Each change says whether anything changed, so
    the table redraws and tells its screen only then."""

    def __init__(self) -> None:
        self.keys: set[str] = set()
        #: Every row shows as marked (the jobs screen's "all matching").
        self.everything = False

    def cell(self, key: str) -> Cell:
        return Text(MARK, style="bold") if self.everything or key in self.keys else " "

    def toggle(self, key: str) -> None:
        self.everything = False
        self.keys.symmetric_difference_update({key})

    def add(self, *keys: str) -> None:
        self.everything = False
        self.keys.update(keys)

    def clear(self) -> bool:
        """Unmark everything; False when nothing was marked."""
        if not self.keys and not self.everything:
            return False
        self.keys.clear()
        self.everything = False
        return True

    def all(self, on: bool) -> None:
        self.keys.clear()
        self.everything = on

    def keep(self, keys: set[str]) -> bool:
        """Forget marks on rows that no longer exist; False when none went."""
        if not self.keys - keys:
            return False
        self.keys &= keys
        return True
