"""Typed payloads and results: validated with pydantic, stored as JSON PostgreSQL accepts."""

from __future__ import annotations

import json
from typing import Any

from pydantic import TypeAdapter, ValidationError

from forklift.errors import InvalidPayload, NotJSON, NulCharacter, PayloadTooLarge


def describe_validation(exc: ValidationError) -> tuple[str, str]:
    """(field path, message) of the first problem, without echoing the input value."""
    first = exc.errors(include_url=False, include_input=False)[0]
    loc = ".".join(str(p) for p in first.get("loc", ())) or "(root)"
    return loc, str(first.get("msg", "invalid"))


def _find_nul(value: Any, path: str = "") -> str | None:
    if isinstance(value, str):
        return path or "(root)" if "\x00" in value else None
    if isinstance(value, dict):
        for k, v in value.items():
            sub = f"{path}.{k}" if path else str(k)
            if "\x00" in str(k):
                return sub
            found = _find_nul(v, sub)
            if found:
                return found
    if isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            found = _find_nul(v, f"{path}[{i}]")
            if found:
                return found
    return None


def to_json_text(value: Any, *, what: str, kind: str, limit: int) -> str:
    """Serialise a JSON-ready value, refusing what PostgreSQL's jsonb cannot hold."""
    try:
        text = json.dumps(value, allow_nan=False, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise NotJSON(f"{what} for {kind} is not JSON: {exc}", kind=kind) from None
    field = _find_nul(value) if "\\u0000" in text else None
    if field is not None:
        raise NulCharacter(
            f"{what} for {kind} has a NUL character in field {field!r}; PostgreSQL cannot store it",
            kind=kind,
            field=field,
        )
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

    def __init__(self, tp: Any) -> None:
        self.type = tp
        self.adapter: TypeAdapter[Any] = TypeAdapter(tp)

    def validate(self, value: Any, *, kind: str) -> Any:
        try:
            return self.adapter.validate_python(value)
        except ValidationError as exc:
            field, msg = describe_validation(exc)
            raise InvalidPayload(
                f"payload for {kind} is invalid: field {field!r}: {msg}", kind=kind, field=field
            ) from None

    def dump(self, value: Any, *, kind: str, what: str = "payload") -> Any:
        try:
            return self.adapter.dump_python(value, mode="json")
        except Exception as exc:
            raise NotJSON(
                f"{what} for {kind} does not serialise to JSON: {type(exc).__name__}", kind=kind
            ) from None
