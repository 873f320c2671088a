"""JSON exactly as sent: what PostgreSQL's jsonb stores and reads back unchanged, or a typed
refusal naming the field (``a.b[2]``).

Refused: a NUL character in a string or key (:class:`~forklift.NulCharacter`: jsonb cannot
hold it); a lone surrogate (``"\\ud800"``: UTF-8 cannot encode it), NaN or an infinity (JSON
has neither), a set, a dict key that is not a string (``{1: "a", "1": "b"}`` would lose a
value), an integer of more than :data:`MAX_INT_DIGITS` digits (the worker's JSON decoder reads
no more), nesting deeper than :data:`MAX_DEPTH` levels (:class:`~forklift.NotJSON`).

Every check is iterative or bounded by :data:`MAX_DEPTH`, so no input reaches Python's
recursion limit. Plain data (dicts with string keys, lists, strings, small ints, bools, None)
takes a fast path that builds no field paths; the walk that names a field runs only when there
is something to find.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterable, Iterator
from typing import Any, Final

from forklift._base.errors import NotJSON, NulCharacter, PayloadTooLarge

__all__ = ["MAX_DEPTH", "MAX_INT_DIGITS", "field_path", "find_problem", "is_plain", "refusal",
           "refuse_problems", "storable", "to_json_text"]

#: The deepest nesting of lists and objects a payload, result or meta may have.
MAX_DEPTH: Final = 100
#: The most digits an integer may have: Python's default limit for reading one from text.
MAX_INT_DIGITS: Final = 4300
_INT_BOUND: Final = 10**MAX_INT_DIGITS

_Path = tuple[Any, ...]  # keys and indices from the root


def field_path(parts: _Path) -> str:
    """``a.b[2].c`` for ("a", "b", 2, "c"); ``(root)`` for the value itself."""
    out = ""
    for part in parts:
        if isinstance(part, int) and not isinstance(part, bool):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "(root)"


# -- the fast path ------------------------------------------------------------------------------
def is_plain(value: Any, depth: int = 0) -> bool:
    """True for data made only of dicts with string keys, lists, tuples, strings, bounded ints,
    bools and None, nested at most MAX_DEPTH deep: nothing in it can be refused, except what
    serialisation itself reveals (a NUL or a lone surrogate in a string).

    On the bulk path for every row, twice: scalars are checked inline, without a call each.
    """
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return True
    if kind is int:
        return bool(-_INT_BOUND < value < _INT_BOUND)
    if depth >= MAX_DEPTH:
        return False
    if kind is dict:
        items: Iterable[Any] = value.values()
        for key in value:
            if type(key) is not str:
                return False
    elif kind is list or kind is tuple:
        items = value
    else:
        return False
    for child in items:
        sort = type(child)
        if sort is str or sort is bool or child is None:
            continue
        if sort is int:
            if -_INT_BOUND < child < _INT_BOUND:
                continue
            return False
        if not is_plain(child, depth + 1):
            return False
    return True


# -- the walk that names the field ------------------------------------------------------------------
def _string_problem(text: str) -> str | None:
    if "\x00" in text:
        return "nul"
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            return f"a lone surrogate (U+{ord(text[exc.start]):04X}), which UTF-8 cannot encode"
    return None


def _value_problem(value: Any, typed: bool) -> str | None:
    if isinstance(value, str):
        return _string_problem(value)
    if isinstance(value, float):
        return None if math.isfinite(value) else f"the number {value!r}, which JSON cannot hold"
    if isinstance(value, int) and not isinstance(value, bool):
        if -_INT_BOUND < value < _INT_BOUND:
            return None
        return (f"an integer of about {int(value.bit_length() * 0.30103) + 1} digits"
                f" (at most {MAX_INT_DIGITS})")
    if not typed and isinstance(value, (set, frozenset)):
        return "a set"
    return None


def _children(value: Any, typed: bool) -> Iterator[tuple[Any, Any]] | None:
    """(key, child) of a container, or None for a leaf. With ``typed``, sets, dataclasses and
    pydantic models are containers too (their declared types decide what they hold)."""
    if isinstance(value, dict):
        return iter(value.items())
    if isinstance(value, (list, tuple)) or (typed and isinstance(value, (set, frozenset))):
        return enumerate(value)
    if typed and dataclasses.is_dataclass(value) and not isinstance(value, type):
        return ((f.name, getattr(value, f.name)) for f in dataclasses.fields(value))
    if typed and hasattr(type(value), "__pydantic_fields__") and hasattr(value, "__dict__"):
        attrs: dict[str, Any] = value.__dict__
        return iter(attrs.items())
    return None


def find_problem(value: Any, *, typed: bool = False, keys: bool = True) -> tuple[_Path, str] | None:
    """(path, description) of the first thing JSON storage would refuse or alter, depth first;
    description ``"nul"`` for a NUL character. ``keys``: refuse dict keys that are not
    strings (off for validated values, whose declared types may hold int keys)."""
    found = _value_problem(value, typed)
    if found is not None:
        return (), found
    top = _children(value, typed)
    if top is None:
        return None
    stack: list[tuple[_Path, Iterator[tuple[Any, Any]], bool]] = [((), top, isinstance(value, dict))]
    while stack:
        path, items, is_dict = stack[-1]
        step = next(items, None)
        if step is None:
            stack.pop()
            continue
        key, child = step
        if is_dict:
            if isinstance(key, str):
                bad_key = _string_problem(key)
                if bad_key is not None:
                    return (*path, key), bad_key
            elif keys:
                return path, (f"an object with the key {key!r} (a {type(key).__name__});"
                              " JSON object keys are strings")
        here = (*path, key)
        found = _value_problem(child, typed)
        if found is not None:
            return here, found
        grand = _children(child, typed)
        if grand is not None:
            if len(stack) >= MAX_DEPTH:
                return here, f"nested deeper than {MAX_DEPTH} levels"
            stack.append((here, grand, isinstance(child, dict)))
    return None


def refusal(what: str, kind: str, path: _Path, problem: str) -> NotJSON | NulCharacter:
    field = field_path(path)
    shown = field if len(field) <= 120 else field[:117] + "..."
    if problem == "nul":
        return NulCharacter(
            f"{what} for {kind} has a NUL character in field {shown!r};"
            " PostgreSQL cannot store it",
            kind=kind, field=field,
        )
    return NotJSON(f"{what} for {kind} is not JSON: field {shown!r} is {problem}",
                   kind=kind, field=field)


def refuse_problems(value: Any, *, what: str, kind: str) -> bool:
    """Raise the typed refusal for the first problem in ``value``, if any; returns whether
    ``value`` was plain data (see ``is_plain``)."""
    if is_plain(value):
        return True
    hit = find_problem(value)
    if hit is not None:
        raise refusal(what, kind, *hit)
    return False


# -- serialising ------------------------------------------------------------------------------------
def to_json_text(value: Any, *, what: str, kind: str, limit: int) -> str:
    """Serialise a JSON-ready value (meta, a dumped result), refusing what PostgreSQL's jsonb
    cannot hold or JSON would alter; raises NotJSON, NulCharacter or PayloadTooLarge."""
    refuse_problems(value, what=what, kind=kind)
    try:
        text = json.dumps(value, allow_nan=False, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise NotJSON(f"{what} for {kind} is not JSON: {exc}", kind=kind) from None
    return storable(text, value, what=what, kind=kind, limit=limit)


def storable(
    text: str, value: Any, *, what: str, kind: str, limit: int, typed: bool = False,
    size: int | None = None,
) -> str:
    """``text`` (``value`` serialised; ``size`` its UTF-8 length when known) if PostgreSQL can
    store it and it is within the limit."""
    if size is None:
        try:
            size = len(text.encode("utf-8"))
        except UnicodeEncodeError:
            size = -1
    if size < 0 or "\\u0000" in text:
        hit = find_problem(value, typed=typed, keys=not typed)
        if hit is not None:
            raise refusal(what, kind, *hit)
        if size < 0:  # pragma: no cover - the walk finds every string serialisation holds
            raise NotJSON(f"{what} for {kind} is not valid Unicode", kind=kind)
    if size > limit:
        raise PayloadTooLarge(
            f"{what} for {kind} is {size} bytes, over the limit of {limit} bytes",
            kind=kind,
            size=size,
            limit=limit,
        )
    return text


