"""Small helpers the worker's services share."""

from __future__ import annotations


def why(exc: BaseException) -> str:
    """An exception as one short line for a log."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
