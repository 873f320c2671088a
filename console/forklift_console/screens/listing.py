"""What every list screen shares beyond :class:`ConsoleScreen`: the ``/`` filter line, and marks.

The table's own keys (``s``/``S`` sort, ``space`` and ``shift+↑↓`` marks) live on
:class:`~forklift_console.widgets.table.LiveTable`; a list screen adds :data:`FILTER_KEY` to
its bindings, a :class:`~forklift_console.widgets.filterbar.FilterLine` above its table, and
``action_focus_filter = open_filter``.

A list whose rows can be marked declares its table ``markable`` and mixes in
:class:`MarkedList`: the marks (one by one, a shift-range, all), the ``✓`` column and the
count are the table's, written once, so every such screen marks the same way.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.binding import Binding
from textual.screen import Screen

from forklift_console.widgets.filterbar import FilterLine
from forklift_console.widgets.table import LiveTable, marks_badge

FILTER_KEY = Binding("slash", "focus_filter", "Filter", key_display="/")


def open_filter(screen: Screen[None]) -> None:
    """``/``: the screen's filter line, shown, with the cursor in it."""
    screen.query_one(FilterLine).open()


class MarkedList:
    """Mixed into a list screen (before :class:`ConsoleScreen`) whose table is ``markable``.

    It repaints what shows the count (:meth:`paint_marks`) and the keys whose targets the
    marks change, whenever the table's marks change. :meth:`marked_badge` is the count as
    every list shows it.
    """

    #: The noun after the count (`` ✓ 3 groups marked ``).
    MARKED_NOUN = "marked"

    @property
    def marked_table(self) -> LiveTable:
        return self.query_one(LiveTable)  # type: ignore[attr-defined,no-any-return]

    def marked_badge(self) -> Text:
        return marks_badge(len(self.marked_table.marks), self.MARKED_NOUN)

    def paint_marks(self) -> None:
        """Show the count (the screen's info line): called whenever the marks change."""

    def on_live_table_marks_changed(self, event: Any) -> None:
        self.paint_marks()
        self.refresh_bindings()  # type: ignore[attr-defined]
