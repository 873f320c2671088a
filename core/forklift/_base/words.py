"""Counted nouns for what forklift prints and logs: ``1 job``, ``3 jobs``, never ``job(s)``."""

from __future__ import annotations

__all__ = ["plural"]


def plural(n: int, one: str, many: str | None = None) -> str:
    """``1 job``, ``3 jobs``, ``1,200 jobs``; ``many`` for an irregular plural."""
    return f"{n:,} {one if n == 1 else (many or one + 's')}"
