"""Dialogs that ask for a value before an action: a queue's concurrency limit, what to prune.

Each shows the CLI command that does the same, following what is typed; the focus starts in
the first field; a value the operator API would refuse is said so before anything runs, and
the confirm button says why it is disabled.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Static

from forklift import ForkliftError, Rate
from forklift.ops.errors import InvalidFilter
from forklift.ops.filters import MAX_TEXT, duration
from forklift.ops.runbook import command
from forklift_console.widgets.text import ident, plain

#: A concurrency limit the operator API accepts.
MAX_LIMIT = 1_000_000
PRUNE_STATES = ("completed", "cancelled", "dead")


def parse_limit(text: str) -> int | None:
    """``none`` (no limit) or a whole number 0..1,000,000; raises ValueError with the reason."""
    value = text.strip().lower()
    if not value:
        raise ValueError("type a whole number, or none to lift the limit")
    if value in ("none", "off", "unlimited", "∞"):
        return None
    try:
        limit = int(value.replace(",", ""))
    except ValueError:
        raise ValueError(f"{text.strip()!r} is not a whole number or 'none'") from None
    if not 0 <= limit <= MAX_LIMIT:
        raise ValueError(f"a concurrency limit is between 0 and {MAX_LIMIT:,}")
    return limit


def checked_reason(text: str) -> str:
    """A reason the operator API accepts (at most 500 characters), stripped; raises
    ValueError saying how long it is."""
    reason = text.strip()
    if len(reason) > MAX_TEXT:
        raise ValueError(f"the reason has {len(reason):,} characters; at most {MAX_TEXT}")
    return reason


def parse_rate(text: str) -> str | None:
    """A rate as ``100/s``, ``10/5s``, ``600/m`` (checked as the API would), or ``none``."""
    value = text.strip()
    if value.lower() in ("none", "off"):
        return None
    if not value:
        raise ValueError("type N/period (100/s, 10/5s, 600/m), or none to lift the rate")
    try:
        Rate.parse(value)
    except ForkliftError as exc:
        raise ValueError(exc.message) from None
    return value


def limit_cli(name: str, limit: int | None, reason: str) -> str:
    return command("queues", "limit", args=(name, "none" if limit is None else limit),
                   options={"--reason": reason or None})


class _Form(ModalScreen[object]):
    """A dialog with fields, a live CLI line, a reason for the refusal, Cancel and a verb."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]
    VERB = "Apply"

    def __init__(self) -> None:
        super().__init__(classes="dialog")

    def fields(self) -> ComposeResult:
        yield from ()

    def title_text(self) -> Text:
        return Text()

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label(self.title_text(), id="title")
            yield from self.fields()
            yield Static(id="cli")
            yield Static(id="missing")
            with Horizontal(id="buttons"):
                yield Button("Cancel", id="cancel", compact=True)
                yield Button(self.VERB, id="confirm", variant="warning", compact=True)

    def on_mount(self) -> None:
        self.query(Input).first().focus()  # the value is what the person must give next
        self._check()

    def answer(self) -> tuple[object, str]:
        """(the value to act on, the CLI command); raises ValueError with what is wrong."""
        raise NotImplementedError

    def _check(self) -> None:
        missing = self.query_one("#missing", Static)
        button = self.query_one("#confirm", Button)
        try:
            _, cli = self.answer()
        except ValueError as exc:
            button.disabled = True
            missing.update(Text(f"✖ {self.VERB} is disabled: {exc}"))
            return
        button.disabled = False
        missing.update(Text(f"✔ enter: {self.VERB.lower()} · esc: cancel"))
        self.query_one("#cli", Static).update(Text("cli $ ", style="dim").append_text(plain(cli)))

    @on(Input.Changed)
    def _changed(self) -> None:
        self._check()

    @on(Input.Submitted)
    @on(Button.Pressed, "#confirm")
    def _confirm(self, event: Input.Submitted | Button.Pressed) -> None:
        inputs = list(self.query(Input))
        if isinstance(event, Input.Submitted) and event.input is not inputs[-1]:
            inputs[inputs.index(event.input) + 1].focus()  # enter: the next question
            return
        try:
            value, _ = self.answer()
        except ValueError as exc:
            self.notify(str(exc), title=f"{self.VERB}: not yet", severity="warning")
            return
        self.dismiss(value)

    @on(Button.Pressed, "#cancel")
    def action_cancel(self) -> None:
        self.dismiss(None)


@dataclass(frozen=True)
class LimitAnswer:
    limit: int | None
    reason: str


class LimitScreen(_Form):
    """``l`` on Queues: the new concurrency limit (``none`` lifts it) and a reason."""

    VERB = "Set limit"

    def __init__(self, name: str, current: int | None) -> None:
        super().__init__()
        self.queue = name
        self.current = current

    def title_text(self) -> Text:
        text = Text("Concurrency limit of queue ", style="bold")
        text.append_text(ident(self.queue, limit=60))
        now = "none (no limit)" if self.current is None else f"{self.current:,}"
        text.append(f"\nnow: {now}; the most jobs of this queue running at once over all"
                    " workers, from their next claim", style="")
        return text

    def fields(self) -> ComposeResult:
        yield Label("New limit (a whole number; 0 stops claims; none lifts the limit):")
        yield Input(value="" if self.current is None else str(self.current), id="limit",
                    placeholder="e.g. 5, or none", compact=True)
        yield Label("Reason (kept in the audit trail; optional):")
        yield Input(id="reason", placeholder="e.g. upstream rate limit, INC-1234", compact=True)

    def answer(self) -> tuple[object, str]:
        limit = parse_limit(self.query_one("#limit", Input).value)
        reason = checked_reason(self.query_one("#reason", Input).value)
        return LimitAnswer(limit, reason), limit_cli(self.queue, limit, reason)


@dataclass(frozen=True)
class PruneAnswer:
    #: state -> age as typed (``7d``), only the states to prune.
    older_than: dict[str, str]
    reason: str

    def kwargs(self) -> dict[str, object]:
        kw: dict[str, object] = {f"{s}_older_than": v for s, v in self.older_than.items()}
        kw["reason"] = self.reason or None
        return kw

    def cli(self, *, yes: bool = True) -> str:
        options: list[tuple[str, object]] = [
            (f"--{s}-older-than", v) for s, v in self.older_than.items()
        ]
        options += [("--reason", self.reason or None), ("--yes", yes)]
        return command("prune", options=options)


class PruneScreen(_Form):
    """``P`` on Queues: delete finished jobs older than an age, per state; a dry run counts
    them before anything is deleted."""

    VERB = "Count"

    def title_text(self) -> Text:
        return Text("Prune finished jobs", style="bold").append(
            "\nDeletes completed, cancelled or dead jobs that finished longer ago than the age"
            " given (e.g. 7d, 12h); live jobs are never touched. Leave a state empty to keep"
            " it. The next step counts them and asks you to type the count.", style="")

    def fields(self) -> ComposeResult:
        for state, example in zip(PRUNE_STATES, ("7d", "7d", "30d"), strict=True):
            yield Label(f"{state.capitalize()} jobs older than:")
            yield Input(id=f"prune-{state}", placeholder=f"e.g. {example}", compact=True)
        yield Label("Reason (kept in the audit trail; optional):")
        yield Input(id="reason", placeholder="e.g. disk pressure, INC-1234", compact=True)

    def answer(self) -> tuple[object, str]:
        ages: dict[str, str] = {}
        for state in PRUNE_STATES:
            text = self.query_one(f"#prune-{state}", Input).value.strip()
            if text:
                try:
                    duration(text, f"{state} older than")
                except InvalidFilter as exc:
                    raise ValueError(exc.message) from None
                ages[state] = text
        if not ages:
            raise ValueError("give an age for at least one state")
        answer = PruneAnswer(ages, checked_reason(self.query_one("#reason", Input).value))
        return answer, answer.cli()

