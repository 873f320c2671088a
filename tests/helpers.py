"""Helpers for tests: wait on conditions with deadlines, never sleep as synchronisation.

Import as ``from helpers import wait_until`` (pytest puts ``tests/`` on ``sys.path``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")

Message = str | Callable[[], str]


def _text(message: Message) -> str:
    if not callable(message):
        return message
    try:
        return message()
    except Exception as exc:  # describing the state must not hide that the wait failed
        return f"(describing what was seen failed: {exc!r})"


def wait_until(
    predicate: Callable[[], T],
    timeout: float = 10.0,
    interval: float = 0.01,
    message: Message = "condition was not met",
) -> T:
    """Poll ``predicate`` until it returns something truthy, and return that.

    Raises ``AssertionError(message)`` when ``timeout`` seconds pass first; the predicate is
    always tried once more at the deadline. ``message`` may be a callable, evaluated then, to
    describe the state that was seen.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"{_text(message)} (waited {timeout:g}s)")
        time.sleep(min(interval, max(0.0, deadline - time.monotonic())))


async def wait_until_async(
    predicate: Callable[[], T | Awaitable[T]],
    timeout: float = 10.0,
    interval: float = 0.01,
    message: Message = "condition was not met",
) -> T:
    """``wait_until`` for async tests: the predicate may be sync or async; the loop keeps running."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if asyncio.iscoroutine(value) or isinstance(value, asyncio.Future):
            value = await value
        if value:
            return value  # type: ignore[return-value]
        if time.monotonic() >= deadline:
            raise AssertionError(f"{_text(message)} (waited {timeout:g}s)")
        await asyncio.sleep(min(interval, max(0.0, deadline - time.monotonic())))
