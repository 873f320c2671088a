"""Names a person reads back (event names, outbox topics, step names): checked, never stored
with characters that would hide from the reader."""

from __future__ import annotations

import unicodedata

from forklift._errors import ForkliftError, InvalidOption

MAX_NAME = 200
_HIDDEN = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})


def check_name(value: object, what: str, *, cap: int = MAX_NAME,
               error: type[ForkliftError] = InvalidOption) -> str:
    """``value`` if it is a usable name, else ``error`` (:class:`InvalidOption`) naming ``what``."""
    if not isinstance(value, str):
        raise error(f"{what} must be a string, not {type(value).__name__}", field=what)
    problem = None
    if not value:
        problem = "is empty"
    elif len(value) > cap:
        problem = f"is {len(value)} characters long, over the cap of {cap}"
    elif not (value.isascii() and value.isprintable()) and any(
        unicodedata.category(ch) in _HIDDEN for ch in value
    ):
        problem = "holds a control, format or separator character"
    elif value != value.strip():
        problem = "has whitespace at its start or end"
    if problem is not None:
        raise error(f"{what} {value[:80]!a} {problem}", field=what)
    return value
