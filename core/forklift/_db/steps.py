"""Database work written once for sync and async callers.

A unit of work (an enqueue, a bulk insert, a batch submit, a definition sync) is a generator
that yields :class:`Query` and :class:`Copy` steps and receives each query's rows back; it
returns the work's result. :func:`drive` runs it on a ``psycopg.Connection``,
:func:`drive_async` on a ``psycopg.AsyncConnection``. The logic, its retries and its refusals
exist once; only these two small loops know whether I/O is awaited.

``tx`` says how the work is made atomic:

- ``"none"``: run as is (one statement, or steps that are each atomic);
- ``"atomic"``: a transaction of its own on an autocommit connection; on a connection inside
  the caller's transaction, that transaction (no savepoint: one round trip less, and a failed
  statement aborts the caller's transaction anyway);
- ``"savepoint"``: as ``atomic``, but a savepoint inside the caller's transaction, so a refusal
  raised between steps leaves the caller's earlier work intact.
"""

from __future__ import annotations

from collections.abc import Generator, Iterable
from contextlib import AbstractAsyncContextManager, AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

import psycopg

__all__ = ["Copy", "Query", "Step", "Steps", "Tx", "drive", "drive_async"]

T = TypeVar("T")
Fetch = Literal["none", "one", "all"]
Tx = Literal["none", "atomic", "savepoint"]


@dataclass(frozen=True, slots=True)
class Query:
    """One statement; the generator receives ``fetchone()``, ``fetchall()`` or the rowcount."""

    sql: str
    params: Any = None
    fetch: Fetch = "none"


@dataclass(frozen=True, slots=True)
class Copy:
    """``COPY ... FROM STDIN`` of ``records``; the generator receives None."""

    sql: str
    records: Iterable[tuple[Any, ...]]


Step = Query | Copy
Steps = Generator[Step, Any, T]


def _idle_in_callers_hands(conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]) -> bool:
    # psycopg's transaction() on an idle non-autocommit connection would begin AND commit a
    # transaction of its own: the work would commit before the caller does.
    idle = conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    return not conn.autocommit and idle


def _scope(conn: psycopg.Connection[Any], tx: Tx) -> AbstractContextManager[Any]:
    if tx == "none" or (tx == "atomic" and not conn.autocommit):
        return nullcontext()
    if _idle_in_callers_hands(conn):
        conn.execute("SELECT 1")  # begins the caller's transaction, as any statement would
    return conn.transaction()


async def _scope_async(
    conn: psycopg.AsyncConnection[Any], tx: Tx
) -> AbstractAsyncContextManager[Any]:
    if tx == "none" or (tx == "atomic" and not conn.autocommit):
        return nullcontext()
    if _idle_in_callers_hands(conn):
        await conn.execute("SELECT 1")
    return conn.transaction()


def drive(conn: psycopg.Connection[Any], steps: Steps[T], tx: Tx = "none") -> T:
    """Run ``steps`` on a sync connection and return their result."""
    with _scope(conn, tx):
        reply: Any = None
        while True:
            try:
                step = steps.send(reply)
            except StopIteration as stop:
                result: T = stop.value
                return result
            if isinstance(step, Copy):
                with conn.cursor().copy(step.sql) as copy:
                    for record in step.records:
                        copy.write_row(record)
                reply = None
                continue
            cur = conn.execute(step.sql, step.params)
            reply = (cur.fetchone() if step.fetch == "one" else cur.fetchall()
                     if step.fetch == "all" else cur.rowcount)


async def drive_async(conn: psycopg.AsyncConnection[Any], steps: Steps[T], tx: Tx = "none") -> T:
    """Run ``steps`` on an async connection and return their result."""
    async with await _scope_async(conn, tx):
        reply: Any = None
        while True:
            try:
                step = steps.send(reply)
            except StopIteration as stop:
                result: T = stop.value
                return result
            if isinstance(step, Copy):
                async with conn.cursor().copy(step.sql) as copy:
                    for record in step.records:
                        await copy.write_row(record)
                reply = None
                continue
            cur = await conn.execute(step.sql, step.params)
            reply = (await cur.fetchone() if step.fetch == "one" else await cur.fetchall()
                     if step.fetch == "all" else cur.rowcount)
