"""What a posting job returns."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["PostingResult"]


@dataclass(frozen=True)
class PostingResult:
    """``written`` is False when the book already held these lines (a retry, a replay or a
    second enqueue of the key): the job completed and posted nothing new."""

    key: str
    tenant: str | None
    lines: int
    written: bool
