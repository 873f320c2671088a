"""Typed payloads and results: validated with pydantic, stored as JSON PostgreSQL accepts.

What is refused, with a typed error naming the field (``a.b[2]``), so that what a handler
receives is exactly what was sent, never a silently altered copy:

- a NUL character in a string or a key (:class:`~forklift.NulCharacter`: jsonb cannot hold it);
- a lone surrogate (``"\\ud800"``: UTF-8 cannot encode it), NaN or an infinity (JSON has
  neither), a set, a dict key that is not a string (``{1: "a", "1": "b"}`` would lose a value),
  an integer of more than :data:`MAX_INT_DIGITS` digits (the worker's JSON decoder reads no
  more), nesting deeper than :data:`MAX_DEPTH` levels (:class:`~forklift.NotJSON`);
- at enqueue, a field the payload type does not declare (:class:`~forklift.InvalidPayload`),
  unless the kind was declared with ``extra="ignore"``. At run time unknown fields are ignored,
  so a field removed by a deploy does not fail the jobs already queued with it.

Every check is iterative or bounded by :data:`MAX_DEPTH`, so no input reaches Python's
recursion limit. Plain data (dicts with string keys, lists, strings, small ints, bools, None)
takes a fast path that builds no field paths; the walk that names a field runs only when there
is something to find.
"""

from __future__ import annotations

import dataclasses
import json
import math
import weakref
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, Final

from forklift._errors import InvalidPayload, NotJSON, NulCharacter, PayloadTooLarge

if TYPE_CHECKING:
    from pydantic import TypeAdapter, ValidationError

__all__ = ["MAX_DEPTH", "MAX_INT_DIGITS", "Codec", "result_text", "to_json_text"]

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


def describe_validation(exc: ValidationError) -> tuple[str, str]:
    """(field path, message) of the first problem, without echoing the input value."""
    first = exc.errors(include_url=False, include_input=False)[0]
    loc = ".".join(str(p) for p in first.get("loc", ())) or "(root)"
    return loc, str(first.get("msg", "invalid"))


# -- the fast path ------------------------------------------------------------------------------
def _plain(value: Any, depth: int = 0) -> bool:
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
        if not _plain(child, depth + 1):
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


def _refusal(what: str, kind: str, path: _Path, problem: str) -> NotJSON | NulCharacter:
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
    ``value`` was plain data (see ``_plain``)."""
    if _plain(value):
        return True
    hit = find_problem(value)
    if hit is not None:
        raise _refusal(what, kind, *hit)
    return False


# -- unknown fields ---------------------------------------------------------------------------------
_Declared = tuple[dict[str, str], bool] | None
_DECLARED: weakref.WeakKeyDictionary[type, _Declared] = weakref.WeakKeyDictionary()


def _declared(cls: type) -> _Declared:
    """(input name -> attribute, whether unknown fields are allowed) of a model or dataclass,
    or None when its inputs cannot be told (aliases given as paths or choices)."""
    try:
        return _DECLARED[cls]
    except KeyError:
        found = _DECLARED[cls] = _read_declared(cls)
        return found


def _read_declared(cls: type) -> _Declared:
    own = getattr(cls, "model_config", None) or getattr(cls, "__pydantic_config__", None) or {}
    allowed = own.get("extra") is not None  # the type chose for itself: respect it
    infos = getattr(cls, "__pydantic_fields__", None)
    names: dict[str, str] = {}
    if infos:
        for name, info in infos.items():
            names[name] = name
            for alias in (info.alias, info.validation_alias):
                if isinstance(alias, str):
                    names[alias] = name
                elif alias is not None:
                    return None
    elif dataclasses.is_dataclass(cls):
        names = {f.name: f.name for f in dataclasses.fields(cls)}
    else:
        return None
    return names, allowed


_LEAVES: Final = frozenset({str, int, float, bool, type(None)})
_MISSING: Final = object()


def top_unknown(given: Any, valid: Any) -> _Path | None:
    """The first key of ``given`` (a dict) that ``valid`` dropped, by set difference."""
    if type(given) is not dict:
        return None
    if isinstance(valid, dict):
        if len(valid) >= len(given):
            return None  # nothing dropped (keys may have been converted, not lost)
        extra = given.keys() - valid.keys()
    else:
        declared = _declared(type(valid)) if hasattr(valid, "__dict__") else None
        if declared is None or declared[1]:
            return None
        extra = given.keys() - declared[0].keys()
    if not extra:
        return None
    return (next(k for k in given if k in extra),)


def find_unknown(given: Any, valid: Any, path: _Path = ()) -> _Path | None:
    """The path of the first input field that validation dropped (one no type declares).

    Walks the input beside the validated value: a model or dataclass built from a dict must
    have a declared field for each of the dict's keys, and a dict that kept its keys (a
    TypedDict) must have kept all of them. Bounded by MAX_DEPTH (the input was checked).
    Scalars are not entered, so a flat payload costs one pass over its keys.
    """
    if given is valid or type(given) in _LEAVES or len(path) > MAX_DEPTH:
        return None
    if isinstance(valid, dict):
        if not isinstance(given, dict):
            return None
        shrunk = len(valid) < len(given)
        for key, child in given.items():
            sub = valid.get(key, _MISSING)
            if sub is _MISSING:
                # Dropped, or the keys were converted (a dict[int, ...] built from strings).
                return (*path, key) if shrunk else None
            if sub is not child and type(child) not in _LEAVES:
                hit = find_unknown(child, sub, (*path, key))
                if hit is not None:
                    return hit
        return None
    if isinstance(given, dict):
        if not hasattr(valid, "__dict__") or isinstance(valid, type):
            return None
        declared = _declared(type(valid))
        if declared is None:
            return None
        names, allowed = declared
        for key, child in given.items():
            attr = names.get(key) if isinstance(key, str) else None
            if attr is None:
                if not allowed:
                    return (*path, key)
                continue
            if type(child) not in _LEAVES:
                hit = find_unknown(child, getattr(valid, attr, None), (*path, key))
                if hit is not None:
                    return hit
        return None
    if (isinstance(given, (list, tuple)) and isinstance(valid, (list, tuple))
            and len(given) == len(valid)):
        for i, (a, b) in enumerate(zip(given, valid, strict=True)):
            if a is not b and type(a) not in _LEAVES:
                hit = find_unknown(a, b, (*path, i))
                if hit is not None:
                    return hit
    return None


_STRUCTURED: Final = frozenset({"model", "dataclass", "typed-dict", "definition-ref"})
_NOT_SCHEMA: Final = frozenset({"default", "metadata", "serialization", "cls", "config", "ref",
                                "function", "expected", "examples"})


def structured_nodes(schema: Any, limit: int = 2) -> int:
    """How many typed objects (models, dataclasses, TypedDicts, recursive references) a
    pydantic core schema holds, counting up to ``limit``: 0 means unknown fields cannot
    occur, 1 at the top means they can only occur at the top."""
    found = 0
    stack = [schema]
    while stack and found < limit:
        node = stack.pop()
        if isinstance(node, list):
            stack.extend(node)
        elif isinstance(node, dict):
            if node.get("type") in _STRUCTURED:
                found += 1
            stack.extend(v for k, v in node.items() if k not in _NOT_SCHEMA)
    return found


# -- serialising ------------------------------------------------------------------------------------
def to_json_text(value: Any, *, what: str, kind: str, limit: int) -> str:
    """Serialise a JSON-ready value (meta, a dumped result), refusing what PostgreSQL's jsonb
    cannot hold or JSON would alter; raises NotJSON, NulCharacter or PayloadTooLarge."""
    refuse_problems(value, what=what, kind=kind)
    try:
        text = json.dumps(value, allow_nan=False, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise NotJSON(f"{what} for {kind} is not JSON: {exc}", kind=kind) from None
    return _storable(text, value, what=what, kind=kind, limit=limit)


def _storable(
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
            raise _refusal(what, kind, *hit)
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


class Codec:
    """Validates and dumps one type (a kind's payload or result)."""

    def __init__(self, tp: Any, *, what: str = "payload") -> None:
        # pydantic loads when a kind is declared, not before
        from pydantic import TypeAdapter, ValidationError

        self._invalid = ValidationError
        self.type = tp
        self.what = what
        self.adapter: TypeAdapter[Any] = TypeAdapter(tp)
        #: Whether None is a valid value that dumps to JSON null (a handler returning nothing).
        self.accepts_none = self._accepts_none()
        # Whether validation can drop a field at all, and if so only at the top: then a set
        # difference of keys finds it, with no walk (the bulk path pays for this on every row).
        nodes = structured_nodes(self.adapter.core_schema)
        self._unknown_possible = nodes > 0
        self._unknown_top_only = nodes == 1 and self.adapter.core_schema.get("type") in (
            "model", "dataclass", "typed-dict")

    def _accepts_none(self) -> bool:
        try:
            return (self.adapter.validate_python(None) is None
                    and self.adapter.dump_python(None, mode="json") is None)
        except Exception:
            return False

    def validate(self, value: Any, *, kind: str, forbid_unknown: bool = False) -> Any:
        """The value validated against the type; raises NotJSON, NulCharacter or
        InvalidPayload naming the field. ``forbid_unknown`` (enqueue): refuse input fields the
        type does not declare, which pydantic would drop."""
        # pydantic would quietly store a set as a list, NaN as null and {1: ...} as {"1": ...}:
        # refuse them instead, so the handler receives what the caller sent. Typed objects
        # (dataclasses, models) are not entered here: their declared types decide.
        plain = refuse_problems(value, what=self.what, kind=kind)
        try:
            valid = self.adapter.validate_python(value)
        except self._invalid as exc:
            field, msg = describe_validation(exc)
            raise InvalidPayload(
                f"{self.what} for {kind} is invalid: field {field!r}: {msg}", kind=kind, field=field
            ) from None
        if forbid_unknown and valid is not value and self._unknown_possible:
            if self._unknown_top_only:
                unknown = top_unknown(value, valid)
            else:
                unknown = find_unknown(value, valid)
            if unknown is not None:
                field = field_path(unknown)
                raise InvalidPayload(
                    f"{self.what} for {kind} is invalid: field {field!r} is not declared by"
                    f" {getattr(self.type, '__name__', self.type)!s} (a misspelling?); declare the"
                    " kind with extra='ignore' to drop unknown fields instead",
                    kind=kind, field=field, reason="unknown_field",
                )
        # JSON has no NaN or infinity, and a typed float field would pass them on as null.
        if not (plain and valid is value) and not _plain(valid):
            hit = find_problem(valid, typed=True, keys=False)
            if hit is not None:
                raise _refusal(self.what, kind, *hit)
        return valid

    def to_text(self, value: Any, *, kind: str, limit: int) -> str:
        """A validated value as storable JSON text, serialised by pydantic in one step.

        The same JSON as ``to_json_text(self.dump(value))`` (floats may be spelt differently,
        as ``1e-7`` for ``1e-07``), several times faster. NaN and infinity were refused by
        ``validate``.
        """
        try:
            raw = self.adapter.dump_json(value)
        except Exception as exc:
            hit = find_problem(value, typed=True, keys=False)
            if hit is not None:
                raise _refusal(self.what, kind, *hit) from None
            raise NotJSON(
                f"{self.what} for {kind} does not serialise to JSON: {type(exc).__name__}",
                kind=kind,
            ) from None
        return _storable(raw.decode(), value, what=self.what, kind=kind, limit=limit,
                         typed=True, size=len(raw))

    def dump(self, value: Any, *, kind: str, what: str | None = None) -> Any:
        try:
            return self.adapter.dump_python(value, mode="json")
        except Exception as exc:
            raise NotJSON(
                f"{what or self.what} for {kind} does not serialise to JSON: {type(exc).__name__}",
                kind=kind,
            ) from None


def result_text(codec: Codec, value: Any, *, kind: str, limit: int) -> str:
    """A handler's return value as the JSON text stored as the job's result.

    Raises a ForkliftError subclass (``invalid_payload``, ``not_json``, ``nul_character``,
    ``payload_too_large``) for a result that does not validate or cannot be stored exactly:
    the worker records that as ``invalid_result``.
    """
    if value is None and codec.accepts_none:
        return "null"
    data = codec.dump(codec.validate(value, kind=kind), kind=kind, what="result")
    return to_json_text(data, what="result", kind=kind, limit=limit)
