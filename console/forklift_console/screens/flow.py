"""Flow control (key 0): per queue and per key, running against the limit, the rate and what its
bucket holds, waiting jobs and the age of the oldest; the highlighted key value by value, with
the jobs holding its slots. ``l`` changes a limit and ``r`` a rate (of the highlighted key, or
of the highlighted queue in the upper table), ``x`` puts a key back to what the code declares:
each asks for the value, shows the equivalent CLI and asks again before it acts; every change
is audited and in force from each worker's next claim. Enter lists the row's jobs."""

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
from textual.widgets import Button, DataTable, Input, Label, Static

from forklift.ops import Operator
from forklift.ops.keys import KeyDetail, KeyInfo, ValueInfo
from forklift.ops.rates import Bucket, FlowQueue, RateInfo
from forklift.ops.runbook import command
from forklift_console.plan import Plan
from forklift_console.screens.base import ConsoleScreen
from forklift_console.screens.forms import parse_limit, parse_rate
from forklift_console.widgets.filterbar import quote
from forklift_console.widgets.table import Column, LiveTable, Row
from forklift_console.widgets.text import NONE, capped, duration, one_line, plain

QUEUE_PREFIX = "queue:"  # row keys of the upper table (the lower one is keyed by key name)
#: The operator call behind each change: (what is changed, which setting) -> Operator method.
SETTERS = {("key", "limit"): "set_key_limit", ("key", "rate"): "set_key_rate",
           ("queue", "limit"): "set_concurrency", ("queue", "rate"): "set_queue_rate"}
HINTS = {"limit": "Most jobs running at once (per value, for a key), or none.",
         "rate": "N per period (100/s, 10/5s, 600/m), or none."}


def rate_text(rate: RateInfo | None) -> str:
    if rate is None:
        return NONE
    return rate.text + (f" (burst {rate.burst})" if rate.burst != rate.limit else "")


def bucket_text(b: Bucket | None) -> Text:
    if b is None:
        return Text(NONE, style="dim")
    if b.next_slot_seconds > 0:
        return Text(f"next in {b.next_slot_seconds * 1000:.0f}ms" if b.next_slot_seconds < 1
                    else f"next in {duration(b.next_slot_seconds)}", style="yellow")
    return Text(f"{b.tokens:.0f} free")


def limit_text(running: int, limit: int | None) -> Text:
    text = Text(f"{running:,}")
    if limit is None:
        return text
    text.append(f"/{limit:,}", style="bold yellow" if running >= limit else "")
    return text


@dataclass(frozen=True)
class FlowSnapshot:
    queues: list[FlowQueue]
    keys: list[KeyInfo]
    detail: KeyDetail | None


class ValueScreen(ModalScreen[str | None]):
    """Ask for a new limit or rate; the CLI that sets it is shown as it is typed."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]
    AUTO_FOCUS = "#value"

    def __init__(self, title: str, hint: str, current: str, cli_for: object,
                 check: Callable[[str], object]) -> None:
        super().__init__(classes="dialog")
        self.title_text, self.hint, self.current = title, hint, current
        self.cli_for = cli_for
        #: Raises ValueError with what is wrong: checked as it is typed, said under the field.
        self.check = check

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label(Text(self.title_text, style="bold"), id="title")
            yield Label(f"Now: {self.current}. {self.hint}")
            yield Input(placeholder=self.current, id="value", compact=True)
            yield Static(id="value-error", classes="field-error")
            yield Static(self._cli(""), id="cli")
            with Horizontal(id="buttons"):
                yield Button("Cancel", id="cancel", compact=True)
                yield Button("Next", id="confirm", variant="warning", compact=True)

    def _cli(self, value: str) -> Text:
        text = Text().append("cli $ ", style="dim")
        text.append_text(plain(self.cli_for(value or "…")))  # type: ignore[operator]
        return text

    def _error(self, value: str) -> str | None:
        try:
            self.check(value)
        except ValueError as exc:
            return f"✖ {exc}"
        return None

    @on(Input.Changed, "#value")
    def _changed(self, event: Input.Changed) -> None:
        self.query_one("#cli", Static).update(self._cli(event.value.strip()))
        error = self._error(event.value) if event.value.strip() else None
        box = self.query_one("#value-error", Static)
        box.update(error or "")
        box.display = error is not None
        self.query_one("#confirm", Button).disabled = error is not None

    @on(Input.Submitted)
    @on(Button.Pressed, "#confirm")
    def _confirm(self) -> None:
        value = self.query_one("#value", Input).value.strip()
        error = self._error(value) if value else None
        if error is not None:
            box = self.query_one("#value-error", Static)
            box.update(error)
            box.display = True  # the dialog stays, with what was typed
            return
        self.dismiss(value or None)

    @on(Button.Pressed, "#cancel")
    def action_cancel(self) -> None:
        self.dismiss(None)


class FlowScreen(ConsoleScreen[FlowSnapshot]):
    MODE = "flow"
    OPENS_EVERY_LIST = True
    HELP = (
        "Flow control across the fleet. Upper table: queues with keys, a rate or fair share --"
        " running against the queue's limit, its rate and what its bucket holds, waiting jobs"
        " and the oldest one's age. Lower table: keys -- limit and rate in force (set: changed"
        " by an operator), running and waiting over all values, values at their limit; the"
        " pane below shows the highlighted key value by value with the jobs holding its slots."
        " l sets a limit, r a rate (100/s, 10/5s, 600/m, or none), x resets a key to its"
        " declaration; each asks for the value, shows the CLI and asks again. > doubles and <"
        " halves the rate in force (one confirmation; below 1 a period it stretches the"
        " period). enter: its jobs."
    )
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "open", "Its jobs"),
        Binding("l", "act('limit')", "Limit"),
        Binding("r", "act('rate')", "Rate"),
        Binding("greater_than_sign", "step_rate(2)", "Rate ×2", key_display=">"),
        Binding("less_than_sign", "step_rate(0.5)", "Rate ÷2", key_display="<"),
        Binding("x", "act('reset')", "Reset key"),
    ]
    DEFAULT_CSS = """
    FlowScreen #flow-queues { height: auto; max-height: 10; }
    FlowScreen #flow-keys { height: 1fr; min-height: 4; }
    FlowScreen #flow-detail { height: auto; max-height: 12; }
    """

    def __init__(self) -> None:
        super().__init__()
        self._queues: dict[str, FlowQueue] = {}
        self._keys: dict[str, KeyInfo] = {}
        self._detail: KeyDetail | None = None
        self._key_name: str | None = None  # read by the fetch thread: whose values to load

    @property
    def title_text(self) -> str | None:
        return "Flow control"

    def compose_body(self) -> ComposeResult:
        with Vertical(id="body"):
            yield LiveTable([
                Column("queue", "Queue", None), Column("running", "Running", 11),
                Column("rate", "Rate", 16), Column("bucket", "Bucket", 14),
                Column("fair", "Fair", 5), Column("waiting", "Waiting", 9),
                Column("oldest", "Oldest", 8),
            ], id="flow-queues")
            yield LiveTable([
                Column("key", "Key", None), Column("limit", "Limit", 9),
                Column("rate", "Rate", 16), Column("running", "Running", 8),
                Column("waiting", "Waiting", 9), Column("oldest", "Oldest", 8),
                Column("full", "At limit", 8),
            ], id="flow-keys")
            yield Static(id="flow-detail")

    # -- data -----------------------------------------------------------------------------------
    def fetch(self, op: Operator) -> FlowSnapshot:
        keys = op.keys()
        name = self._key_name if self._key_name in {k.name for k in keys} else (
            keys[0].name if keys else None)
        return FlowSnapshot(op.flow_queues(), keys, op.key(name, limit=8) if name else None)

    def show(self, data: FlowSnapshot) -> None:
        self._queues = {q.queue: q for q in data.queues}
        self._keys = {k.name: k for k in data.keys}
        self._detail = data.detail
        queues: list[Row] = [(QUEUE_PREFIX + q.queue, [
            one_line(q.queue, limit=60), limit_text(q.running, q.concurrency), rate_text(q.rate),
            bucket_text(q.bucket), "on" if q.fair else "off",
            capped(q.waiting, 50_000 if q.waiting_capped else None),
            duration(q.oldest_waiting_seconds)]) for q in data.queues]
        self.query_one("#flow-queues", LiveTable).sync(queues)
        keys: list[Row] = [(k.name, [
            one_line(k.name, limit=60), self._limit_cell(k), rate_text(k.rate),
            f"{k.running:,}", f"{k.queued:,}{'+' if k.queued_capped else ''}",
            duration(k.oldest_waiting_seconds), f"{k.at_limit:,}"]) for k in data.keys]
        self.query_one("#flow-keys", LiveTable).sync(keys)
        self._paint_detail()

    @staticmethod
    def _limit_cell(k: KeyInfo) -> Text:
        text = Text(NONE if k.concurrency is None else f"{k.concurrency:,}")
        if k.overridden:
            text.append(" set", style="yellow")
        return text

    # -- what the keys act on -------------------------------------------------------------------
    def selected_key(self) -> KeyInfo | None:
        key = self.query_one("#flow-keys", LiveTable).current_key
        return self._keys.get(str(key)) if key is not None else None

    def selected_queue(self) -> FlowQueue | None:
        key = self.query_one("#flow-queues", LiveTable).current_key
        if key is None or not str(key).startswith(QUEUE_PREFIX):
            return None
        return self._queues.get(str(key)[len(QUEUE_PREFIX):])

    def _on_queues(self) -> bool:
        return self.focused is self.query_one("#flow-queues", LiveTable)

    @on(DataTable.RowHighlighted, "#flow-keys")
    def _key_highlighted(self) -> None:
        k = self.selected_key()
        if k is not None and k.name != self._key_name:
            self._key_name = k.name
            self.reload()
        self._paint_detail()

    def _paint_detail(self) -> None:
        box = self.query_one("#flow-detail", Static)
        d = self._detail
        if d is None:
            box.update(Text("No keys recorded: declare them with @app.job(concurrency=[Key(...)])"
                            " or rate=Rate(...); a worker records them when it starts.",
                            style="dim"))
            return
        k = d.key
        text = Text("key ", style="bold").append_text(one_line(k.name, limit=60))
        text.append(f" · kinds {', '.join(k.kinds)} · limit {k.concurrency or 'none'}"
                    f" · rate {rate_text(k.rate)}")
        if k.overridden:
            text.append(f" · set by {k.set_by or '?'} (code: {k.declared})", style="yellow")
        for v in d.values:
            text.append("\n").append_text(self._value_line(v))
        if d.more_values:
            more = "1 more value" if d.more_values == 1 else f"{d.more_values:,} more values"
            text.append(f"\n… {more}: forklift keys show", style="dim")
        box.update(text)

    @staticmethod
    def _value_line(v: ValueInfo) -> Text:
        line = one_line(v.value, limit=30)
        line.append("  ").append_text(limit_text(v.running, v.limit)).append(" running")
        if v.holders:
            line.append(" (" + ", ".join(f"job {h.job_id} on {h.worker_id or '?'}"
                                         for h in v.holders[:3]) + ")", style="dim")
        line.append(f" · {v.queued:,} waiting")
        if v.oldest_waiting_seconds is not None:
            line.append(f", oldest {duration(v.oldest_waiting_seconds)}")
        if v.bucket is not None:
            line.append(" · ").append_text(bucket_text(v.bucket))
        return line

    # -- actions --------------------------------------------------------------------------------
    def can_with(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        what = parameters[0] if parameters else None
        if action == "act" and what == "reset":
            k = self.selected_key()
            return True if k is not None and k.overridden and not self._on_queues() else None
        if action == "act":
            target = self.selected_queue() if self._on_queues() else self.selected_key()
            return True if target is not None else None
        if action == "step_rate":
            target = self.selected_queue() if self._on_queues() else self.selected_key()
            return True if target is not None and target.rate is not None else None
        return True

    def reason(self, action: str, parameters: tuple[object, ...]) -> str | None:
        if action == "step_rate":
            target = self.selected_queue() if self._on_queues() else self.selected_key()
            if target is None:
                return "no queue or key is highlighted"
            if target.rate is None:
                return "it has no rate to double or halve: r sets one"
        return None

    def can(self, action: str) -> bool | None:
        if action == "open":
            target = self.selected_queue() if self._on_queues() else self.selected_key()
            return True if target is not None else None
        return True

    def action_open(self) -> None:
        q = self.selected_queue() if self._on_queues() else None
        if q is not None:
            self.console.show_jobs(f"queue:{quote(q.queue)}", came_from="flow")
            return
        k = self.selected_key()
        if k is None:
            self.notify(self.why_not("open"), title="nothing to open", severity="warning")
        elif not k.kinds:
            self.notify(f"no job kind declares the key {k.name!r}: there are no jobs to list",
                        title="nothing to open", severity="warning")
        else:
            self.console.show_jobs(" ".join(f"kind:{quote(x)}" for x in k.kinds[:1]),
                                   came_from="flow")

    def action_act(self, what: str) -> None:
        if self._on_queues():
            q = self.selected_queue()
            if q is not None:
                limit = str(q.concurrency) if q.concurrency is not None else "none"
                self._ask("queue", q.queue, what, limit if what == "limit" else
                          q.rate.text if q.rate else "none")
            return
        k = self.selected_key()
        if k is None:
            return
        if what == "reset":
            name = k.name
            self._propose(name, "Reset", "key", command("keys", "reset", args=[name]),
                          lambda op: op.reset_key(name))
            return
        limit = str(k.concurrency) if k.concurrency is not None else "none"
        self._ask("key", k.name, what, limit if what == "limit" else
                  k.rate.text if k.rate else "none")

    def action_step_rate(self, factor: float) -> None:
        """> and <: the rate in force doubled or halved, confirmed once like any change."""
        q = self.selected_queue() if self._on_queues() else None
        target: FlowQueue | KeyInfo | None = q if q is not None else (
            None if self._on_queues() else self.selected_key())
        if target is None or target.rate is None:
            return
        noun, name = ("queue", target.queue) if isinstance(target, FlowQueue) else (
            "key", target.name)
        value = stepped_rate(target.rate, factor)
        try:
            parse_rate(value)
        except ValueError as exc:
            self.app.notify(f"{value}: {exc}", title="Rate", severity="error")
            return
        words = ("keys" if noun == "key" else "queues", "rate")
        setter = SETTERS[(noun, "rate")]
        self._propose(name, f"Set rate {value} (was {target.rate.text}) on", noun,
                      command(*words, args=[name, value]),
                      lambda op: getattr(op, setter)(name, value))

    def _ask(self, noun: str, name: str, what: str, current: str) -> None:
        """The value dialog, then the confirmation (with the CLI), then the change."""
        words = ("keys" if noun == "key" else "queues", what)
        setter = SETTERS[(noun, what)]

        def cli(value: str) -> str:
            return command(*words, args=[name, value])

        def chosen(value: str | None) -> None:
            if value is None:
                return
            arg: object = value if what == "rate" else self._limit(value)
            if arg is False:
                return
            if isinstance(arg, str) and arg.lower() in ("none", "off"):
                arg = None
            self._propose(name, f"Set {what} {value} on", noun, cli(value),
                          lambda op: getattr(op, setter)(name, arg))

        self.app.push_screen(ValueScreen(f"{what.capitalize()} of {noun} {name}",
                                         HINTS[what], current, cli,
                                         parse_rate if what == "rate" else parse_limit),
                             chosen)

    def _limit(self, value: str) -> int | bool | None:
        """The limit typed (None for none), or False after saying why it is not one."""
        if value.lower() in ("none", "off", "unlimited"):
            return None
        try:
            return int(value.replace(",", ""))
        except ValueError:
            self.app.notify(f"{value!r} is not a whole number or 'none'", title="Limit",
                            severity="error")
            return False

    def _propose(self, name: str, verb: str, noun: str, cli: str,
                 run: Callable[[Operator], Any]) -> None:
        def report(_result: Any) -> str:
            return f"{noun} {name}: {verb.lower()} done; in force from each worker's next claim"

        self.console.propose(Plan(verb=verb, noun=noun, count=1, ids=(name,), cli=cli, run=run,
                                  report=report))


def stepped_rate(rate: RateInfo, factor: float) -> str:
    """The rate ``factor`` times ``rate`` as typed back (``100/s`` doubled: ``200/s``): the
    count scaled while it stays whole, the period stretched below one start a period."""
    period = rate.text.split("/", 1)[1] if "/" in rate.text else "s"
    limit = rate.limit * factor
    if limit >= 1 and limit == int(limit):
        return f"{int(limit)}/{period}"
    seconds = rate.per_seconds / factor
    if limit < 1 and rate.limit == 1:
        return f"1/{seconds:g}s"
    return f"{max(1, round(limit))}/{period}"
