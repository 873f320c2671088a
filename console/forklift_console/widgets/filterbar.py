"""The jobs filter: ``queue:mail state:dead kind:send_email tag:x batch:42 "some text"``.

Qualifiers narrow the list; everything else (bare words or a quoted phrase) is searched in args
and errors. A qualifier may list alternatives (``state:dead,retryable``). The parsed filter is
data handed to the operator API as parameters; it is never pasted into SQL or markup.
"""

from __future__ import annotations

import shlex
from typing import ClassVar

from textual.binding import Binding, BindingType
from textual.widgets import Input

from forklift import STATES, ForkliftError
from forklift.ops.filters import JobFilter

QUALIFIERS = ("queue", "state", "kind", "tag", "batch", "id")


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
    ):
        if values:
            parts.append(f"{key}:{quote(','.join(values))}")
    if flt.batch_id is not None:
        parts.append(f"batch:{flt.batch_id}")
    if flt.id_min is not None or flt.id_max is not None:
        lo = "" if flt.id_min is None else str(flt.id_min)
        hi = "" if flt.id_max is None else str(flt.id_max)
        parts.append(f"id:{lo}" if lo == hi else f"id:{lo}..{hi}")
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


def parse(text: str) -> JobFilter:
    """Parse filter text; raises :class:`FilterError` with a message meant for the operator."""
    try:
        tokens = shlex.split(text, posix=True)
    except ValueError as exc:
        raise FilterError(f"unbalanced quotes ({exc}); close the quote or remove it") from None
    found: dict[str, list[str]] = {}
    words: list[str] = []
    for token in tokens:
        key, sep, value = token.partition(":")
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
        if s not in STATES:
            raise FilterError(f"state:{s} is not a state; states are " + ", ".join(STATES))
    batch = None
    if "batch" in found:
        if len(found["batch"]) != 1:
            raise FilterError("batch: takes one batch id")
        batch = _int("batch", found["batch"][0])
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
            batch_id=batch,
            id_min=id_min,
            id_max=id_max,
            text=" ".join(words) or None,
        )
    except ForkliftError as exc:
        raise FilterError(exc.message) from None


_EXAMPLES = {
    "queue": "mail",
    "state": "dead",
    "kind": "send_email",
    "tag": "vip",
    "batch": "42",
    "id": "100..200",
}


class FilterBar(Input):
    """The filter input; ``enter`` applies, ``escape`` gives focus back to the list."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "leave", "Back to list", show=False)
    ]

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(
            placeholder='/ filter: queue:mail state:dead kind:x tag:x batch:42 "text"',
            id=id,
        )

    def action_leave(self) -> None:
        self.screen.focus_next()
