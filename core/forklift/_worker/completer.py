"""The completer: writes attempts' outcomes in batches, one fenced statement a flush.

Buffered outcomes are flushed within ``flush_interval`` AND as soon as the worker has nothing
else in flight, so a concurrency-1 worker is not throttled by its own buffer. A batch the server
refuses for its content is written outcome by outcome (:meth:`Completer._write`).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Protocol

from forklift._base.scrub import error_entry
from forklift._base.words import plural
from forklift._db.session import TRANSIENT, Session
from forklift._jobs.lifecycle import Lifecycle
from forklift._worker import settle
from forklift._worker.claim import Claimed
from forklift._worker.execute import backoff_for
from forklift._worker.producer import FLUSH_MAX
from forklift._worker.util import wait_any, why

if TYPE_CHECKING:
    from forklift._app.app import Forklift
    from forklift._features.flow.claim import FlowClaim
    from forklift._features.flow.handoff import Handoff
    from forklift._worker.attempts import Attempts
    from forklift._worker.config import WorkerConfig
    from forklift._worker.state import WorkerState

log = logging.getLogger("forklift.worker")

#: Outcome writes a worker with flow queues lets go at once, each on its own session (their
#: purposes ``complete-flow``, ``complete-flow2``...: generic plans, forklift._db.connections).
FLOW_LANES = 3


class _Interrupted(Exception):
    """A transient failure part way through writing a batch one outcome at a time."""

    def __init__(self, done: list[settle.Outcome], accepted: dict[int, str],
                 rest: list[settle.Outcome], cause: BaseException) -> None:
        super().__init__(str(cause))
        self.done, self.accepted, self.rest, self.cause = done, accepted, rest, cause


class Claimer(Protocol):
    """The producer, as outcome writes free keys' slots or pass them to next jobs."""

    flow: FlowClaim

    def awaits_flush(self) -> bool: ...
    def handoff_for(self, batch: list[settle.Outcome]) -> Handoff | None: ...
    async def handed(self, jobs: list[Claimed], sent: float) -> None: ...
    def flushed(self, freed: bool = True) -> None: ...


class Completer:
    name = "completer"

    def __init__(self, config: WorkerConfig, state: WorkerState, *, app: Forklift,
                 producer: Claimer, attempts: Attempts, lifecycle: Lifecycle,
                 settle_db: Session) -> None:
        self.config = config
        self.state = state
        self.app = app
        self.producer = producer
        self.attempts = attempts
        self.lifecycle = lifecycle
        self.settle_db = settle_db
        self.outcomes: list[settle.Outcome] = []
        #: Logs of attempts that ended with no outcome to carry them (a lost lease, a parked
        #: job): (job id, attempt, lines), written by the next flush on their own.
        self.loose_logs: list[tuple[int, int, str]] = []
        self.ready = asyncio.Event()
        self._closing = False
        self._lane_dbs: list[Session] = []  # a flow worker's further lanes (run())

    def add(self, outcome: settle.Outcome) -> None:
        self.outcomes.append(outcome)
        self.ready.set()

    def add_log(self, job_id: int, attempt: int, lines: str) -> None:
        self.loose_logs.append((job_id, attempt, lines))
        self.ready.set()

    async def run(self) -> None:
        lanes: list[asyncio.Task[None]] = []
        try:
            while not self._closing:
                await self.ready.wait()
                if not lanes and self.producer.flow.queues:
                    # Keyed jobs' slots free (or pass on) only as their outcomes are written,
                    # and a write's latency (its statement and the commit's WAL flush) is the
                    # whole cycle of a key at its limit: a worker with flow queues writes on
                    # FLOW_LANES sessions of their own, each letting its write go while others
                    # are in flight, so outcomes that finish meanwhile do not wait for them
                    # (forklift._features.flow.handoff). This loop then only watches the lanes.
                    for i in range(FLOW_LANES):
                        db = self.state.session("complete-flow" if i == 0 else f"complete-flow{i + 1}",
                                       inline=True)
                        self._lane_dbs.append(db)
                        lanes.append(asyncio.ensure_future(self._lane(db)))
                if lanes:
                    done, _ = await asyncio.wait(lanes, return_when=asyncio.FIRST_EXCEPTION)
                    for lane in done:
                        lane.result()  # it failed: so does the completer
                    continue
                await self._gather()
                await self.flush(deadline=None)
        finally:
            if lanes:
                try:
                    await asyncio.wait(lanes)
                finally:
                    for lane in lanes:
                        if not lane.done():
                            lane.cancel()

    async def _lane(self, db: Session) -> None:
        while not self._closing:
            await self.ready.wait()
            await self._gather()
            await self.flush(deadline=None, db=db)

    async def _gather(self) -> None:
        if self.attempts.running and not self._closing and not self.producer.awaits_flush():
            flow = self.producer.flow.queues
            if flow and any(o.job is not None and o.job.queue in flow for o in self.outcomes):
                # A flow queue's outcome holds its keys' slots until it is written: no wait,
                # and the lanes batch what finishes while their writes are in flight.
                return
            # Gather more outcomes for a moment, unless nothing else is in flight (or the
            # claimer waits for these outcomes' keys).
            await wait_any(self.state.idle, timeout=self.config.flush_interval)

    async def stop(self, task: asyncio.Task[None], deadline: float) -> None:
        """Let the loop finish the write in hand (bounded), then stop it; whatever it had not
        written is back in ``outcomes`` for the final flush."""
        self._closing = True
        self.ready.set()
        done, _ = await asyncio.wait({task}, timeout=deadline - time.monotonic())
        if not done:
            self.settle_db.abort()
            for db in self._lane_dbs:
                db.abort()
            done, _ = await asyncio.wait({task}, timeout=1.0)
        if not done:
            task.cancel()
            await asyncio.wait({task}, timeout=1.0)

    async def flush(self, *, deadline: float | None, db: Session | None = None) -> bool:
        """Write every buffered outcome. Without a deadline, retries until it succeeds or the
        worker closes; with one, gives up when it passes (the jobs are rescued later)."""
        backoff = 0.05
        while self.outcomes:
            batch, self.outcomes = self.outcomes[:FLUSH_MAX], self.outcomes[FLUSH_MAX:]
            self.ready.clear()
            limit = None if deadline is None else max(0.5, deadline - time.monotonic())
            # Keyed jobs' slots may pass to their values' next jobs in the same statement
            # (forklift._features.flow.handoff); None for a worker without flow queues.
            handoff = self.producer.handoff_for(batch)
            sent = time.monotonic()
            try:
                accepted = await self._write(batch, limit, handoff, db or self.settle_db)
            except BaseException as exc:
                if isinstance(exc, _Interrupted):
                    # Part of the batch was written one by one before a transient failure: settle
                    # those, and send only the rest again.
                    self._settled(exc.done, exc.accepted)
                    batch, exc = exc.rest, exc.cause
                self.outcomes = batch + self.outcomes
                if not isinstance(exc, TRANSIENT):
                    raise exc
                if deadline is not None and time.monotonic() + backoff >= deadline:
                    log.warning("final outcome writes failed (%s); %s left to be rescued as leases"
                                " expire", why(exc), plural(len(self.outcomes), "job"))
                    return False
                if self._closing and deadline is None:
                    return False
                log.warning("writing outcomes failed (%s); retrying in %.2fs", why(exc), backoff)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 5.0)
                continue
            handed = handoff.jobs if handoff is not None else []
            if handed:
                await self.producer.handed(handed, sent)
            self._settled(batch, accepted, len(handed))
        if self.loose_logs:
            await self._write_loose_logs(deadline, db or self.settle_db)
        return True

    async def _write_loose_logs(self, deadline: float | None, db: Session) -> None:
        """One try: these logs are a courtesy to whoever looks at the job later, and the
        attempts they tell of already ended without an outcome of this worker's."""
        self.ready.clear()
        logs, self.loose_logs = self.loose_logs, []
        limit = None if deadline is None else max(0.5, deadline - time.monotonic())
        try:
            await db.run(functools.partial(settle.write_logs, schema=self.config.schema,
                                           logs=logs), timeout=limit)
        except Exception as exc:
            log.warning("the logs of %s that ended without an outcome could not be stored (%s)",
                        plural(len(logs), "attempt"), why(exc))

    def _settled(self, batch: list[settle.Outcome], accepted: dict[int, str],
                 handed: int = 0) -> None:
        refused = 0
        for o in batch:
            self.state.held.pop(o.fence, None)
            if o.fence not in accepted:
                refused += 1
                self.state.stats.stale_writes += 1
                log.warning(
                    "job %s: outcome %s refused (fence %s is stale: the lease was lost)",
                    o.job_id, o.next, o.fence,
                    extra={"job_id": o.job_id, "fence": o.fence, "state": o.next},
                )
        if self.lifecycle.on_flush:
            self.lifecycle.flushed(len(batch), refused)
        # The claimer may have been waiting for the flush; slots passed on freed no key.
        self.producer.flushed(freed=len(accepted) > handed)

    async def _write(self, batch: list[settle.Outcome], limit: float | None,
                     handoff: Handoff | None = None, db: Session | None = None
                     ) -> dict[int, str]:
        """One statement for the batch. A batch the server refuses for its content (not for a
        lost connection) is written outcome by outcome, so one bad outcome cannot hold back the
        rest: that one is recorded as an ``internal_error`` failure instead, and failing even
        that, left to be rescued when its lease expires. Raises only TRANSIENT errors."""
        session = db or self.settle_db

        def write(outcomes: list[settle.Outcome]) -> Awaitable[dict[int, str]]:
            return session.run(
                functools.partial(settle.write, schema=self.config.schema, outcomes=outcomes),
                timeout=limit,
            )

        try:
            if handoff is not None:
                return await session.run(functools.partial(
                    settle.write, schema=self.config.schema, outcomes=batch, handoff=handoff),
                    timeout=limit)
            return await write(batch)
        except TRANSIENT:
            raise
        except Exception as exc:
            if len(batch) == 1:
                return await self._write_fallback(batch[0], exc, write)
            log.error("a batch of %d outcomes was refused (%s); writing them one by one",
                      len(batch), why(exc))
        accepted: dict[int, str] = {}
        for i, o in enumerate(batch):
            try:
                accepted.update(await write([o]))
            except TRANSIENT as exc:
                raise _Interrupted(batch[:i], accepted, batch[i:], exc) from exc
            except Exception as exc:
                try:
                    accepted.update(await self._write_fallback(o, exc, write))
                except TRANSIENT as again:
                    raise _Interrupted(batch[:i], accepted, batch[i:], again) from again
        return accepted

    async def _write_fallback(
        self, o: settle.Outcome, exc: BaseException,
        write: Callable[[list[settle.Outcome]], Awaitable[dict[int, str]]],
    ) -> dict[int, str]:
        log.error("job %s: outcome %s could not be stored (%s); recording internal_error",
                  o.job_id, o.next, why(exc), extra={"job_id": o.job_id, "fence": o.fence})
        plain = self._internal_error(o, exc)
        try:
            return await write([plain])
        except TRANSIENT:
            raise
        except Exception as again:
            log.error("job %s: not even that could be stored (%s); it will be rescued when its"
                      " lease expires", o.job_id, why(again),
                      extra={"job_id": o.job_id, "fence": o.fence})
            return {}

    def _internal_error(self, o: settle.Outcome, exc: BaseException) -> settle.Outcome:
        """An outcome the server refused becomes an ordinary failed attempt: internal_error,
        retried by the kind's backoff, dead after the last attempt."""
        job = o.job
        attempt = job.attempt if job is not None else int((o.error or {}).get("attempt", 0))
        entry = error_entry(
            None, code="internal_error", attempt=attempt, worker_id=self.state.id,
            message=f"forklift could not store this attempt's outcome ({o.next}):"
                    f" {type(exc).__name__}",
        )
        if job is None:  # not an attempt of this worker's (tests): retry it soon
            return settle.Outcome(o.job_id, o.fence, "retryable", delay=1.0, error=entry,
                                  code="internal_error")
        if job.attempt >= job.max_attempts:
            return settle.Outcome(o.job_id, o.fence, "dead", error=entry, code="internal_error",
                                  job=job)
        delay = backoff_for(job, self.app.kinds.get(job.kind)).delay(job.attempt)
        return settle.Outcome(o.job_id, o.fence, "retryable", delay=delay, error=entry,
                              code="internal_error", job=job)
