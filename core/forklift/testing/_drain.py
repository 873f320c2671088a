"""Run due jobs to the end in the test's own process, through a real worker.

``drain`` starts a :class:`~forklift.Worker` on an event loop of its own, lets it claim, run and
settle exactly as in production (the same claim statement, thread pool, fenced settle, stager
and rescuer), and stops it -- a drain, as on SIGTERM -- once the database says nothing in its
queues is due or running any more. No step is skipped or simulated.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from forklift._base.errors import ForkliftError
from forklift._base.words import plural
from forklift._db.sqltext import render

if TYPE_CHECKING:
    from forklift._app.app import Forklift

# Work the drain waits for: claimable now, running (an outcome not yet written), due to be
# staged, and with ``retries`` also failed attempts waiting out their backoff.
_PENDING_SQL = (
    "SELECT count(*) FROM {s}.jobs WHERE queue = ANY(%s) AND (state IN ('available', 'running')"
    " OR (state IN ('scheduled', 'retryable') AND run_at <= now())"
    " OR (%s AND state = 'retryable'))"
)


class DrainTimeout(ForkliftError):
    """Jobs were still due or running when the drain's time was up."""

    code = "drain_timeout"


@dataclass(frozen=True)
class DrainReport:
    """What the drain's worker did (its own counters)."""

    claimed: int
    completed: int
    failed: int  # attempts that did not complete: retried, dead, snoozed, cancelled
    stale_writes: int
    lease_lost: int
    rescued: int


def _queues(app: Forklift, queue: str | Iterable[str] | None) -> list[str]:
    if queue is None:
        return sorted({k.queue for k in app.kinds.values()} or {"default"})
    return [queue] if isinstance(queue, str) else sorted(set(queue))


async def drain_async(
    app: Forklift,
    queue: str | Iterable[str] | None = None,
    *,
    timeout: float = 30.0,
    retries: bool = False,
    concurrency: int = 4,
) -> DrainReport:
    """Run ``queue``'s (default: every declared kind's queues) due jobs until none is left.

    ``retries=True`` also waits for failed attempts to come due again and run (their backoff
    is real time), so a job ends completed or dead. Raises :class:`DrainTimeout` after
    ``timeout`` seconds, having stopped the worker.
    """
    import psycopg

    from forklift._worker import Worker

    queues = _queues(app, queue)
    worker = Worker(app, queues=queues, concurrency=concurrency, lease=3.0, poll_interval=0.05,
                    leader_interval=0.05, flush_interval=0.001, drain_timeout=timeout)
    run = asyncio.create_task(worker.run(), name="forklift-drain")
    deadline = time.monotonic() + timeout
    sql = render(_PENDING_SQL, app.schema)
    left = -1
    try:
        async with await psycopg.AsyncConnection.connect(app.dsn, autocommit=True) as conn:
            while True:
                if run.done():
                    run.result()  # the worker's own error (an outdated schema, no database)
                    raise DrainTimeout("the drain's worker stopped before the work was done")
                cur = await conn.execute(sql, (queues, retries))
                row = await cur.fetchone()
                left = int(row[0]) if row else 0
                if left == 0:
                    break
                if time.monotonic() >= deadline:
                    raise DrainTimeout(
                        f"{plural(left, 'job')} in {', '.join(queues)} still due or running after"
                        f" {timeout:g}s", left=left, queues=queues,
                    )
                await asyncio.sleep(0.01)
    finally:
        worker.drain()
        if left != 0:
            worker.drain()  # do not wait for what is still running
        await asyncio.wait({run}, timeout=timeout + 10)
    if run.done() and not run.cancelled() and run.exception() is not None:
        raise run.exception()  # type: ignore[misc]
    s = worker.stats
    return DrainReport(claimed=s.claimed, completed=s.completed, failed=s.failed,
                       stale_writes=s.stale_writes, lease_lost=s.lease_lost, rescued=s.rescued)


def drain(
    app: Forklift,
    queue: str | Iterable[str] | None = None,
    *,
    timeout: float = 30.0,
    retries: bool = False,
    concurrency: int = 4,
) -> DrainReport:
    """:func:`drain_async` for sync code (from inside a running loop it runs on a thread)."""
    coro: Any = drain_async(app, queue, timeout=timeout, retries=retries, concurrency=concurrency)
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)  # type: ignore[no-any-return]
    with ThreadPoolExecutor(1, thread_name_prefix="forklift-drain") as pool:
        return pool.submit(asyncio.run, coro).result()  # type: ignore[no-any-return]
