"""The ``/`` filter line of every list, and the jobs filter: ``queue:mail state:dead kind:send_email tag:x batch:42 args.customer.id:42 "some text"``.

Qualifiers narrow the list; everything else (bare words or a quoted phrase) is searched in args
and errors. A qualifier may list alternatives (``state:dead,retryable``); ``args.a.b:value``
matches a payload field (read by :class:`forklift.ops.args_match.ArgsMatch`, as ``forklift jobs
list --arg`` reads it). The parsed filter is
data handed to the operator API as parameters; it is never pasted into SQL or markup.

:class:`FilterLine` is the filter line every list screen shows (on ``/``, and while a filter is
applied): the input, and beside it what the filter did (``3 of 12 queues``) or why it was
refused (``✖ not applied: … · still showing every row``), so a rejected filter never looks
applied. Other lists filter their rows by column (:mod:`forklift_console.widgets.rows`).
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.widgets import Input, Static

from forklift import STATES, ForkliftError
from forklift.ops.args_match import PREFIX as ARGS_PREFIX
from forklift.ops.args_match import ArgsMatch
from forklift.ops.filters import JobFilter
from forklift_console.widgets.rows import RowFilterError, parse_rows
from forklift_console.widgets.table import LiveTable

QUALIFIERS = ("queue", "state", "kind", "tag", "tenant", "enqueued_by", "batch", "id", "group",
              "version")


class FilterError(ValueError):
    """The filter text could not be understood; the message says how to fix it."""


def to_text(flt: JobFilter) -> str:
    """The filter as the operator would type it (round-trips through :func:`parse`)."""
    parts: list[str] = []
    for key, values in (
        ("queue", flt.queues),
        ("state", flt.states),
        ("kind", flt.kinds),
        ("tag", flt.tags),
        ("tenant", flt.tenants),
        ("enqueued_by", flt.enqueued_by),
    ):
        if values:
            parts.append(f"{key}:{quote(','.join(values))}")
    if flt.payload_versions:
        parts.append("version:" + ",".join(str(v) for v in flt.payload_versions))
    if flt.batch_id is not None:
        parts.append(f"batch:{flt.batch_id}")
    if flt.dead_group is not None:
        parts.append(f"group:{flt.dead_group}")
    if flt.id_min is not None or flt.id_max is not None:
        lo = "" if flt.id_min is None else str(flt.id_min)
        hi = "" if flt.id_max is None else str(flt.id_max)
        parts.append(f"id:{lo}" if lo == hi else f"id:{lo}..{hi}")
    parts.extend(quote(m.to_text()) for m in flt.args)
    if flt.text:
        parts.append(quote(flt.text))
    return " ".join(parts)


def _needs_quotes(value: str) -> bool:
    return any(c.isspace() or c in "\"'\\:" for c in value) or not value


def quote(value: str) -> str:
    return shlex.quote(value) if _needs_quotes(value) else value


def _int(key: str, value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise FilterError(f"{key}: wants a whole number, got {value!r}") from None


#: Words the console shows for a state (or an operator may guess) that are not states.
STATE_HINTS: dict[str, str] = {
    "waiting": "a job parked waiting for an event is scheduled: use state:scheduled",
    "sleeping": "a job parked asleep is scheduled: use state:scheduled",
    "held": "a job held for the jobs it waits on is scheduled: use state:scheduled",
    "failed": "use state:retryable (failed, will retry) or state:dead (failed for good)",
    "done": "use state:completed",
    "pending": "use state:available (ready for a worker) or state:scheduled (due later)",
    "queued": "use state:available (ready for a worker) or state:scheduled (due later)",
}


def parse(text: str) -> JobFilter:
    """Parse filter text; raises :class:`FilterError` with a message meant for the operator."""
    # "/state:dead": the key that opens the filter typed into it (the help writes "/ filter").
    text = text.strip().removeprefix("/")
    try:
        tokens = shlex.split(text, posix=True)
    except ValueError as exc:
        raise FilterError(f"unbalanced quotes ({exc}); close the quote or remove it") from None
    found: dict[str, list[str]] = {}
    words: list[str] = []
    fields: list[ArgsMatch] = []
    for token in tokens:
        key, sep, value = token.partition(":")
        if sep and key.partition(".")[0].lower() == ARGS_PREFIX:
            try:
                fields.append(ArgsMatch.parse(token))
            except ForkliftError as exc:
                raise FilterError(exc.message) from None
            continue
        if not sep or key.lower() not in QUALIFIERS:
            if sep and key.isidentifier() and value and not value.startswith("/"):
                raise FilterError(
                    f"unknown qualifier {key}: — use one of "
                    + ", ".join(f"{q}:" for q in QUALIFIERS)
                    + ' or put the text in quotes ("a:b")'
                )
            words.append(token)
            continue
        if not value:
            raise FilterError(f"{key}: needs a value, e.g. {key}:{_EXAMPLES[key.lower()]}")
        found.setdefault(key.lower(), []).extend(v for v in value.split(",") if v)
    states = tuple(found.get("state", ()))
    for s in states:
        if s.lower() in STATES and s not in STATES:
            raise FilterError(f"state:{s}: states are lower case, state:{s.lower()}")
        if s not in STATES:
            hint = STATE_HINTS.get(s.lower())
            raise FilterError(f"state:{s} is not a state" + (f": {hint}" if hint else "")
                              + "; states are " + ", ".join(STATES))
    batch = None
    if "batch" in found:
        if len(found["batch"]) != 1:
            raise FilterError("batch: takes one batch id")
        batch = _int("batch", found["batch"][0])
    group = None
    if "group" in found:
        if len(found["group"]) != 1:
            raise FilterError("group: takes one dead-letter group id (Dead letters, enter)")
        group = found["group"][0]
    id_min = id_max = None
    if "id" in found:
        if len(found["id"]) != 1:
            raise FilterError("id: takes one id or a range like id:100..200")
        lo, dots, hi = found["id"][0].partition("..")
        id_min = _int("id", lo) if lo else None
        id_max = (_int("id", hi) if hi else None) if dots else id_min
        if id_min is not None and id_max is not None and id_min > id_max:
            raise FilterError(f"id:{lo}..{hi} is empty: the first id must not exceed the second")
    try:
        return JobFilter.build(
            queues=found.get("queue"),
            states=states,
            kinds=found.get("kind"),
            tags=found.get("tag"),
            tenants=found.get("tenant"),
            enqueued_by=found.get("enqueued_by"),
            batch_id=batch,
            id_min=id_min,
            id_max=id_max,
            text=" ".join(words) or None,
            dead_group=group,
            args=fields,
            payload_versions=found.get("version"),
        )
    except ForkliftError as exc:
        raise FilterError(exc.message) from None


_EXAMPLES = {
    "queue": "mail",
    "state": "dead",
    "kind": "send_email",
    "tag": "vip",
    "tenant": "acme",
    "enqueued_by": "user:42",
    "batch": "42",
    "id": "100..200",
    "group": "3f2a9c01b2e4d5f6",
    "version": "2",
}


class FilterBar(Input):
    """The filter input; ``enter`` applies, ``escape`` gives focus back to the list."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "leave", "Back to list", show=False)
    ]

    def __init__(self, *, id: str | None = None, placeholder: str | None = None) -> None:
        super().__init__(
            placeholder=placeholder
            or '/ filter: queue:mail state:dead kind:x tag:x batch:42 args.field:value "text"',
            id=id,
        )

    def action_leave(self) -> None:
        self.screen.focus_next()


class FilterLine(Horizontal):
    """``/`` on a list: the filter input and, beside it, what the filter did or why not.

    ``target`` is the id of the :class:`LiveTable` it filters. Shown while it has the focus or
    a filter is applied; ``enter`` applies (the table keeps its cursor row when it can),
    ``esc`` goes back to the list, an empty filter shows every row again.

    A list fetched from the server a page at a time filters there instead: ``apply`` gets the
    text and returns None once applied, or why it was refused; ``hint`` is the placeholder.
    """

    DEFAULT_CSS = """
    FilterLine {
        height: 1;
        display: none;
    }
    FilterLine.-shown {
        display: block;
    }
    FilterLine > FilterBar {
        width: 1fr;
        height: 1;
        border: none;
        padding: 0 1;
        background: $boost;
    }
    FilterLine > FilterBar:focus {
        background: $primary 20%;
    }
    FilterLine > #filter-status {
        width: auto;
        max-width: 60%;
        height: 1;
        padding: 0 1;
    }
    """

    def __init__(
        self,
        target: str,
        noun: str = "rows",
        *,
        id: str | None = None,
        apply: Callable[[str], str | None] | None = None,
        hint: str | None = None,
    ) -> None:
        super().__init__(id=id or f"{target}-filter")
        self.target = target
        self.noun = noun
        self.apply = apply
        self.hint = hint
        self.applied = ""
        self.rejected: str | None = None
        #: With ``apply``: "N of M" as the screen counts it (set by the screen).
        self.count_text = ""

    def compose(self) -> ComposeResult:
        bar = FilterBar(id=f"{self.target}-filter-input", placeholder=" ")
        bar.can_focus = False  # hidden until /: neither auto-focus nor tab lands in it
        yield bar
        yield Static(id="filter-status")

    @property
    def table(self) -> LiveTable:
        return self.screen.query_one(f"#{self.target}", LiveTable)

    @property
    def input(self) -> FilterBar:
        return self.query_one(FilterBar)

    def on_mount(self) -> None:
        table = self.table
        names = list(table.filter_names())
        example = " ".join(f"{n}:…" for n in names[:3])
        self.input.placeholder = self.hint or (
            f"/ filter by {', '.join(names)}; e.g. {example} \"text\"")
        table.on_synced.append(self.paint)

    def open(self) -> None:
        """``/``: show the line and put the cursor in it."""
        self.add_class("-shown")
        self.input.can_focus = True
        self.input.focus()

    def paint(self) -> None:
        table = self.table
        status = Text()
        if self.rejected is not None:
            status.append("✖ not applied: ", style="bold")
            status.append(self.rejected)
            status.append(f" · still showing {self.applied or 'every row'}", style="dim")
        elif self.applied and self.apply is not None:
            status.append(self.count_text or "applied")
        elif self.applied:
            status.append(f"{len(table.keys):,} of {table.total:,} {self.noun}")
        else:
            status.append("enter applies · esc back", style="dim")
        self.query_one("#filter-status", Static).update(status)
        shown = bool(self.applied or self.rejected or self.has_focus_within)
        self.set_class(shown, "-shown")
        self.input.can_focus = shown

    @on(Input.Submitted)
    def _submitted(self, event: Input.Submitted) -> None:
        event.stop()
        if self.apply is not None:
            refused = self.apply(event.value.strip())
            if refused is not None:
                self._refuse(refused)
                return
            self._accept(event.value.strip())
            return
        try:
            flt = parse_rows(event.value, self.table.filter_names())
        except RowFilterError as exc:
            self._refuse(str(exc))
            return
        self.table.set_filter(flt)
        self._accept(flt.text)

    def _refuse(self, why: str) -> None:
        self.rejected = why
        self.notify(why, title="filter not applied", severity="error")
        self.paint()

    def _accept(self, text: str) -> None:
        self.rejected = None
        self.applied = text
        self.input.value = text
        self.table.focus()
        self.paint()

    @on(Input.Changed)
    def _changed(self, event: Input.Changed) -> None:
        event.stop()
        if self.rejected is not None and event.value == self.applied:
            self.rejected = None
            self.paint()

    def on_descendant_blur(self) -> None:
        if self.rejected is not None:
            return  # the refusal stays in view until it is fixed or the filter cleared
        self.input.value = self.applied  # what is typed and not applied does not linger
        self.call_after_refresh(self.paint)
