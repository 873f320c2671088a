"""The one checker for identifiers: queue names, kinds, tags, schedules, backfills, keys,
tenants and who enqueued a job.

An identifier is something a person reads and types back (``forklift queues pause mail``), so
it must show every character it holds. Refused, with :class:`~forklift.InvalidName` naming the
field and the value with its hidden characters escaped:

- an empty name, or one that does not fit its cap (:data:`CAPS`, in characters; unique and
  batch keys in UTF-8 bytes, since PostgreSQL indexes them);
- a character of Unicode category Cc (control: ESC, NUL, DEL...), Cf (format: zero-width
  space, bidi overrides...), Zl or Zp (line and paragraph separators), or Cs (a lone
  surrogate, which UTF-8 cannot encode);
- whitespace at either end (``"mail "`` would look like ``"mail"``).

Spaces and any other printable character inside a name are fine.
"""

from __future__ import annotations

import unicodedata
from typing import Final

from forklift._base.errors import InvalidName, InvalidOption

__all__ = ["CAPS", "MAX_TAGS", "check_name", "check_tags", "shown"]

#: The longest name of each sort, in characters (``unique_key`` and ``batch_key``: bytes).
CAPS: Final[dict[str, int]] = {
    "queue": 128,
    "kind": 200,
    "tag": 100,
    "schedule": 200,
    "backfill": 200,
    "caller": 500,
    "unique_key": 1000,
    "batch_key": 500,
    "event": 200,
    "topic": 200,
    "step": 200,
    "tenant": 200,
    "enqueued_by": 200,
    "debounce_key": 1000,
}
#: How many tags one job may carry.
MAX_TAGS: Final = 100
_HIDDEN: Final = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})
_LABELS: Final = {"Cc": "a control character", "Cf": "a format character",
                  "Zl": "a line separator", "Zp": "a paragraph separator", "Cs": "a lone surrogate"}
_BYTES: Final = frozenset({"unique_key", "batch_key", "debounce_key"})
# Names seen before and found good: queues and kinds repeat on every enqueue. Bounded, so a
# stream of distinct tags cannot grow it without limit.
_GOOD: set[tuple[str, str]] = set()
_GOOD_MAX: Final = 4096


def shown(value: str, limit: int = 80) -> str:
    """``value`` as Python would write it, every hidden character escaped; long ones cut."""
    text = repr(value) if value.isprintable() else ascii(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _problem(value: str, sort: str) -> str | None:
    if not value:
        return "is empty"
    cap = CAPS[sort]
    size = len(value.encode("utf-8", "surrogatepass")) if sort in _BYTES else len(value)
    if size > cap:
        unit = "bytes" if sort in _BYTES else "characters"
        return f"is {size} {unit} long, over the cap of {cap}"
    if not (value.isascii() and value.isprintable()):
        for ch in value:
            category = unicodedata.category(ch)
            if category in _HIDDEN:
                label = unicodedata.name(ch, "") or _LABELS[category]
                return f"holds U+{ord(ch):04X} ({label}, category {category})"
    if value != value.strip():
        return "has whitespace at its start or end"
    return None


def check_name(value: object, sort: str, *, field: str | None = None) -> str:
    """``value`` if it is a valid identifier of ``sort`` (a key of :data:`CAPS`), else
    :class:`~forklift.InvalidName` naming ``field`` (default: ``sort``)."""
    if type(value) is str and (sort, value) in _GOOD:
        return value
    name = field or sort
    if not isinstance(value, str):
        raise InvalidName(
            f"{name} must be a string, not {type(value).__name__}", field=name, reason="not_a_string"
        )
    problem = _problem(value, sort)
    if problem is not None:
        raise InvalidName(f"{name} {shown(value)} {problem}", field=name, value=shown(value, 200),
                          reason=problem)
    if sort in ("queue", "kind", "schedule", "backfill"):
        if len(_GOOD) >= _GOOD_MAX:
            _GOOD.clear()
        _GOOD.add((sort, value))
    return value


def check_tags(tags: object) -> list[str]:
    """A job's tags as a list, each checked; at most :data:`MAX_TAGS`."""
    if isinstance(tags, (str, bytes)):  # a lone string would otherwise become one tag per letter
        raise InvalidOption("tags must be a list of strings, not one string", field="tags")
    try:
        items = list(tags)  # type: ignore[call-overload]
    except TypeError:
        raise InvalidOption("tags must be a list of strings", field="tags") from None
    if len(items) > MAX_TAGS:
        raise InvalidOption(f"a job carries at most {MAX_TAGS} tags, not {len(items)}",
                            field="tags")
    for i, tag in enumerate(items):
        check_name(tag, "tag", field=f"tags[{i}]")
    return [str(tag) for tag in items]
