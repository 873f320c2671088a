"""What a list filters and sorts by: a cell's natural value, and the ``/`` filter of a table.

A table's rows are what the operator sees, so both work on the cells' text: ``3m05s`` sorts
after ``42s``, ``1,234`` after ``999``, ``in 5s`` after ``5s ago``, and ``–`` (nothing) sorts
last whichever the direction. The filter language is the jobs filter's, applied to columns::

    state:paused,lagging  queue:mail  lag:>60  "some text"

``column:value`` keeps rows whose column contains the value (any of comma-separated values);
``column:>N`` / ``column:<N`` compare the column's natural value; every other word must
appear somewhere in the row. Columns are named by their key or the first word of their label.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from rich.text import Text

from forklift_console.widgets.text import NONE

#: A natural value: (0, number) sorts before (1, text); None (no value) sorts last.
Natural = tuple[int, float | str] | None

_UNITS = {"d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
_DURATION = re.compile(r"^-?(?:\d+(?:\.\d+)?(?:ms|d|h|m|s))+$")
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|d|h|m|s)")
_NUMBER = re.compile(r"^[-+]?\d[\d,]*(?:\.\d+)?")
_EMPTY = {"", NONE, "-", "∞"}


class RowFilterError(ValueError):
    """The filter text could not be understood; the message says how to fix it."""


def plain_text(cell: Any) -> str:
    return cell.plain if isinstance(cell, Text) else str(cell)


def _duration(word: str) -> float | None:
    if not _DURATION.match(word):
        return None
    sign = -1.0 if word.startswith("-") else 1.0
    return sign * sum(float(n) * _UNITS[u] for n, u in _PART.findall(word))


def natural(cell: Any) -> Natural:
    """The value a cell sorts by: a number (counts, sizes, durations, ``3/10``, ``45%``) or
    its text, case-folded; None for an empty cell."""
    text = plain_text(cell).strip()
    if text == "∞":
        return (0, float("inf"))
    if text in _EMPTY:
        return None
    words = text.split()
    # A glyph before a word (state badges) sorts by the word.
    if len(words) == 2 and len(words[0]) == 1 and not words[0].isalnum():
        text, words = words[1], words[1:]
    sign = 1.0
    if len(words) == 2 and words[0] == "in":
        words = words[1:]
    elif len(words) == 2 and words[1] == "ago":
        words, sign = words[:1], -1.0
    if len(words) == 1:
        word = words[0].rstrip("%+")
        seconds = _duration(word)
        if seconds is not None:
            return (0, sign * seconds)
        match = _NUMBER.match(word)
        if match is not None and (match.end() == len(word) or word[match.end()] in "/×x"):
            return (0, sign * float(match.group().replace(",", "")))
    return (1, text.casefold())


def sort_key(value: Natural, descending: bool) -> tuple[int, Any]:
    """Rows with no value go last in either direction."""
    if value is None:
        return (2, 0)
    kind, v = value
    if descending:
        return (1 - kind, -v) if isinstance(v, float) else (1 - kind, _Reversed(v))
    return (kind, v)


@dataclass(frozen=True, order=False)
class _Reversed:
    text: str

    def __lt__(self, other: _Reversed) -> bool:
        return self.text > other.text


Test = Callable[[Sequence[Any]], bool]


@dataclass(frozen=True)
class RowFilter:
    """A parsed ``/`` filter: its text as applied and the test each row must pass."""

    text: str = ""
    tests: tuple[Test, ...] = field(default=(), compare=False)

    def __bool__(self) -> bool:
        return bool(self.text)

    def keep(self, cells: Sequence[Any]) -> bool:
        return all(test(cells) for test in self.tests)


def column_names(keys: Sequence[str], labels: Sequence[str]) -> dict[str, int]:
    """Names a qualifier may use for each column: its key and its label's first word."""
    names: dict[str, int] = {}
    for i, (key, label) in enumerate(zip(keys, labels, strict=True)):
        for name in (key, *(label.split()[:1])):
            name = name.casefold().strip("/")
            if name and name.replace("_", "").isalnum():
                names.setdefault(name, i)
    return names


def _compare(i: int, op: str, bound: float) -> Test:
    def test(cells: Sequence[Any]) -> bool:
        value = natural(cells[i])
        if value is None or value[0] != 0:
            return False
        number = float(value[1])
        return number > bound if op == ">" else number < bound

    return test


def _contains(i: int | None, needles: tuple[str, ...]) -> Test:
    def test(cells: Sequence[Any]) -> bool:
        texts = [plain_text(c).casefold() for c in (cells if i is None else [cells[i]])]
        return any(n in t for n in needles for t in texts)

    return test


def parse_rows(text: str, names: dict[str, int]) -> RowFilter:
    """Parse ``/`` filter text for a table whose columns are ``names``."""
    text = text.strip()
    if not text:
        return RowFilter()
    try:
        tokens = shlex.split(text, posix=True)
    except ValueError as exc:
        raise RowFilterError(f"unbalanced quotes ({exc}); close the quote or remove it") from None
    tests: list[Test] = []
    known = ", ".join(f"{n}:" for n in names)
    for token in tokens:
        key, sep, value = token.partition(":")
        if not sep:
            tests.append(_contains(None, (token.casefold(),)))
            continue
        column = names.get(key.casefold())
        if column is None:
            if key.isidentifier():
                raise RowFilterError(
                    f"unknown column {key}: — use one of {known} or put the text in quotes"
                    ' ("a:b")'
                )
            tests.append(_contains(None, (token.casefold(),)))
            continue
        if not value:
            raise RowFilterError(f"{key}: needs a value, e.g. {key}:x or {key}:>10")
        if value[0] in "<>":
            bound = natural(value[1:])
            if bound is None or bound[0] != 0:
                raise RowFilterError(f"{key}:{value} compares with a number, e.g. {key}:>10")
            tests.append(_compare(column, value[0], float(bound[1])))
            continue
        tests.append(_contains(column, tuple(v.casefold() for v in value.split(",") if v)))
    return RowFilter(" ".join(shlex.quote(t) if " " in t else t for t in tokens), tuple(tests))
