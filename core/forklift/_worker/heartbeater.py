"""The heartbeater: renews every held lease in one statement, writes progress, refreshes the
worker row; and the lease watchdog, which stops attempts whose lease ran out unrenewed.

Leases and fencing
    A claim takes a fresh fence; every later write for the attempt matches ``(id, fence,
    state='running')``. When a heartbeat or a progress write finds the lease gone (rescued,
    cancelled, requeued), or when no heartbeat has reached the database before the lease runs
    out, the worker logs it, sets the handler's ``ctx.cancelled`` (``cancel_reason ==
    'lease_lost'``), cancels an async handler, stops renewing the lease and writes nothing more
    for that attempt. An outcome written late is refused by the fence and logged.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from forklift._db.session import DB_ERRORS, TRANSIENT, Session
from forklift._worker import leases, registry
from forklift._worker.util import why

if TYPE_CHECKING:
    from forklift._worker.attempts import Attempts
    from forklift._worker.config import WorkerConfig
    from forklift._worker.producer import Producer
    from forklift._worker.state import WorkerState

log = logging.getLogger("forklift.worker")


class Heartbeater:
    name = "heartbeat"

    def __init__(self, config: WorkerConfig, state: WorkerState, *, attempts: Attempts,
                 producer: Producer, beat_db: Session,
                 register: Callable[[Any], Awaitable[None]], restarts: dict[str, int]
                 ) -> None:
        self.config = config
        self.state = state
        self.attempts = attempts
        self.producer = producer
        self.beat_db = beat_db
        #: writes the worker's row again (it was deleted, or the kinds changed)
        self.register = register
        #: the supervisor's restart counts by service, reported with each beat
        self.restarts = restarts

    async def run(self) -> None:
        beat_every = self.config.lease / 3
        next_beat = time.monotonic() + beat_every
        while True:
            await asyncio.sleep(min(self.config.progress_interval, max(0.0, next_beat - time.monotonic())))
            await self.write_progress()
            if time.monotonic() >= next_beat:
                next_beat = time.monotonic() + beat_every
                await self.beat()

    async def record_starts(self) -> None:
        """Record the starts of buffered jobs still running, batched (a few a second at most):
        the claim recorded those that started at once, and an attempt that has ended is
        stamped by its outcome's write. Until this lands, a crash refunds the attempt."""
        pending = [r for r in self.attempts.running.values() if r.unrecorded and not r.lost]
        if not pending:
            return
        now = time.monotonic()
        rows = [(r.job.id, r.job.fence, now - r.began) for r in pending]
        try:
            done = await self.beat_db.run(lambda c: leases.record_starts(c, self.config.schema, rows))
        except DB_ERRORS as exc:
            log.warning("recording job starts failed (%s)", why(exc))
            if not isinstance(exc, TRANSIENT):
                for r in pending:  # refused for its content: not tried again and again
                    r.unrecorded = False
            return
        # Skipped for a row lock: again next time, while the attempt still runs here.
        for r in pending:
            if r.job.fence in done:
                r.unrecorded = False

    async def write_progress(self) -> None:
        await self.record_starts()
        dirty = [r for r in self.attempts.running.values() if r.dirty and not r.lost]
        if not dirty:
            return
        for r in dirty:
            r.dirty = False
        rows = [(r.job.id, r.job.fence, r.progress, r.partial) for r in dirty]
        try:
            kept = await self.beat_db.run(lambda c: leases.write_progress(c, self.config.schema, rows))
        except DB_ERRORS as exc:
            log.warning("progress write failed (%s)", why(exc))
            if isinstance(exc, TRANSIENT):
                for r in dirty:
                    r.dirty = True
            return  # refused for its content: that progress is dropped, not retried forever
        for r in dirty:
            if r.job.fence not in kept and not r.finished:
                self.state.stats.stale_writes += 1
                self.attempts.lose(r, "its progress write was refused")

    async def beat(self) -> None:
        held = dict(self.state.held)
        started = time.monotonic()
        try:
            answer = await self.beat_db.run(lambda c: leases.renew(c, self.config.schema, held, self.config.lease))
            # Once the drain has recorded the exit, the row is history: never revive it.
            present = self.state.exited or await self.beat_db.run(
                lambda c: registry.beat(c, self.config.schema, self.state.id, self.state.busy,
                                        self.restarts)
            )
            if (not present or self.state.reregister) and not self.state.exited:
                self.state.reregister = False
                await self.beat_db.run(self.register)
        except DB_ERRORS as exc:
            self.state.db_error = why(exc)  # the readiness probe's: cut off from the database
            if not self.state.closing:
                log.warning("heartbeat failed (%s)", why(exc))
            return
        self.state.db_seen, self.state.db_error = time.monotonic(), None
        running, waiting = self.attempts.running, self.producer.waiting
        for fence in held:
            # An attempt missing from the running set has an outcome waiting to be written; if
            # its lease is gone, the fence will refuse that write.
            rec = running.get(fence)
            if rec is None:
                entry = waiting.get(fence)
                if entry is None:
                    continue
                if fence not in answer:
                    self.producer.drop(entry, "the job was rescued, cancelled or requeued")
                elif answer[fence] is None:
                    continue  # its row was locked: held, renewed by the next beat
                elif answer[fence]:
                    self.producer.cancel(entry)
                else:
                    entry.lease_deadline = max(entry.lease_deadline, started + self.config.lease)
                continue
            if fence not in answer:
                self.attempts.lose(rec, "the job was rescued, cancelled or requeued")
                continue
            if answer[fence] is None:
                continue  # its row was locked: held, renewed by the next beat
            rec.lease_deadline = max(rec.lease_deadline, started + self.config.lease)
            if answer[fence]:
                self.attempts.interrupt(rec, "cancelled")


class LeaseWatchdog:
    """Cancel attempts whose lease ran out unrenewed: a stuck heartbeat must not let a handler
    run on while another worker may already hold its job."""

    name = "lease-watchdog"

    def __init__(self, config: WorkerConfig, state: WorkerState, *, attempts: Attempts) -> None:
        self.config = config
        self.state = state
        self.attempts = attempts

    async def run(self) -> None:
        every = min(0.25, self.config.lease / 10)
        while True:
            await asyncio.sleep(every)
            now = time.monotonic()
            for rec in list(self.attempts.running.values()):
                if now >= rec.lease_deadline:
                    self.attempts.lose(rec, "no heartbeat reached the database before it expired")
