"""``F`` on the jobs list: the saved filters (apply one, delete one) and the current filter
saved under a name. Stored by :class:`~forklift_console.widgets.saved_filters.SavedFilters`."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label, OptionList, Static
from textual.widgets.option_list import Option

from forklift_console.widgets.saved_filters import SavedFilter, SavedFilters, SavedFiltersError
from forklift_console.widgets.text import plain


class SavedFiltersScreen(ModalScreen[str | None]):
    """Dismisses with the text of the filter to apply, or None."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel"),
        Binding("delete", "delete", "Delete saved filter", key_display="del"),
    ]
    AUTO_FOCUS = "#saved"

    def __init__(self, store: SavedFilters, current: str) -> None:
        super().__init__(classes="dialog")
        self.store = store
        self.current = current
        self.filters: list[SavedFilter] = []

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label(Text("Saved filters", style="bold"), id="title")
            yield OptionList(id="saved")
            yield Static(id="problem")
            if self.current:
                line = Text("Save the current filter (").append_text(plain(self.current, limit=80))
                yield Label(line.append(") as:"))
                yield Input(placeholder="a name, e.g. stuck mail", id="name", compact=True)
            yield Label(Text("enter on a filter: apply it · del: delete it · esc: close",
                             style="dim"), id="hint")
            yield Static(Text(f"kept in {self.store.path}", style="dim"), id="where")

    def on_mount(self) -> None:
        self._reload()
        if not self.filters and self.current:  # nothing to pick yet: naming is what is left
            self.query_one("#name", Input).focus()

    def _reload(self, highlight: str | None = None) -> None:
        box = self.query_one("#saved", OptionList)
        try:
            self.filters = self.store.load()
        except SavedFiltersError as exc:
            self.filters = []
            self._problem(str(exc))
        if self.filters:
            box.set_options(
                Option(Text().append_text(plain(f.name, limit=40)).append("  ")
                       .append_text(plain(f.text, limit=80)), id=f.name)
                for f in self.filters
            )
        else:
            box.set_options([Option(Text("no saved filters yet", style="dim"), disabled=True)])
        names = [f.name for f in self.filters]
        if names:
            box.highlighted = names.index(highlight) if highlight in names else 0

    def _problem(self, why: str | None) -> None:
        self.query_one("#problem", Static).update(
            Text("✖ ", style="bold").append_text(plain(why)) if why else "")

    @on(OptionList.OptionSelected, "#saved")
    def _picked(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        chosen = next((f for f in self.filters if f.name == event.option.id), None)
        if chosen is not None:
            self.dismiss(chosen.text)

    @on(Input.Submitted, "#name")
    def _save(self, event: Input.Submitted) -> None:
        event.stop()
        try:
            saved = self.store.save(event.value, self.current)
        except SavedFiltersError as exc:
            self._problem(str(exc))
            return
        self._problem(None)
        event.input.value = ""
        self._reload(highlight=saved.name)
        self.notify(f"saved filter {saved.name!r}: {saved.text}", title="Saved filters")

    def action_delete(self) -> None:
        box = self.query_one("#saved", OptionList)
        if box.highlighted is None or not self.filters:
            return
        name = self.filters[box.highlighted].name
        try:
            self.store.delete(name)
        except SavedFiltersError as exc:
            self._problem(str(exc))
            return
        self._reload()
        self.notify(f"deleted saved filter {name!r}", title="Saved filters")

    def action_cancel(self) -> None:
        self.dismiss(None)
