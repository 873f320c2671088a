"""Locks with fencing tokens: one holder of a key across the fleet, and a number that proves it.

    async with ctx.lock("account:42", ttl=30) as token:     # in an async handler
        total = await recompute(42)
        await store.save(42, total, token)                   # the store refuses older tokens

    with ctx.lock("account:42", ttl=30, wait=5) as token:    # in a sync handler
        ...

    with app.lock("nightly-report", ttl=60) as token:        # anywhere else (async with, too)
        ...

A grant takes the next number of one sequence (``lock_token_seq``), so a holder's token is
strictly greater than every earlier holder's. The lease is renewed every ``ttl / 3`` -- all the
leases a process holds in one statement -- and is lost when a renewal is refused (the row is
gone or holds another token) or when none has landed within ``ttl`` by the local clock. A lost
lock cancels the handler's context (``ctx.cancel_reason == "lock_lost"``; an async handler is
cancelled outright), and leaving the block raises :class:`~forklift.LockLost` even if the body
returned: its work was not exclusive. Leaving the block releases the lock, and the release is
the final check: it deletes the row only under the same token and before its expiry.

A lock cannot stop a paused process (a long GC pause, SIGSTOP, a frozen VM) from writing
after its lease ran out. The token can: pass it to whatever the block writes and have that
store refuse a write whose token is older than the newest it has seen, e.g. in PostgreSQL::

    INSERT INTO balances AS b (account, total, token) VALUES (%s, %s, %s)
    ON CONFLICT (account) DO UPDATE SET total = excluded.total, token = excluded.token
    WHERE b.token <= excluded.token         -- no row back: a newer holder wrote first

``wait`` (seconds, default 0: one try) is how long to keep trying while someone else holds the
key; then :class:`~forklift.LockNotAcquired`, naming the holder (job, worker, token).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import unicodedata
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Protocol

from forklift._base.errors import ConfigError, InvalidName, InvalidOption, LockLost, LockNotAcquired
from forklift._base.names import shown
from forklift._db.sqltext import render
from forklift._features.flow.book import Book, Held
from forklift._features.flow.steps import Query, Sleep, Steps

log = logging.getLogger("forklift.locks")

MIN_TTL = 1.0
MAX_TTL = 86_400.0
MAX_WAIT = 86_400.0
KEY_CAP = 500  # characters
FIRST_RETRY = 0.05  # seconds between tries while waiting, doubling...
MAX_RETRY = 0.5  # ...up to this

# The grant: a new row, or the row of an expired holder replaced under a fresh token; nothing
# back while a live holder has it. The holder is read in the next step (a fresh snapshot: this
# statement's may predate a holder that committed while it waited on the row).
ACQUIRE_SQL = """
INSERT INTO {s}.locks AS l (key, token, owner, job_id, worker_id, ttl, expires_at)
VALUES (%(key)s, nextval('{s}.lock_token_seq'), %(owner)s, %(job)s, %(worker)s, %(ttl)s,
        now() + make_interval(secs => %(ttl)s))
ON CONFLICT (key) DO UPDATE SET
    token = excluded.token, owner = excluded.owner, job_id = excluded.job_id,
    worker_id = excluded.worker_id, ttl = excluded.ttl, acquired_at = now(),
    expires_at = excluded.expires_at
WHERE l.expires_at <= now()
RETURNING l.token
"""
HOLDER_SQL = """
SELECT job_id, worker_id, owner, token, expires_at,
       greatest(0, extract(epoch FROM expires_at - now()))::float8
FROM {s}.locks WHERE key = %s AND expires_at > now()
"""
# Every lease of one process, in key order (two renewers never wait on each other in a cycle).
RENEW_SQL = """
UPDATE {s}.locks AS l SET expires_at = now() + make_interval(secs => l.ttl)
FROM unnest(%s::text[], %s::bigint[]) AS h(key, token)
WHERE l.key = h.key AND l.token = h.token AND l.expires_at > now()
RETURNING l.key, l.token
"""
# Release is the final check: true only if the lease was still ours and unexpired.
RELEASE_SQL = """
DELETE FROM {s}.locks WHERE key = %s AND token = %s RETURNING expires_at > now()
"""


def check_request(key: object, ttl: object, wait: object) -> tuple[str, float, float]:
    """The key, ttl and wait of a lock request; a bad key is refused with InvalidName, a bad
    ttl or wait with InvalidOption, as any other identifier or option is."""
    if not isinstance(key, str):
        raise InvalidName(f"a lock key must be a string, not {type(key).__name__}", field="key",
                          reason="not_a_string")
    if not key or len(key) > KEY_CAP:
        raise InvalidName(f"a lock key is 1 to {KEY_CAP} characters, not {len(key)}",
                          field="key", value=shown(key, 200),
                          reason=f"is {len(key)} characters long, outside 1 to {KEY_CAP}")
    if key != key.strip():
        raise InvalidName(f"lock key {key!r} has whitespace at its start or end", field="key",
                          value=shown(key, 200), reason="has whitespace at its start or end")
    for ch in key:
        category = unicodedata.category(ch)
        if category in ("Cc", "Cf", "Zl", "Zp", "Cs"):
            raise InvalidName(f"lock key {key!a} holds the hidden character U+{ord(ch):04X}",
                              field="key", value=shown(key, 200),
                              reason=f"holds U+{ord(ch):04X} (category {category})")
    seconds = _seconds(ttl, "ttl")
    if not MIN_TTL <= seconds <= MAX_TTL:
        raise InvalidOption(
            f"a lock's ttl is {MIN_TTL:g} to {MAX_TTL:g} seconds, not {seconds:g}", field="ttl")
    patience = _seconds(wait, "wait")
    if not 0 <= patience <= MAX_WAIT:
        raise InvalidOption(f"a lock's wait is 0 to {MAX_WAIT:g} seconds, not {patience:g}",
                            field="wait")
    return key, seconds, patience


def _seconds(value: object, name: str) -> float:
    from datetime import timedelta

    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidOption(f"a lock's {name} is a number of seconds, not {value!r}", field=name)
    if value != value:  # NaN
        raise InvalidOption(f"a lock's {name} is a number of seconds, not NaN", field=name)
    return float(value)


# -- the grant, written once for both drivers (forklift._features.flow.steps) -------------------------
@dataclass(frozen=True)
class Holder:
    job_id: int | None
    worker_id: str | None
    owner: str
    token: int
    expires_at: Any
    expires_in: float

    def describe(self) -> str:
        who = (f"job {self.job_id} on worker {self.worker_id}" if self.job_id is not None
               else f"process {self.owner}")
        return f"{who} (token {self.token}, for {self.expires_in:.1f}s more unless renewed)"


def acquire_steps(
    schema: str,
    lock: Lock,
    owner: str,
    stop: Callable[[], bool] = lambda: False,
) -> Steps[tuple[int, float]]:
    """Try, and while another holds the key and ``wait`` allows, try again with backoff.

    Returns (token, the monotonic time the granting statement was sent: the lease runs from
    it). Raises LockNotAcquired naming the holder; ``stop`` gives up early (a cancelled job).
    """
    params = {"key": lock.key, "owner": owner, "job": lock.job_id, "worker": lock.worker_id,
              "ttl": lock.ttl}
    started = time.monotonic()
    retry = FIRST_RETRY
    while True:
        sent = time.monotonic()
        row = yield Query(render(ACQUIRE_SQL, schema), params)
        if row is not None:
            return int(row[0]), sent
        left = started + lock.wait - time.monotonic()
        if left <= 0 or stop():
            found = yield Query(render(HOLDER_SQL, schema), (lock.key,))
            raise _not_acquired(lock, Holder(*found) if found else None, time.monotonic() - started)
        yield Sleep(min(retry, left))
        retry = min(retry * 2, MAX_RETRY)


def _not_acquired(lock: Lock, holder: Holder | None, waited: float) -> LockNotAcquired:
    by = holder.describe() if holder else "another holder (it let go as we looked: try again)"
    tried = f" after waiting {waited:.1f}s" if lock.wait else ""
    return LockNotAcquired(
        f"lock {lock.key!r} is held by {by}{tried}", key=lock.key,
        holder_job=holder.job_id if holder else None,
        holder_worker=holder.worker_id if holder else None,
        holder_owner=holder.owner if holder else None,
        holder_token=holder.token if holder else None,
        expires_at=holder.expires_at if holder else None,
    )


def release_query(schema: str, lock: Lock) -> Query:
    return Query(render(RELEASE_SQL, schema), (lock.key, lock.token))


def renew_query(schema: str, batch: list[tuple[str, int]]) -> Query:
    return Query(render(RENEW_SQL, schema), ([k for k, _ in batch], [t for _, t in batch]), "all")


# -- the lock itself ---------------------------------------------------------------------------
class Backend(Protocol):
    """Where a lock is taken, renewed and given back (a worker's service, or an app's).

    ``acquire`` sets ``lock.token`` and books the lease before it returns the token.
    """

    async def acquire(self, lock: Lock) -> int: ...
    async def release(self, lock: Lock) -> bool: ...
    def acquire_sync(self, lock: Lock) -> int: ...
    def release_sync(self, lock: Lock) -> bool: ...
    def interrupt(self, lock: Lock) -> None: ...


@dataclass(eq=False)
class Lock:
    """A request for a lock, used as ``with`` or ``async with``; the block gets the token.

    ``lost`` is set the moment the lease is known lost (before the block is left).
    """

    backend: Backend
    key: str
    ttl: float
    wait: float
    job_id: int | None = None
    worker_id: str | None = None
    #: What the backend needs to stop the work under the lock (a job's context).
    ctx: Any = None
    token: int | None = None
    lost: threading.Event = field(default_factory=threading.Event)
    why_lost: str | None = None
    # The task running an `async with` block, while inside it (outside jobs: cancelled on loss).
    task: asyncio.Task[Any] | None = None
    cancelled_task: bool = False

    def _entered(self) -> None:
        if self.token is not None:
            raise ConfigError(f"lock {self.key!r} is already held by this block (not reentrant)")

    def on_lost(self, why: str) -> None:
        """The lease is gone: record it, then let the backend stop the work under it."""
        if self.lost.is_set():
            return
        self.why_lost = why
        self.lost.set()
        log.warning("lock %r (token %s) lost: %s", self.key, self.token, why)
        self.backend.interrupt(self)

    def _outcome(self, still_held: bool, exc: BaseException | None) -> None:
        token, self.token = self.token, None
        if still_held and not self.lost.is_set():
            return
        why = self.why_lost or "it ran out or was taken before the block ended"
        raise LockLost(
            f"lock {self.key!r} (token {token}) was lost while the block ran ({why}): its work"
            " was not exclusive", key=self.key, token=token,
        ) from exc

    def __enter__(self) -> int:
        self._entered()
        return self.backend.acquire_sync(self)

    def __exit__(self, et: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._outcome(self.backend.release_sync(self), exc)

    async def __aenter__(self) -> int:
        self._entered()
        token = await self.backend.acquire(self)
        self.task = asyncio.current_task()
        return token

    async def __aexit__(self, et: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        task, self.task = self.task, None
        if self.cancelled_task and task is not None:
            self.cancelled_task = False
            task.uncancel()  # our cancel becomes the LockLost raised below
        self._outcome(await self.backend.release(self), exc)


def granted(lock: Lock, book: Book, token: int, sent: float) -> int:
    """Record a grant: the lock's token, and its lease in the book of leases to renew."""
    lock.token = token
    book.add(lock, sent)
    return token


def release(book: Book, run: Callable[[Query], Any], schema: str, lock: Lock,
            errors: tuple[type[BaseException], ...]) -> bool:
    """Give the lock back (``run`` executes the query); whether it was held to the end."""
    held = book.remove(lock)
    try:
        answer = run(release_query(schema, lock))
    except errors as exc:
        answer = exc
    return still_held(lock, answer, held)


async def release_async(book: Book, run: Callable[[Query], Awaitable[Any]], schema: str,
                        lock: Lock, errors: tuple[type[BaseException], ...]) -> bool:
    held = book.remove(lock)
    try:
        answer = await run(release_query(schema, lock))
    except errors as exc:
        answer = exc
    return still_held(lock, answer, held)


def still_held(lock: Lock, answer: Any, held: Held | None) -> bool:
    """Whether a release says the lease was ours to the end; a release that failed (the
    database is away) trusts the local deadline, which only renewals that landed extend."""
    if isinstance(answer, BaseException):
        log.warning("releasing lock %r (token %s) failed (%s); it expires by itself",
                    lock.key, lock.token, answer)
        return held is not None and time.monotonic() < held.deadline
    return bool(answer and answer[0])
