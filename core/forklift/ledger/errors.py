"""What a posting can be refused for, each with a stable ``code``.

The two shape refusals are :class:`~forklift.EnqueueRefused` subclasses: raised by
:func:`~forklift.ledger.assert_balanced`, at the kind's enqueue or at the request, nothing is
stored. In a job they are terminal (the posting is the input: a later attempt sees the same
lines), and so is a conflict.
"""

from __future__ import annotations

from forklift._base.errors import EnqueueRefused, ForkliftError

__all__ = ["InvalidPosting", "PostingConflict", "PostingRefused", "UnbalancedPosting"]


class PostingRefused(EnqueueRefused):
    """Base of the refusals of a posting's lines; nothing was written."""

    code = "ledger_refused"


class InvalidPosting(PostingRefused):
    """A posting that is not money: a blank key or account, fewer than two entries, an amount
    that is not a whole number of minor units within a bigint, a currency that is not ISO 4217,
    a tenant that is blank or differs from the kind's; ``detail``: ``field`` (e.g.
    ``entries[1].amount.currency``) and ``reason``."""

    code = "ledger_entry_invalid"


class UnbalancedPosting(PostingRefused):
    """A currency whose entries do not sum to zero on their own; ``detail``: ``sums``, the
    non-zero total per currency in minor units."""

    code = "ledger_unbalanced"


class PostingConflict(ForkliftError):
    """The book already holds the key (for that tenant) with other lines; nothing was written.
    A correction is a new posting under a new key; ``detail``: ``key``, ``tenant``."""

    code = "ledger_posting_conflict"
