"""Small helpers the worker's services share."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from forklift._db.session import DB_ERRORS, Session

log = logging.getLogger("forklift.worker")


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


async def bounded(what: str, session: Session, op: Callable[[Any], Awaitable[Any]],
                  timeout: float) -> bool:
    """Run a final write with a deadline; a failure is logged and the shutdown moves on.
    Whether the write landed (the drain reports the exit code from it)."""
    try:
        await session.run(op, timeout=max(0.1, timeout))
    except DB_ERRORS as exc:
        log.warning("%s did not finish (%s); moving on", what, why(exc))
        return False
    return True
