"""Typed payloads and results: validated with pydantic, stored as JSON PostgreSQL accepts.

A payload is refused at enqueue, with a typed error naming the field, when it does not validate,
when it holds what JSON storage would alter (:mod:`forklift._base.json`), or when it has a field the
payload type does not declare (:mod:`forklift._jobs.unknown`), unless the kind was declared with
``extra="ignore"``. At run time unknown fields are ignored, so a field removed by a deploy
does not fail the jobs already queued with it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Final, NoReturn

from forklift._base.errors import InvalidPayload, NotJSON
from forklift._base.json import (
    MAX_DEPTH,
    MAX_INT_DIGITS,
    field_path,
    find_problem,
    is_plain,
    refusal,
    refuse_problems,
    storable,
    to_json_text,
)
from forklift._jobs.typeddict_error import TypedDictNeedsTypingExtensions
from forklift._jobs.unknown import find_unknown, structured_nodes, top_unknown

if TYPE_CHECKING:
    from pydantic import TypeAdapter, ValidationError

__all__ = ["MAX_DEPTH", "MAX_INT_DIGITS", "Codec", "describe_validation", "result_text",
           "to_json_text", "undeclared", "validation_problems"]


def describe_validation(exc: ValidationError) -> tuple[str, str]:
    """(field path, message) of the first problem, without echoing the input value."""
    return validation_problems(exc)[0]


def validation_problems(exc: ValidationError) -> list[tuple[str, str]]:
    """(field path, message) of every problem, in pydantic's order, without the input value.
    Paths are pydantic's (``lines.0.qty``), as refusals always named them."""
    found = [(".".join(str(p) for p in e.get("loc", ())) or "(root)", str(e.get("msg", "invalid")))
             for e in exc.errors(include_url=False, include_input=False)]
    return found or [("(root)", "invalid")]


#: Schema nodes that only wrap the schema under their ``schema`` key.
_WRAPPERS: Final = frozenset({"nullable", "default", "function-before", "function-after",
                              "function-wrap", "model", "dataclass", "json-or-python"})
#: At most this many problems are named in one refusal (the rest are counted).
MAX_NAMED: Final = 20


def undeclared(schema: Any, value: Any, path: tuple[Any, ...] = (),
               defs: dict[str, Any] | None = None) -> Iterator[tuple[Any, ...]]:
    """Paths of every input field no type declares, by walking the input beside the type's
    pydantic core schema (not its validated value), so they are found even when the payload
    does not validate: ``{"to": "x", "subjcet": "hi"}`` lacks ``subject`` *and* holds
    ``subjcet``, and the refusal names both. A type whose own configuration sets ``extra``
    keeps its choice; a node this walk does not know (a custom validator, an alias path) is
    not entered, so it may miss a field but never names a declared one.
    """
    if not isinstance(schema, dict) or len(path) > MAX_DEPTH:
        return
    defs = {} if defs is None else defs
    kind = schema.get("type")
    if kind == "definitions":
        defs = {**defs, **{d.get("ref"): d for d in schema.get("definitions", ())}}
        yield from undeclared(schema.get("schema"), value, path, defs)
    elif kind == "definition-ref":
        yield from undeclared(defs.get(schema.get("schema_ref", "")), value, path, defs)
    elif kind in ("model", "dataclass", "typed-dict") and _chose_extra(schema.get("cls")):
        return
    elif kind in _WRAPPERS:
        yield from undeclared(schema.get("schema"), value, path, defs)
    elif kind in ("model-fields", "typed-dict", "dataclass-args"):
        yield from _undeclared_fields(schema, value, path, defs)
    elif kind in ("list", "set", "frozenset") and isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            yield from undeclared(schema.get("items_schema"), item, (*path, i), defs)
    elif kind == "tuple" and isinstance(value, (list, tuple)):
        items = schema.get("items_schema") or []
        variadic = schema.get("variadic_item_index")
        for i, item in enumerate(value):
            at = i if i < len(items) else variadic
            if at is not None and at < len(items):
                yield from undeclared(items[at], item, (*path, i), defs)
    elif kind == "dict" and isinstance(value, dict):
        for key, item in value.items():
            yield from undeclared(schema.get("values_schema"), item, (*path, key), defs)
    elif kind == "union" and isinstance(value, dict):
        # The choice the input fits best: none named if any choice declares every field.
        found = [list(undeclared(c[0] if isinstance(c, tuple) else c, value, path, defs))
                 for c in schema.get("choices", ())]
        if found:
            yield from min(found, key=len)


def _chose_extra(cls: Any) -> bool:
    own = getattr(cls, "model_config", None) or getattr(cls, "__pydantic_config__", None) or {}
    return own.get("extra") is not None


def _undeclared_fields(schema: dict[str, Any], value: Any, path: tuple[Any, ...],
                       defs: dict[str, Any]) -> Iterator[tuple[Any, ...]]:
    if not isinstance(value, dict):
        return
    fields = schema.get("fields") or {}
    pairs = fields.items() if isinstance(fields, dict) else ((f.get("name"), f) for f in fields)
    by_input: dict[Any, Any] = {}
    for name, field in pairs:
        by_input[name] = field.get("schema")
        alias = field.get("validation_alias")
        if isinstance(alias, str):
            by_input[alias] = field.get("schema")
        elif alias is not None:
            return  # an alias path or choices: its inputs cannot be told from the schema
    for key, item in value.items():
        if key in by_input:
            yield from undeclared(by_input[key], item, (*path, key), defs)
        else:
            yield (*path, key)



class Codec:
    """Validates and dumps one type (a kind's payload or result)."""

    def __init__(self, tp: Any, *, what: str = "payload") -> None:
        # pydantic loads when a kind is declared, not before
        from pydantic import PydanticUserError, TypeAdapter, ValidationError

        self._invalid = ValidationError
        self.type = tp
        self.what = what
        try:
            self.adapter: TypeAdapter[Any] = TypeAdapter(tp)
        except PydanticUserError as exc:
            if exc.code != "typed-dict-version":
                raise
            raise TypedDictNeedsTypingExtensions(
                f"{what} type {getattr(tp, '__name__', tp)!s} is or holds a typing.TypedDict,"
                " which pydantic validates only on Python 3.12 and later: define it with"
                " typing_extensions.TypedDict instead (from typing_extensions import TypedDict)",
                what=what, fix="typing_extensions.TypedDict",
            ) from None
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
            self._refuse(value, kind, validation_problems(exc), forbid_unknown)
        if forbid_unknown and valid is not value and self._unknown_possible:
            if self._unknown_top_only:
                unknown = top_unknown(value, valid)
            else:
                unknown = find_unknown(value, valid)
            if unknown is not None:
                self._refuse(value, kind, [], forbid_unknown, unknown)
        # JSON has no NaN or infinity, and a typed float field would pass them on as null.
        # A value equal to plain input holds nothing to find (NaN equals nothing; an equal
        # number is finite and bounded, an equal string the same text): one C-level compare
        # instead of a second walk, which the bulk path paid on every row.
        if not (plain and (valid is value or (type(valid) is type(value) and valid == value))) \
                and not is_plain(valid):
            hit = find_problem(valid, typed=True, keys=False)
            if hit is not None:
                raise refusal(self.what, kind, *hit)
        return valid

    def _refuse(self, value: Any, kind: str, problems: list[tuple[str, str]],
                forbid_unknown: bool, first_unknown: tuple[Any, ...] | None = None) -> NoReturn:
        """Raise InvalidPayload naming every unknown field (when they are refused) and every
        other problem: a misspelt field is named beside the required one it left missing."""
        unknown: list[str] = []
        if forbid_unknown and self._unknown_possible:
            unknown = [field_path(p) for p in undeclared(self.adapter.core_schema, value)]
            if first_unknown is not None and not unknown:
                unknown = [field_path(first_unknown)]
        named = [f"{f}: unknown field" for f in unknown]
        named += [f"{f}: {msg}" for f, msg in problems]
        more = len(named) - MAX_NAMED
        listed = "; ".join(named[:MAX_NAMED]) + (f"; and {more} more" if more > 0 else "")
        if unknown:
            declared_by = getattr(self.type, "__name__", self.type)
            names = ", ".join(repr(f) for f in unknown[:MAX_NAMED])
            raise InvalidPayload(
                f"{self.what} for {kind} is invalid: {listed} ({names} not declared by"
                f" {declared_by!s}: a misspelling?; declare the kind with extra='ignore' to drop"
                " unknown fields instead)",
                kind=kind, field=unknown[0], reason="unknown_field", unknown=unknown,
                problems=[{"field": f, "message": m} for f, m in problems],
            ) from None
        field = problems[0][0] if problems else "(root)"
        raise InvalidPayload(
            f"{self.what} for {kind} is invalid: field {field!r}: {problems[0][1]}"
            + (f" (also {'; '.join(named[1:MAX_NAMED])})" if len(named) > 1 else ""),
            kind=kind, field=field,
            problems=[{"field": f, "message": m} for f, m in problems],
        ) from None

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
                raise refusal(self.what, kind, *hit) from None
            raise NotJSON(
                f"{self.what} for {kind} does not serialise to JSON: {type(exc).__name__}",
                kind=kind,
            ) from None
        return storable(raw.decode(), value, what=self.what, kind=kind, limit=limit,
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
