"""The port a reindex writes through: any search index that keeps the newest version of each id.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import psycopg

from forklift.reindex.document import Document
from forklift.reindex.listed import Listed

__all__ = ["SearchIndex"]


class SearchIndex(Protocol):
    """A search index as a reindex sees it.

    Every method gets the page's connection: an index in the same database writes through it,
    so its writes commit with the page's checkpoint; an index elsewhere (a search cluster)
    ignores it and is written at least once, so it must be idempotent, which the version rule
    makes it.

    The rule an index must keep: of two writes of one id, the higher ``version`` wins, and a
    removal at version ``v`` ranks above a document at ``v`` and below one at ``v + 1``. So a
    replayed page or a stale read never overwrites a newer document, and never brings back a
    row that was removed.
    """

    def put(self, conn: psycopg.Connection[Any], documents: Sequence[Document]) -> None:
        """Store each document unless the index holds its id at a version as high or higher."""
        ...

    def remove(self, conn: psycopg.Connection[Any], removals: Sequence[Listed]) -> None:
        """Remove each id unless the index holds it at a higher version; remember the removal
        (a tombstone at that version) so an older document cannot come back."""
        ...

    def listed(self, conn: psycopg.Connection[Any], after: str | None, limit: int,
               tenant: str | None = None) -> list[Listed]:
        """Up to ``limit`` live documents with ids above ``after`` (None: from the first), in
        id order; only ``tenant``'s when given."""
        ...
