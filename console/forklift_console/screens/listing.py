"""What every list screen shares beyond :class:`ConsoleScreen`: the ``/`` filter line.

The table's own keys (``s``/``S`` sort, ``space`` and ``shift+↑↓`` marks) live on
:class:`~forklift_console.widgets.table.LiveTable`; a list screen adds :data:`FILTER_KEY` to
its bindings, a :class:`~forklift_console.widgets.filterbar.FilterLine` above its table, and
``action_focus_filter = open_filter``.
"""

from __future__ import annotations

from textual.binding import Binding
from textual.screen import Screen

from forklift_console.widgets.filterbar import FilterLine

FILTER_KEY = Binding("slash", "focus_filter", "Filter", key_display="/")


def open_filter(screen: Screen[None]) -> None:
    """``/``: the screen's filter line, shown, with the cursor in it."""
    screen.query_one(FilterLine).open()
