"""Dialogs: confirm a destructive action, type a count, give a reason, jump to a screen."""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from rich.text import Text
from textual import events, on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.suggester import SuggestFromList
from textual.widgets import Button, Input, Label, OptionList, Static
from textual.widgets.option_list import Option

from forklift.ops.errors import InvalidFilter
from forklift.ops.filters import MAX_TEXT, duration
from forklift_console.plan import Plan
from forklift_console.widgets.header import MORE_KEYS, MORE_SCREENS, TABS
from forklift_console.widgets.text import ids_summary, one_line, plain, plural


class ConfirmScreen(ModalScreen[bool]):
    """Names the verb, the count and the ids. Like every dialog, enter confirms and esc backs
    out; the focus is on what the person must do next (type the count, or confirm).

    For an action on everything matching a filter, the confirm button stays disabled until the
    operator types the count.
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Back"),
        Binding("enter", "confirm", "Confirm"),
    ]
    AUTO_FOCUS = ""

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
                yield Label(f"Type the count, {plan.count:,}, to confirm:")
                yield Input(placeholder="type the count here", id="typed", compact=True)
                yield Static(self._missing(""), id="missing")
            with Horizontal(id="buttons"):
                # "Back", not "Cancel": the verb may be Cancel ("Cancel" beside "Cancel 1").
                yield Button("Back (esc)", id="cancel", compact=True)
                yield Button(
                    f"{plan.verb} {plural(plan.count, plan.noun)} (⏎)",
                    id="confirm",
                    variant="error" if plan.destructive else "warning",
                    disabled=plan.typed,
                    compact=True,
                )

    def on_mount(self) -> None:
        # What the person must do next has the focus: type the count, or confirm.
        (self.query_one("#typed", Input) if self.plan.typed else
         self.query_one("#confirm", Button)).focus()

    def action_confirm(self) -> None:
        """enter outside the count field (which says itself what is missing)."""
        if self.query_one("#confirm", Button).disabled:
            self.notify(str(self._missing(self.query_one("#typed", Input).value)),
                        severity="warning")
        else:
            self.dismiss(True)

    def _missing(self, typed: str) -> Text:
        wanted = str(self.plan.count)
        value = typed.replace(",", "").strip()
        if value == wanted:
            return Text(f"✔ {self.plan.verb} {self.plan.count:,} is enabled: enter confirms")
        text = Text(f"✖ {self.plan.verb} is disabled until you type {self.plan.count:,}")
        if value:
            text.append(f" (you typed {value!r})")
        return text

    @on(Input.Changed, "#typed")
    def _typed(self, event: Input.Changed) -> None:
        wanted = str(self.plan.count)
        self.query_one("#confirm", Button).disabled = event.value.replace(",", "").strip() != wanted
        self.query_one("#missing", Static).update(self._missing(event.value))

    @on(Input.Submitted, "#typed")
    def _typed_enter(self) -> None:
        if not self.query_one("#confirm", Button).disabled:
            self.dismiss(True)
        else:
            self.notify(str(self._missing(self.query_one("#typed", Input).value)),
                        severity="warning")

    @on(Button.Pressed, "#confirm")
    def _confirm(self) -> None:
        self.dismiss(True)

    @on(Button.Pressed, "#cancel")
    def action_cancel(self) -> None:
        self.dismiss(False)


class ReasonScreen(ModalScreen[tuple[str, str] | None]):
    """Ask why (and, for a pause, for how long) before pausing or resuming a queue.

    Both fields are optional, so enter confirms from either (tab moves between them). The CLI line
    below follows what is typed, so it always names exactly what will run (``--for``
    included). ``cli_for(reason, for_)`` builds it; ``ask_for`` shows the expiry field.
    """

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]
    AUTO_FOCUS = "#reason"

    def __init__(
        self,
        title: str,
        cli_for: Callable[[str, str], str],
        *,
        verb: str = "Pause",
        ask_for: bool = True,
        context: Text | None = None,
    ) -> None:
        super().__init__(classes="dialog")
        self.title_text = title
        self.cli_for = cli_for
        self.verb = verb
        self.ask_for = ask_for
        self.context = context

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label(Text(self.title_text, style="bold"), id="title")
            if self.context is not None:
                yield Static(self.context, id="context")
            yield Label("Reason (shown to everyone, kept in the audit trail; optional):")
            yield Input(placeholder="e.g. mail provider outage, INC-1234", id="reason",
                        compact=True)
            yield Static(id="reason-error", classes="field-error")
            if self.ask_for:
                yield Label("Resume automatically after (optional, e.g. 30m, 2h; empty: until"
                            " resumed by hand):")
                yield Input(placeholder="until resumed by hand", id="for", compact=True)
                yield Static(id="for-error", classes="field-error")
            yield Static(self._cli_text(), id="cli")
            hint = "enter: confirm · tab: next field · esc: cancel" if self.ask_for else (
                "enter: confirm · esc: cancel")
            yield Label(Text(hint, style="dim"), id="hint")
            with Horizontal(id="buttons"):
                yield Button("Cancel", id="cancel", compact=True)
                yield Button(self.verb, id="confirm", variant="warning", compact=True)

    def _values(self) -> tuple[str, str]:
        reason = self.query_one("#reason", Input).value.strip() if self.is_mounted else ""
        until = ""
        if self.ask_for and self.is_mounted:
            until = self.query_one("#for", Input).value.strip()
        return reason, until

    def _cli_text(self) -> Text:
        hint = Text().append("cli $ ", style="dim")
        hint.append_text(plain(self.cli_for(*self._values())))
        return hint

    def _errors(self) -> dict[str, str]:
        """What the operator API would refuse, by field, checked as it is typed."""
        reason, until = self._values()
        errors: dict[str, str] = {}
        if len(reason) > MAX_TEXT:
            errors["reason"] = (f"✖ {len(reason):,} characters: a reason holds at most"
                                f" {MAX_TEXT}; shorten it")
        if until:
            try:
                duration(until, "resume after")
            except InvalidFilter as exc:
                errors["for"] = f"✖ {exc.message}"
        return errors

    @on(Input.Changed)
    def _changed(self) -> None:
        self.query_one("#cli", Static).update(self._cli_text())
        errors = self._errors()
        for name in ("reason", "for"):
            for box in self.query(f"#{name}-error"):
                assert isinstance(box, Static)
                box.update(errors.get(name, ""))
                box.display = name in errors
        self.query_one("#confirm", Button).disabled = bool(errors)

    @on(Input.Submitted)
    @on(Button.Pressed, "#confirm")
    def _confirm(self, event: Input.Submitted | Button.Pressed | None = None) -> None:
        if event is not None:
            event.stop()
        errors = self._errors()
        if errors:
            # The dialog stays, with what was typed: the error is beside its field.
            self.query_one(f"#{next(iter(errors))}", Input).focus()
            return
        self.dismiss(self._values())

    @on(Button.Pressed, "#cancel")
    def action_cancel(self) -> None:
        self.dismiss(None)


class PickScreen(ModalScreen[str | None]):
    """Which one? The command palette's question before an action on one row of a screen
    (``Queues: Pause/resume`` from the overview): the rows as that screen shows them, enter
    picks, esc (or q) cancels. Dismisses with the picked row's key."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q", "cancel", "Cancel")]

    def __init__(
        self, title: str, choices: list[tuple[str, Text]], *, current: str | None = None
    ) -> None:
        super().__init__(classes="dialog")
        self.title_text = title
        self.choices = choices
        self.current = current

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label(Text(self.title_text, style="bold"), id="title")
            yield OptionList(*(Option(label, id=key) for key, label in self.choices),
                             id="choices")
            yield Label(Text("enter: act on it · esc or q: cancel", style="dim"), id="hint")

    def on_mount(self) -> None:
        box = self.query_one("#choices", OptionList)
        keys = [key for key, _ in self.choices]
        box.highlighted = keys.index(self.current) if self.current in keys else 0
        box.focus()

    @on(OptionList.OptionSelected, "#choices")
    def _picked(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.dismiss(event.option.id)

    def action_cancel(self) -> None:
        self.dismiss(None)


class GotoScreen(ModalScreen[str | None]):
    """``:`` then a screen's name (``:jobs``, ``:dead``), like k9s; ``:q`` quits; ``:job 123``
    opens that job.

    The dialog itself takes the keys, in the order typed, and shows them in its field (which
    never takes the focus): keys typed right after ``:`` come before any field could have
    the focus, and ``:health⏎`` typed quickly once answered "no screen called ''". Tab or →
    completes the name the field suggests."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]
    AUTO_FOCUS = ""

    NAMES: ClassVar[dict[str, str]] = {
        **{mode: mode for mode, _, _ in TABS},
        **{key: mode for mode, key, _ in TABS},
        **{label.lower().split()[0]: mode for mode, _, label in TABS},
        **{mode: mode for mode, _ in MORE_SCREENS},
        **{key: mode for mode, key in MORE_KEYS.items()},
        "q": "quit",
        "quit": "quit",
        "help": "help",
    }
    MODES: ClassVar[list[str]] = [m for m, _, _ in TABS] + [m for m, _ in MORE_SCREENS]

    def compose(self) -> ComposeResult:
        with Vertical(id="goto"):
            field = Input(
                placeholder=":" + " ".join(self.MODES),
                suggester=SuggestFromList(self.MODES, case_sensitive=False),
                id="where",
                compact=True,
            )
            field.can_focus = False
            yield field

    def __init__(self) -> None:
        super().__init__()
        #: What was typed: the field only shows it (a key may come before the field is
        #: mounted, and mounting would reset what it holds).
        self.typed = ""

    def on_mount(self) -> None:
        self.call_after_refresh(self._show)

    def _show(self) -> None:
        field = self.query_one("#where", Input)
        field.value = self.typed
        field.cursor_position = len(self.typed)

    def on_key(self, event: events.Key) -> None:
        typed = self.typed
        if event.key == "enter":
            self._submit(typed)
        elif event.key == "backspace":
            self.typed = typed[:-1]
        elif event.key in ("tab", "right"):
            matches = [m for m in self.MODES if typed and m.startswith(typed.lower())]
            if len(matches) == 1:
                self.typed = matches[0]
        elif event.is_printable and event.character:
            self.typed = typed + event.character
        else:
            return
        event.stop()
        event.prevent_default()
        if self.is_mounted and self.query("#where"):
            self._show()

    def _submit(self, value: str) -> None:
        word = value.strip().lstrip(":").lower()
        verb, _, rest = word.partition(" ")
        if verb == "job":  # `:job 123` opens that job (the app asks for the id if none)
            self.dismiss(f"job {rest.strip()}".rstrip())
            return
        target = self.NAMES.get(word)
        if target is None:
            matches = [m for m in self.MODES if m.startswith(word)] if word else []
            target = matches[0] if len(matches) == 1 else None
        if target is None:
            self.notify(f"no screen called {word!r}: the screens are "
                        + " ".join(f":{m}" for m in self.MODES), severity="warning")
            return
        self.dismiss(target)

    def action_cancel(self) -> None:
        self.dismiss(None)
