"""Balanced, idempotent double-entry postings written by jobs.

A posting is ``{key, entries: [{account, amount: {minor, currency}}], tenant?}``. The kind
that :func:`ledger` declares refuses, before anything is written and terminally, a posting that
is not balanced money (each currency summing to zero on its own, integer minor units, ISO 4217
currencies, non-blank accounts, two entries at least), and writes the lines in one transaction,
once per (tenant, key): a retry, a replay or a second enqueue posts nothing new, and a key
already stored with other lines is a terminal conflict that writes nothing.

The default book is :class:`TableBook`, a table of the app's (``TableBook().create(conn)``
makes one); any object with the :class:`LedgerBook` method can stand in for it.
:func:`assert_balanced` is the same check, for an endpoint that refuses at the request.
"""

from forklift.ledger.balance import assert_balanced
from forklift.ledger.balance_row import CurrencyTotal
from forklift.ledger.book import LedgerBook
from forklift.ledger.book_check import BookCheck
from forklift.ledger.currencies import ISO_4217
from forklift.ledger.entry import Entry
from forklift.ledger.errors import (
    InvalidPosting,
    PostingConflict,
    PostingRefused,
    UnbalancedPosting,
)
from forklift.ledger.kind import FAILURES, LedgerKind, ledger
from forklift.ledger.money import Money
from forklift.ledger.posting import Posting
from forklift.ledger.result import PostingResult
from forklift.ledger.table_book import DEFAULT_TABLE, TableBook

__all__ = [
    "DEFAULT_TABLE",
    "FAILURES",
    "ISO_4217",
    "BookCheck",
    "CurrencyTotal",
    "Entry",
    "InvalidPosting",
    "LedgerBook",
    "LedgerKind",
    "Money",
    "Posting",
    "PostingConflict",
    "PostingRefused",
    "PostingResult",
    "TableBook",
    "UnbalancedPosting",
    "assert_balanced",
    "ledger",
]
