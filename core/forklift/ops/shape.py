"""The JSON shape of operator results: plain dicts, lists, numbers, strings and nulls.

Times are ISO 8601 strings with their UTC offset, durations are seconds (float). The shapes are
documented in docs/operating.md; fields are only ever added, never renamed or removed.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta
from typing import Any

__all__ = ["Shape", "jsonable"]


def jsonable(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        to_json = getattr(value, "to_json", None)
        if to_json is not None and not isinstance(value, Shape):
            return to_json()
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    return value


class Shape:
    """Mixin for result dataclasses: ``to_json()`` gives the documented shape."""

    def to_json(self) -> dict[str, Any]:
        out = jsonable(self)
        assert isinstance(out, dict)
        return out
