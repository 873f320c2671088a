"""What a consumer reads from: a ``Source`` returns a ``Page`` of items and the cursor after them.

A source is anything with ``read(cursor, limit, conn)``. ``cursor`` is the JSON value the last
batch stored (None on the first read, or after an operator reset it); ``conn`` is the batch's
own transaction, so a source in the same database reads under the same snapshot and lock as
the work and the cursor it writes. A source that calls a vendor's API ignores ``conn``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import psycopg

from forklift._base.errors import ConfigError

__all__ = ["Page", "Source", "page_of"]


@dataclass(frozen=True)
class Page:
    """What one read returned: the items to process, in order, and the cursor that follows
    them (a JSON value: what the next read starts from). An empty page means caught up; its
    cursor is stored all the same, so a vendor's cursor may move past nothing."""

    items: Sequence[Any] = field(default_factory=tuple)
    cursor: Any = None


@runtime_checkable
class Source(Protocol):
    """Where a consumer's items come from."""

    def read(self, cursor: Any, limit: int, conn: psycopg.Connection[Any]) -> Page:
        """At most ``limit`` items after ``cursor``, and the cursor after them."""
        ...


def page_of(value: object, source: object) -> Page:
    """A read's answer as a Page (a Page, or an ``(items, cursor)`` pair); ConfigError naming
    the source otherwise."""
    if isinstance(value, Page):
        return value
    if isinstance(value, tuple) and len(value) == 2:
        return Page(items=list(value[0]), cursor=value[1])
    raise ConfigError(
        f"{type(source).__name__}.read must return a Page(items, cursor), not"
        f" {type(value).__name__}", field="source")
