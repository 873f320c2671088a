"""Unknown payload fields: what validation dropped because no type declares it.

pydantic ignores input fields a model, dataclass or TypedDict does not declare; at enqueue
forklift refuses them instead (a misspelt field would otherwise vanish). The check compares the
input with the validated value, so it needs nothing from pydantic's internals, and a type
whose own configuration sets ``extra`` keeps its choice.
"""

from __future__ import annotations

import dataclasses
import weakref
from typing import Any, Final

from forklift._base.json import MAX_DEPTH

__all__ = ["find_unknown", "structured_nodes", "top_unknown"]

_Path = tuple[Any, ...]

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


