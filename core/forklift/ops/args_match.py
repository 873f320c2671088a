"""A payload field in a job filter: ``args.customer.id:42``, as Oban Web searches args.

One syntax for every door: the console's jobs filter and ``forklift jobs list --arg`` both read
it with :meth:`ArgsMatch.parse`. The path names object keys from the top of the job's args
(``args.a.b`` is ``args["a"]["b"]``); the value is typed by how it reads:

- a number (``42``, ``-3``, ``2.5``) matches that JSON number, numerically (``42`` finds
  ``42.0``), and the string of the same text (ids arrive both ways);
- ``true``, ``false``, ``null`` match that JSON value and the string of the same text;
- anything else matches that JSON string exactly (case and all).

The condition is JSON containment (``args @> '{"a": {"b": 42}}'``) with the document bound as a
query parameter, never spliced into SQL text; an application that searches args often can give
it a GIN index (``CREATE INDEX ... ON forklift.jobs USING gin (args jsonb_path_ops)``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from forklift.ops._parse import check_text
from forklift.ops.errors import InvalidFilter

__all__ = ["MAX_DEPTH", "PREFIX", "ArgsMatch"]

PREFIX = "args"
#: The deepest path a filter may name.
MAX_DEPTH = 8
_INT = re.compile(r"-?(?:0|[1-9][0-9]{0,30})")
_FLOAT = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]{1,3})?")
_WORDS: dict[str, bool | None] = {"true": True, "false": False, "null": None}
_EXAMPLE = "args.customer.id:42"

Scalar = str | int | float | bool | None


def _typed(text: str) -> Scalar:
    if _INT.fullmatch(text):
        return int(text)
    if _FLOAT.fullmatch(text):
        return float(text)
    if text in _WORDS:
        return _WORDS[text]
    return text


@dataclass(frozen=True)
class ArgsMatch:
    """Jobs whose args hold ``value`` at ``path`` (object keys from the top)."""

    path: tuple[str, ...]
    value: Scalar

    def __post_init__(self) -> None:
        if not self.path:
            raise InvalidFilter(f"a payload filter names a field: e.g. {_EXAMPLE}", field="args")
        if len(self.path) > MAX_DEPTH:
            raise InvalidFilter(f"args.{'.'.join(self.path)} is deeper than {MAX_DEPTH} fields",
                                field="args")
        for key in self.path:
            if not key:
                raise InvalidFilter(
                    f"args.{'.'.join(self.path)} has an empty field name (two dots in a row,"
                    " or a dot at the end)", field="args")
            check_text(key, "args")
        if isinstance(self.value, str):
            check_text(self.value, "args")
        elif isinstance(self.value, float) and not (abs(self.value) < float("inf")):
            raise InvalidFilter("a payload value must be a finite number", field="args")

    @classmethod
    def parse(cls, text: str) -> ArgsMatch:
        """``args.a.b:value`` (the ``args.`` prefix may be left out where nothing else could
        be meant, as in ``--arg a.b:value``)."""
        raw = check_text(text, "args").strip()
        where, sep, value = raw.partition(":")
        head, dot, rest = where.partition(".")
        path_text = rest if head.lower() == PREFIX else where
        if head.lower() == PREFIX and not dot:
            raise InvalidFilter(f"{where}: names no field: write it as {_EXAMPLE}", field="args")
        if not sep:
            raise InvalidFilter(f"{raw!r} has no value: write it as {_EXAMPLE}", field="args")
        if not value:
            raise InvalidFilter(f"{where}: needs a value, e.g. {where}:42 or {where}:gold",
                                field="args")
        return cls(tuple(path_text.split(".")), _typed(value))

    def to_text(self) -> str:
        """As the operator types it (:meth:`parse` reads it back to an equal match)."""
        if self.value is None or isinstance(self.value, bool):
            shown = json.dumps(self.value)
        elif isinstance(self.value, (int, float)):
            shown = repr(self.value)
        else:
            shown = self.value
        return f"{PREFIX}.{'.'.join(self.path)}:{shown}"

    def documents(self) -> list[str]:
        """The JSON documents a matching job's args contain (any one of them)."""
        values: list[Any] = [self.value]
        if not isinstance(self.value, str):
            # A typed value also matches its text: ids and flags arrive both ways.
            values.append(self.to_text().partition(":")[2])
        out = []
        for v in values:
            doc: Any = v
            for key in reversed(self.path):
                doc = {key: doc}
            out.append(json.dumps(doc, ensure_ascii=False, separators=(",", ":")))
        return out

    def condition(self, alias: str = "t") -> tuple[str, list[Any]]:
        """Fixed SQL text and its parameters (the documents)."""
        docs = self.documents()
        return "(" + " OR ".join(f"{alias}.args @> %s::jsonb" for _ in docs) + ")", list(docs)

    def to_json(self) -> dict[str, Any]:
        return {"path": ".".join(self.path), "value": self.value}
