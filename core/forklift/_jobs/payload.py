"""Typed payloads and results: validated with pydantic, stored as JSON PostgreSQL accepts.

A payload is refused at enqueue, with a typed error naming the field, when it does not validate,
when it holds what JSON storage would alter (:mod:`forklift._base.json`), or when it has a field the
payload type does not declare (:mod:`forklift._jobs.unknown`), unless the kind was declared with
``extra="ignore"``. At run time unknown fields are ignored, so a field removed by a deploy
does not fail the jobs already queued with it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

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
from forklift._jobs.unknown import find_unknown, structured_nodes, top_unknown

if TYPE_CHECKING:
    from pydantic import TypeAdapter, ValidationError

__all__ = ["MAX_DEPTH", "MAX_INT_DIGITS", "Codec", "describe_validation", "result_text",
           "to_json_text"]


def describe_validation(exc: ValidationError) -> tuple[str, str]:
    """(field path, message) of the first problem, without echoing the input value."""
    first = exc.errors(include_url=False, include_input=False)[0]
    loc = ".".join(str(p) for p in first.get("loc", ())) or "(root)"
    return loc, str(first.get("msg", "invalid"))



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
        # A value equal to plain input holds nothing to find (NaN equals nothing; an equal
        # number is finite and bounded, an equal string the same text): one C-level compare
        # instead of a second walk, which the bulk path paid on every row.
        if not (plain and (valid is value or (type(valid) is type(value) and valid == value))) \
                and not is_plain(valid):
            hit = find_problem(valid, typed=True, keys=False)
            if hit is not None:
                raise refusal(self.what, kind, *hit)
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
