"""Database work written once for sync and async callers: a generator yields :class:`Query`
and :class:`Sleep` steps and receives each query's rows; :func:`drive` runs it blocking,
:func:`drive_async` awaited. Only these two small loops know whether I/O is awaited."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeVar

if TYPE_CHECKING:
    import psycopg

T = TypeVar("T")


@dataclass(frozen=True)
class Query:
    sql: str
    params: Any
    fetch: Literal["one", "all"] = "one"


@dataclass(frozen=True)
class Sleep:
    seconds: float


Steps = Generator[Query | Sleep, Any, T]


def drive(run: Callable[[Query], Any], steps: Steps[T]) -> T:
    """Run ``steps`` with ``run`` executing each query (blocking)."""
    reply: Any = None
    while True:
        try:
            step = steps.send(reply)
        except StopIteration as done:
            result: T = done.value
            return result
        if isinstance(step, Sleep):
            time.sleep(step.seconds)
            reply = None
        else:
            reply = run(step)


async def drive_async(run: Callable[[Query], Awaitable[Any]], steps: Steps[T]) -> T:
    """Run ``steps`` with ``run`` executing each query (awaited)."""
    reply: Any = None
    while True:
        try:
            step = steps.send(reply)
        except StopIteration as done:
            result: T = done.value
            return result
        if isinstance(step, Sleep):
            await asyncio.sleep(step.seconds)
            reply = None
        else:
            reply = await run(step)


def fetch(conn: psycopg.Connection[Any], q: Query) -> Any:
    cur = conn.execute(q.sql, q.params)
    return cur.fetchone() if q.fetch == "one" else cur.fetchall()


async def fetch_async(conn: psycopg.AsyncConnection[Any], q: Query) -> Any:
    cur = await conn.execute(q.sql, q.params)
    return await cur.fetchone() if q.fetch == "one" else await cur.fetchall()
