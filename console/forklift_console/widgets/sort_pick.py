"""``o`` on any list: choose the sort column and direction directly, instead of stepping with
``s`` through columns that are not wanted (a list with eight columns took up to eight keys).

Each sortable column is offered both ways, in words as well as the glyph the header then shows
(``Age ▼ descending``); the current sort is highlighted, enter picks, esc keeps it. A list sorted
in the console (not on the server) also offers its own order back.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label, OptionList
from textual.widgets.option_list import Option

from forklift_console.widgets.columns import Column
from forklift_console.widgets.sort_order import DOWN, UP

#: The option that puts a list back in its screen's own order.
OWN_ORDER = "-"
#: What a pick dismisses with: (column key, descending), or None for the screen's order.
Choice = tuple[str, bool] | None


def option_id(column: str, descending: bool) -> str:
    return f"{'-' if descending else '+'}{column}"


def choices(columns: Sequence[Column], *, own_order: bool) -> list[tuple[str, Text]]:
    """(option id, label) for every column both ways, then the screen's own order if offered."""
    out: list[tuple[str, Text]] = []
    for col in columns:
        label = col.label.strip() or col.key
        for descending in (False, True):
            glyph, words = (DOWN, "descending") if descending else (UP, "ascending")
            out.append((option_id(col.key, descending),
                        Text(f"{label} {glyph} ").append(words, style="dim")))
    if own_order:
        out.append((OWN_ORDER, Text("the screen's own order")))
    return out


def parse_choice(option: str) -> Choice:
    if option == OWN_ORDER:
        return None
    return option[1:], option.startswith("-")


class SortPicker(ModalScreen[tuple[bool, Choice]]):
    """Dismisses with (picked, choice): picked is False when the operator backed out."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, columns: Sequence[Column], current: Choice, *, own_order: bool) -> None:
        super().__init__(classes="dialog")
        self.options = choices(columns, own_order=own_order)
        self.current = OWN_ORDER if current is None else option_id(*current)

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label(Text("Sort by", style="bold"), id="title")
            yield OptionList(*(Option(label, id=key) for key, label in self.options),
                             id="choices")
            yield Label(Text("enter: sort · esc: keep the sort", style="dim"), id="hint")

    def on_mount(self) -> None:
        box = self.query_one("#choices", OptionList)
        keys = [key for key, _ in self.options]
        box.highlighted = keys.index(self.current) if self.current in keys else 0
        box.focus()

    @on(OptionList.OptionSelected, "#choices")
    def _picked(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.dismiss((True, parse_choice(str(event.option.id))))

    def action_cancel(self) -> None:
        self.dismiss((False, None))
