"""Typed payloads and results: validated with pydantic, stored as JSON PostgreSQL accepts."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from pydantic import BaseModel, TypeAdapter, ValidationError

from forklift._errors import InvalidPayload, NotJSON, NulCharacter, PayloadTooLarge


def describe_validation(exc: ValidationError) -> tuple[str, str]:
    """(field path, message) of the first problem, without echoing the input value."""
    first = exc.errors(include_url=False, include_input=False)[0]
    loc = ".".join(str(p) for p in first.get("loc", ())) or "(root)"
    return loc, str(first.get("msg", "invalid"))


def _children(value: Any, path: str, *, typed: bool) -> Iterator[tuple[str, Any, Any]]:
    """(path, key, child) of a dict, list or tuple; with ``typed``, of sets, dataclasses and
    pydantic models too. Nothing for any other value."""
    if isinstance(value, dict):
        items: Iterable[tuple[Any, Any]] = value.items()
    elif isinstance(value, (list, tuple)) or (typed and isinstance(value, (set, frozenset))):
        items = enumerate(value)
    elif typed and isinstance(value, BaseModel):
        items = value.__dict__.items()
    elif typed and dataclasses.is_dataclass(value) and not isinstance(value, type):
        items = ((f.name, getattr(value, f.name)) for f in dataclasses.fields(value))
    else:
        return
    for key, child in items:
        if isinstance(key, int):
            yield f"{path}[{key}]", key, child
        else:
            yield (f"{path}.{key}" if path else str(key)), key, child


def _first(
    value: Any, problem: Callable[[Any], str | None], path: str = "", *, typed: bool = False
) -> tuple[str, str] | None:
    """(field path, description) of the first value or key, depth first, that ``problem``
    describes."""
    found = problem(value)
    if found is not None:
        return path or "(root)", found
    for sub, key, child in _children(value, path, typed=typed):
        found = problem(key) if isinstance(key, str) else None
        hit = (sub, found) if found is not None else _first(child, problem, sub, typed=typed)
        if hit is not None:
            return hit
    return None


def _plain(value: Any) -> bool:
    """True for data made only of dicts, lists, tuples, strings, ints, bools and None.

    Such data holds no float and no set, so the NaN and set walks below can find nothing in
    it; this check builds no paths, so it is several times cheaper than the walks themselves.
    """
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return True
    if kind is dict:
        return all(_plain(v) for v in value.values())
    if kind is list or kind is tuple:
        return all(_plain(v) for v in value)
    return False


def _nul(value: Any) -> str | None:
    return "a NUL character" if isinstance(value, str) and "\x00" in value else None


def _not_json(value: Any) -> str | None:
    if isinstance(value, float) and not math.isfinite(value):
        return f"the number {value!r}"
    if isinstance(value, (set, frozenset)):
        return "a set"
    return None


def _non_finite(value: Any) -> str | None:
    return "not a finite number" if isinstance(value, float) and not math.isfinite(value) else None


def to_json_text(value: Any, *, what: str, kind: str, limit: int) -> str:
    """Serialise a JSON-ready value, refusing what PostgreSQL's jsonb cannot hold."""
    try:
        text = json.dumps(value, allow_nan=False, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise NotJSON(f"{what} for {kind} is not JSON: {exc}", kind=kind) from None
    return _storable(text, value, what=what, kind=kind, limit=limit)


def _storable(
    text: str, value: Any, *, what: str, kind: str, limit: int, typed: bool = False,
    size: int | None = None,
) -> str:
    """``text`` (``value`` serialised; ``size`` its UTF-8 length when known) if PostgreSQL can
    store it and it is within the limit."""
    hit = _first(value, _nul, typed=typed) if "\\u0000" in text else None
    if hit is not None:
        field = hit[0]
        raise NulCharacter(
            f"{what} for {kind} has a NUL character in field {field!r}; PostgreSQL cannot store it",
            kind=kind,
            field=field,
        )
    if size is None:
        size = len(text.encode("utf-8"))
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
        self.type = tp
        self.what = what
        self.adapter: TypeAdapter[Any] = TypeAdapter(tp)
        #: Whether None is a valid value that dumps to JSON null (a handler returning nothing).
        self.accepts_none = self._accepts_none()

    def _accepts_none(self) -> bool:
        try:
            return (self.adapter.validate_python(None) is None
                    and self.adapter.dump_python(None, mode="json") is None)
        except Exception:
            return False

    def validate(self, value: Any, *, kind: str) -> Any:
        # pydantic would quietly store a set as a list and NaN as null: refuse them instead,
        # so the handler receives what the caller sent. Typed objects (dataclasses, models)
        # are not entered here: their declared types decide.
        odd = None if _plain(value) else _first(value, _not_json)
        if odd is not None:
            field, thing = odd
            raise NotJSON(
                f"{self.what} for {kind} is not JSON: field {field!r} is {thing}",
                kind=kind,
                field=field,
            )
        try:
            valid = self.adapter.validate_python(value)
        except ValidationError as exc:
            field, msg = describe_validation(exc)
            raise InvalidPayload(
                f"{self.what} for {kind} is invalid: field {field!r}: {msg}", kind=kind, field=field
            ) from None
        # JSON has no NaN or infinity, and a typed float field would pass them on as null.
        bad = None if _plain(valid) else _first(valid, _non_finite, typed=True)
        if bad is not None:
            raise NotJSON(
                f"{self.what} for {kind} is not JSON: field {bad[0]!r} is {bad[1]}",
                kind=kind,
                field=bad[0],
            )
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
