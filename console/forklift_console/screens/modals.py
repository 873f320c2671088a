"""Dialogs: confirm a destructive action, type a count, give a reason, jump to a screen."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.suggester import SuggestFromList
from textual.widgets import Button, Input, Label, Static

from forklift.ops import Operator
from forklift_console.widgets.header import TABS
from forklift_console.widgets.text import ids_summary, one_line, plain, plural

Operation = Callable[[Operator], Any]


@dataclass(frozen=True)
class Plan:
    """An action the operator is about to take, described before it runs.

    ``ids`` are the jobs (or queue names) named in the confirmation; ``scope`` describes a
    filter when the action covers "all N matching", in which case the operator types ``count``.
    """

    verb: str  # "Requeue", "Cancel", "Delete", "Pause"
    noun: str  # "job", "queue", "dead-letter group"
    count: int
    cli: str
    run: Operation
    ids: tuple[int | str, ...] = ()
    scope: str | None = None
    destructive: bool = True
    #: Turns the API's result into the sentence shown when the action is done.
    report: Callable[[Any], str] | None = None
    #: The CLI command that does what was done, when only the result tells (a relative change).
    cli_of: Callable[[Any], str] | None = None

    @property
    def typed(self) -> bool:
        return self.scope is not None

    @property
    def title(self) -> str:
        return f"{self.verb} {plural(self.count, self.noun)}?"


class ConfirmScreen(ModalScreen[bool]):
    """Names the verb, the count and the ids; focus starts on Cancel.

    For an action on everything matching a filter, the confirm button stays disabled until the
    operator types the count.
    """

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]
    AUTO_FOCUS = "#cancel"

    def __init__(self, plan: Plan) -> None:
        super().__init__(classes="dialog")
        self.plan = plan

    def compose(self) -> ComposeResult:
        plan = self.plan
        with Vertical(id="dialog"):
            yield Label(Text(plan.title, style="bold"), id="title")
            if plan.scope is not None:
                line = Text()
                line.append("Acts on: ", style="bold")
                line.append_text(one_line(plan.scope, limit=200))
                yield Static(line, id="scope")
            if plan.ids:
                label = "ids" if plan.noun.endswith("job") else plan.noun
                ids = Text()
                ids.append(f"{label}: ", style="bold")
                ids.append_text(plain(ids_summary([str(i) for i in plan.ids])))
                yield Static(ids, id="ids")
            cli = Text().append("cli $ ", style="dim")
            cli.append_text(plain(plan.cli))
            yield Static(cli, id="cli")
            if plan.typed:
                yield Label(f"Type {plan.count} to confirm:")
                yield Input(placeholder=str(plan.count), id="typed", compact=True)
            with Horizontal(id="buttons"):
                yield Button("Cancel", id="cancel", variant="primary", compact=True)
                yield Button(
                    f"{plan.verb} {plan.count:,}",
                    id="confirm",
                    variant="error" if plan.destructive else "warning",
                    disabled=plan.typed,
                    compact=True,
                )

    @on(Input.Changed, "#typed")
    def _typed(self, event: Input.Changed) -> None:
        wanted = str(self.plan.count)
        self.query_one("#confirm", Button).disabled = event.value.replace(",", "").strip() != wanted

    @on(Input.Submitted, "#typed")
    def _typed_enter(self) -> None:
        if not self.query_one("#confirm", Button).disabled:
            self.dismiss(True)

    @on(Button.Pressed, "#confirm")
    def _confirm(self) -> None:
        self.dismiss(True)

    @on(Button.Pressed, "#cancel")
    def action_cancel(self) -> None:
        self.dismiss(False)


class ReasonScreen(ModalScreen[tuple[str, str] | None]):
    """Ask why (and optionally for how long) before pausing a queue."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]
    AUTO_FOCUS = "#reason"

    def __init__(self, title: str, cli_hint: str) -> None:
        super().__init__(classes="dialog")
        self.title_text = title
        self.cli_hint = cli_hint

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label(Text(self.title_text, style="bold"), id="title")
            yield Label("Reason (shown to everyone, kept in the audit trail):")
            yield Input(placeholder="e.g. mail provider outage, INC-1234", id="reason",
                        compact=True)
            yield Label("Resume automatically after (optional, e.g. 30m, 2h):")
            yield Input(placeholder="until resumed by hand", id="for", compact=True)
            hint = Text().append("cli $ ", style="dim")
            hint.append_text(plain(self.cli_hint))
            yield Static(hint, id="cli")
            with Horizontal(id="buttons"):
                yield Button("Cancel", id="cancel", compact=True)
                yield Button("Pause", id="confirm", variant="warning", compact=True)

    @on(Input.Submitted)
    @on(Button.Pressed, "#confirm")
    def _confirm(self) -> None:
        reason = self.query_one("#reason", Input).value.strip()
        until = self.query_one("#for", Input).value.strip()
        self.dismiss((reason, until))

    @on(Button.Pressed, "#cancel")
    def action_cancel(self) -> None:
        self.dismiss(None)


class GotoScreen(ModalScreen[str | None]):
    """``:`` then a screen's name (``:jobs``, ``:dead``), like k9s; ``:q`` quits."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]

    NAMES: ClassVar[dict[str, str]] = {
        **{mode: mode for mode, _, _ in TABS},
        **{key: mode for mode, key, _ in TABS},
        **{label.lower().split()[0]: mode for mode, _, label in TABS},
        "q": "quit",
        "quit": "quit",
        "help": "help",
    }

    def compose(self) -> ComposeResult:
        with Vertical(id="goto"):
            yield Input(
                placeholder=":" + " ".join(mode for mode, _, _ in TABS),
                suggester=SuggestFromList([m for m, _, _ in TABS], case_sensitive=False),
                id="where",
                compact=True,
            )

    @on(Input.Submitted)
    def _go(self, event: Input.Submitted) -> None:
        word = event.value.strip().lstrip(":").lower()
        target = self.NAMES.get(word)
        if target is None:
            matches = [m for m, _, _ in TABS if m.startswith(word)] if word else []
            target = matches[0] if len(matches) == 1 else None
        if target is None:
            self.notify(f"no screen called {word!r}", severity="warning")
            return
        self.dismiss(target)

    def action_cancel(self) -> None:
        self.dismiss(None)
