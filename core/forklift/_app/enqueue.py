"""Storing new jobs on the app's pools, and telling a lost commit from a failed insert.

An enqueue on the app's own connection commits by itself: its single statement (autocommit)
or the COMMIT of its transaction. When the connection fails at that moment the server may
have stored the jobs and the reply saying so is lost; the caller cannot tell from a raw
``psycopg.OperationalError`` whether anything was stored, so :class:`Enqueuer` raises
:class:`~forklift.EnqueueOutcomeUnknown` instead, naming the unique keys that make a retry
safe. A failure before the commit (nothing stored) propagates as it is, and so does every
failure on the caller's connection (``conn=``): the caller owns that commit.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import psycopg

from forklift._base.errors import EnqueueOutcomeUnknown
from forklift._db.steps import Steps, Tx, drive, drive_async

if TYPE_CHECKING:
    from psycopg_pool import AsyncConnectionPool, ConnectionPool

    from forklift._app.backpressure import Gate
    from forklift._jobs.row import Row

__all__ = ["Enqueuer", "outcome_unknown"]

T = TypeVar("T")


def _at_commit(steps: Steps[Any], tx: Tx) -> bool:
    """Whether a unit of work that failed had reached its commit: in a transaction of its
    own, all its statements ran (the generator returned) and the COMMIT failed; without one
    (autocommit), a statement was in flight, and each commits by itself."""
    state = inspect.getgeneratorstate(steps)
    if tx == "none":
        return state != inspect.GEN_CREATED
    return state == inspect.GEN_CLOSED


def outcome_unknown(rows: Sequence[Row], *, bulk: bool) -> EnqueueOutcomeUnknown:
    """The error for a lost commit of ``rows``: what may exist, and how to retry safely."""
    if not bulk:
        row = rows[0]
        if row.unique_key is not None:
            how = (f"retry with the same unique key {row.unique_key!r}: if the job was stored,"
                   " the retry finds it (the default on_conflict returns it) and stores no"
                   " second one")
        else:
            how = ("a retry may store it twice: give the job a unique_key to make the retry"
                   " safe (the retry then returns the stored job)")
        return EnqueueOutcomeUnknown(
            f"the connection failed as the enqueue of a {row.kind} job committed: the job may"
            f" exist; {how}", kind=row.kind, unique_key=row.unique_key, jobs=1)
    keys = [r.unique_key for r in rows]
    keyed = sum(k is not None for k in keys)
    if keyed == len(keys):
        how = ("retry with the same unique keys: the jobs stored return their ids and none"
               " is stored twice")
    elif keyed:
        how = (f"{keyed} of them carry unique keys and may be retried safely; the"
               f" {len(keys) - keyed} without one may be stored twice by a retry")
    else:
        how = ("none carries a unique key, so a retry may store them twice: give each a"
               " unique_key to make the retry safe")
    return EnqueueOutcomeUnknown(
        f"the connection failed as a bulk enqueue of {len(rows)} jobs committed: all of them"
        f" may exist, or none (one transaction); {how}", unique_keys=keys, jobs=len(rows))


def batch_outcome_unknown(caller: str, key: str, targets: int) -> EnqueueOutcomeUnknown:
    """The error for a lost commit of a batch submit: it may exist, and how to retry safely.
    A submit is idempotent per (caller, key) within the batch TTL (the key is derived from the
    targets when none is given), so the same submit again returns the stored batch."""
    return EnqueueOutcomeUnknown(
        f"the connection failed as a batch of {targets} targets for {caller!r} committed: it"
        " may exist, with all its jobs, or not at all (one transaction); submit it again as it"
        " was (same caller, kind and targets, or the same key): a stored batch is returned"
        " (reused) and nothing is stored twice", caller=caller, key=key, jobs=targets)


class Enqueuer:
    """The app's path for storing new jobs: its own pooled connection, or the caller's.

    The app owns one and hands it its pools (as callables: the app may be pointed at another
    database before first use).
    """

    def __init__(self, pool: Callable[[], ConnectionPool[Any]],
                 async_pool: Callable[[], Awaitable[AsyncConnectionPool[Any]]],
                 gate: Gate | None = None) -> None:
        self._pool = pool
        self._async_pool = async_pool
        #: told when a pooled statement ran (its reply delivered any news of full queues)
        self._gate = gate

    def store(self, steps: Steps[T], rows: Sequence[Row], *, bulk: bool,
              conn: psycopg.Connection[Any] | None = None, tx: Tx = "none") -> T:
        """Run ``steps``, which store ``rows``; a commit whose reply was lost raises
        EnqueueOutcomeUnknown (on the app's connection only)."""
        return self.run(steps, conn, tx, lambda: outcome_unknown(rows, bulk=bulk))

    async def store_async(self, steps: Steps[T], rows: Sequence[Row], *, bulk: bool,
                          conn: psycopg.AsyncConnection[Any] | None = None,
                          tx: Tx = "none") -> T:
        """:meth:`store` for asyncio."""
        return await self.run_async(steps, conn, tx, lambda: outcome_unknown(rows, bulk=bulk))

    def run(self, steps: Steps[T], conn: psycopg.Connection[Any] | None, tx: Tx,
            unknown: Callable[[], EnqueueOutcomeUnknown]) -> T:
        """Run a unit of work that stores new jobs (one, many, a batch); when the app's own
        connection is lost at its commit, raise ``unknown()`` (the caller's connection is the
        caller's to judge)."""
        if conn is not None:
            return drive(conn, steps, tx)
        with self._pool().connection() as own:
            try:
                got = drive(own, steps, tx)
                if self._gate is not None:
                    self._gate.pool_used = time.monotonic()
                return got
            except psycopg.Error as exc:
                if own.broken and _at_commit(steps, tx):
                    raise unknown() from exc
                raise

    async def run_async(self, steps: Steps[T], conn: psycopg.AsyncConnection[Any] | None,
                        tx: Tx, unknown: Callable[[], EnqueueOutcomeUnknown]) -> T:
        """:meth:`run` for asyncio."""
        if conn is not None:
            return await drive_async(conn, steps, tx)
        pool = await self._async_pool()
        async with pool.connection() as own:
            try:
                got = await drive_async(own, steps, tx)
                if self._gate is not None:
                    self._gate.pool_used = time.monotonic()
                return got
            except psycopg.Error as exc:
                if own.broken and _at_commit(steps, tx):
                    raise unknown() from exc
                raise
