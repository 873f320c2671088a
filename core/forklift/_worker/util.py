"""Small helpers the worker's services share."""

from __future__ import annotations

import asyncio


def why(exc: BaseException) -> str:
    """An exception as one short line for a log."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


async def wait_any(*events: asyncio.Event, timeout: float | None) -> None:
    """Until one of ``events`` is set or ``timeout`` seconds pass."""
    waiters = [asyncio.ensure_future(e.wait()) for e in events]
    try:
        await asyncio.wait(waiters, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waiters:
            w.cancel()
