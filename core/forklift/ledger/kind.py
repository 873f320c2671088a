"""The posting kind: a factory over ``app.job`` whose handler writes one posting to a book.

Its run refuses, before a line is written and terminally (``Fail``: the posting is the input,
a later attempt would see the same lines), anything that is not balanced money, then writes
every line in one transaction through the book. A book that already holds the key with the same
lines completes the job and writes nothing; with other lines it fails the job with
``ledger_posting_conflict`` and writes nothing. A failure of the database is retried by the
kind's backoff, and retrying is safe: the write is once per (tenant, key).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any, Final

import psycopg

from forklift._app.context import JobContext
from forklift._base.errors import ConfigError
from forklift._base.retry import Fail
from forklift.ledger.balance import assert_balanced
from forklift.ledger.book import LedgerBook
from forklift.ledger.currencies import ISO_4217
from forklift.ledger.errors import PostingConflict, PostingRefused
from forklift.ledger.posting import Posting
from forklift.ledger.result import PostingResult
from forklift.ledger.table_book import TableBook

if TYPE_CHECKING:
    from forklift._app.app import Forklift
    from forklift._app.kind import JobKind
    from forklift._jobs.job import Job

__all__ = ["FAILURES", "LedgerKind", "ledger"]

#: The failure codes a posting job may end with, each terminal.
FAILURES: Final = ("ledger_entry_invalid", "ledger_unbalanced", "ledger_posting_conflict")


class LedgerKind:
    """A declared posting kind: ``enqueue`` a posting, or ``post`` it in the caller's
    transaction without a job. ``kind`` is the :class:`~forklift.JobKind` a worker runs."""

    def __init__(self, app: Forklift, *, name: str, book: LedgerBook, tenant: str | None,
                 queue: str, currencies: Collection[str], max_attempts: int) -> None:
        if not isinstance(book, LedgerBook):
            raise ConfigError(f"book of ledger {name!r} must have a write(conn, posting, *,"
                              f" tenant, job_id) method, not {book!r}")
        self.app = app
        self.book = book
        self.tenant = tenant
        self.currencies = frozenset(currencies)
        self.kind: JobKind[Posting, PostingResult] = app.job(
            name=name, queue=queue, max_attempts=max_attempts, failure_codes=FAILURES,
        )(self._run)

    def __repr__(self) -> str:
        return f"<LedgerKind {self.kind.name} book={self.book!r}>"

    # -- checking -----------------------------------------------------------------------------
    def check(self, posting: Posting | Mapping[str, Any]) -> Posting:
        """The posting checked against this kind (its currencies and tenant), with the
        tenant it is written under filled in; raises a PostingRefused."""
        checked = assert_balanced(posting, currencies=self.currencies, tenant=self.tenant)
        if checked.tenant is None and self.tenant is not None:
            checked = checked.model_copy(update={"tenant": self.tenant})
        return checked

    def unique_key(self, posting: Posting) -> str:
        """The live job's key: a second enqueue of a queued posting returns that job."""
        return f"{self.kind.name}:{posting.tenant or ''}:{posting.key}"

    # -- enqueueing ---------------------------------------------------------------------------
    def enqueue(self, posting: Posting | Mapping[str, Any], *,
                conn: psycopg.Connection[Any] | None = None, **options: Any) -> Job:
        """Check the posting (refused at once, nothing stored) and enqueue its job; with
        ``conn=`` inside the caller's transaction. A live job of the same (tenant, key) is
        returned rather than a second one stored."""
        checked = self.check(posting)
        options.setdefault("unique_key", self.unique_key(checked))
        return self.kind.enqueue(checked, conn=conn, **options)

    async def enqueue_async(self, posting: Posting | Mapping[str, Any], *,
                            conn: psycopg.AsyncConnection[Any] | None = None,
                            **options: Any) -> Job:
        """:meth:`enqueue` for asyncio."""
        checked = self.check(posting)
        options.setdefault("unique_key", self.unique_key(checked))
        return await self.kind.enqueue_async(checked, conn=conn, **options)

    # -- writing ------------------------------------------------------------------------------
    def post(self, posting: Posting | Mapping[str, Any], *,
             conn: psycopg.Connection[Any] | None = None,
             job_id: int | None = None) -> PostingResult:
        """Check and write the posting now, in one transaction (a savepoint inside the
        caller's when ``conn`` has one open); raises a PostingRefused or PostingConflict."""
        checked = self.check(posting)
        if conn is not None:
            return self._write(conn, checked, job_id)
        with self.app.pool().connection() as own:
            return self._write(own, checked, job_id)

    def _write(self, conn: psycopg.Connection[Any], posting: Posting,
               job_id: int | None) -> PostingResult:
        idle = conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        if not conn.autocommit and idle:
            # transaction() here would begin and commit a transaction of its own, so the lines
            # would be stored even if the caller then rolled back: begin the caller's first.
            conn.execute("SELECT 1")
        with conn.transaction():
            written = self.book.write(conn, posting, tenant=posting.tenant, job_id=job_id)
        return PostingResult(posting.key, posting.tenant, len(posting.entries), written)

    def _run(self, ctx: JobContext, posting: Posting) -> PostingResult:
        try:
            return self.post(posting, job_id=ctx.job_id)
        except (PostingRefused, PostingConflict) as exc:
            raise Fail(exc.code, exc.message) from None


def ledger(
    app: Forklift,
    *,
    name: str = "ledger.post",
    book: LedgerBook | None = None,
    tenant: str | None = None,
    queue: str = "default",
    currencies: Collection[str] = ISO_4217,
    max_attempts: int = 20,
) -> LedgerKind:
    """Declare on ``app`` a kind that writes postings to ``book`` (default: a
    :class:`TableBook` over ``ledger_lines``, which :meth:`TableBook.create` makes).

    ``tenant``: the tenant every posting of this kind is written under (a posting naming
    another is refused); without it a posting's own ``tenant`` is used, or none.
    """
    return LedgerKind(app, name=name, book=book or TableBook(), tenant=tenant, queue=queue,
                      currencies=currencies, max_attempts=max_attempts)
