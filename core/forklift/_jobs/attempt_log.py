"""An attempt's own log: the lines a handler writes (``ctx.log``) and, for a kind that opts in,
the ``logging`` records emitted while it runs (forklift._jobs.log_capture).

Lines are kept in memory while the handler runs and written with the attempt's outcome, in the
same transaction (forklift._worker.settle). Each line is scrubbed as an error message is
(forklift._base.scrub), so a secret logged by mistake is never stored. An attempt keeps at most
``max_lines`` lines and ``max_bytes`` bytes of them; past either cap later lines are counted,
not kept, and a last line says which cap was hit and how many lines were dropped.
"""

from __future__ import annotations

import json
import math
import re
import threading
from datetime import UTC, datetime
from typing import Any, Final

from forklift._base.errors import ConfigError
from forklift._base.scrub import REDACTED, scrub

__all__ = ["DEFAULT_BYTES", "DEFAULT_CAPS", "DEFAULT_LINES", "LEVELS", "AttemptLog", "check_caps"]

#: Lines an attempt keeps by default (a kind's ``log_lines=`` overrides it).
DEFAULT_LINES: Final = 1000
#: Bytes of lines (as stored JSON) an attempt keeps by default (``log_bytes=``).
DEFAULT_BYTES: Final = 64 * 1024
#: Both, as a kind's ``log_caps`` holds them.
DEFAULT_CAPS: Final = (DEFAULT_LINES, DEFAULT_BYTES)
#: The levels a line may carry, lowest first.
LEVELS: Final = ("debug", "info", "warning", "error", "critical")
#: Longest message kept of one line; a longer one ends with a marker naming its length.
MESSAGE_LIMIT: Final = 2000
#: Longest text kept of one field's value.
FIELD_LIMIT: Final = 500
_FIELDS_MAX: Final = 50
# A field named like a secret keeps its name and loses its value, whatever the value looks like
# (the scrubber finds ``password=x`` in a message; a field's name and value come apart).
_SECRET_NAME: Final = re.compile(
    r"password|passwd|pwd|secret|token|api[_-]?key|apikey|access[_-]?key|private[_-]?key"
    r"|signature|authorization|cookie|credential", re.IGNORECASE)


def check_caps(kind: str, lines: int, size: int) -> None:
    """Refuse caps that are not positive whole numbers, naming the option."""
    for name, value in (("log_lines", lines), ("log_bytes", size)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"{name}= of {kind} must be a whole number of at least 1, not"
                              f" {value!r}", field=name)


def _value(value: Any, depth: int = 0) -> Any:
    """A field's value as JSON can hold it: numbers, booleans and null as they are, lists and
    dicts (three levels, 50 items each) item by item, anything else as its text; every text
    scrubbed."""
    if value is None or isinstance(value, (bool, int)):
        return value
    if isinstance(value, float) and math.isfinite(value):
        return value
    if depth < 3 and isinstance(value, (list, tuple)):
        return [_value(v, depth + 1) for v in value[:_FIELDS_MAX]]
    if depth < 3 and isinstance(value, dict):
        items = list(value.items())[:_FIELDS_MAX]
        return {scrub(str(k), limit=100): REDACTED if _SECRET_NAME.search(str(k))
                else _value(v, depth + 1) for k, v in items}
    return scrub(value if isinstance(value, str) else str(value), limit=FIELD_LIMIT)


class AttemptLog:
    """The lines of one attempt, appended from the handler's thread or the event loop."""

    __slots__ = ("_lock", "dropped", "lines", "max_bytes", "max_lines", "size")

    def __init__(self, max_lines: int = DEFAULT_LINES, max_bytes: int = DEFAULT_BYTES) -> None:
        self.max_lines = max_lines
        self.max_bytes = max_bytes
        self.lines: list[dict[str, Any]] = []
        self.size = 0
        self.dropped = 0
        self._lock = threading.Lock()

    def add(self, level: str, message: object, fields: dict[str, Any] | None = None, *,
            logger: str | None = None, at: float | None = None) -> None:
        """Append one line (scrubbed), or count it as dropped once a cap is reached."""
        if self.dropped or len(self.lines) >= self.max_lines:
            with self._lock:  # past a cap: counted, never scrubbed
                self.dropped += 1
            return
        when = datetime.now(UTC) if at is None else datetime.fromtimestamp(at, UTC)
        line: dict[str, Any] = {
            "at": when.isoformat(timespec="milliseconds"),
            "level": level,
            "message": scrub(message if isinstance(message, str) else str(message),
                             limit=MESSAGE_LIMIT),
        }
        if logger is not None:
            line["logger"] = scrub(logger, limit=200)
        if fields:
            line["fields"] = _value(fields)
        size = len(json.dumps(line, ensure_ascii=False).encode("utf-8"))
        with self._lock:
            if self.dropped or len(self.lines) >= self.max_lines \
                    or self.size + size > self.max_bytes:
                self.dropped += 1
                return
            self.lines.append(line)
            self.size += size

    def stored(self) -> str | None:
        """What is written with the attempt (:meth:`to_json`), or None when it logged nothing."""
        return self.to_json() if self.lines or self.dropped else None

    def to_json(self) -> str:
        """The lines as a JSON array, with the line stating the cap when one was hit."""
        with self._lock:
            lines = list(self.lines)
            dropped = self.dropped
        if dropped:
            cap = (f"{self.max_lines} lines" if len(lines) >= self.max_lines
                   else f"{self.max_bytes} bytes")
            lines.append({
                "at": datetime.now(UTC).isoformat(timespec="milliseconds"),
                "level": "warning",
                "message": f"log capped at {cap} for this attempt: {dropped} later"
                           f" line{'s' if dropped != 1 else ''} dropped",
                "capped": {"lines": self.max_lines, "bytes": self.max_bytes,
                           "dropped": dropped},
            })
        return json.dumps(lines, ensure_ascii=False)
