"""What the ledger kind needs of the table its lines go to."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    import psycopg

    from forklift.ledger.posting import Posting

__all__ = ["LedgerBook"]


@runtime_checkable
class LedgerBook(Protocol):
    """An app's own table of posting lines; :class:`~forklift.ledger.TableBook` is one.

    ``write`` runs inside a transaction the caller opened on ``conn`` and stores every line of
    a checked posting under ``(tenant, posting.key)``, once: it returns True when it wrote
    them, False when the book already held exactly these lines, and raises
    :class:`~forklift.ledger.PostingConflict` when it held other lines under that key (the
    caller's transaction is then rolled back, so nothing is written).
    """

    def write(self, conn: psycopg.Connection[Any], posting: Posting, *, tenant: str | None,
              job_id: int | None) -> bool: ...
