"""The worker: N slots over a set of queues, everything batched.

Loops (asyncio tasks): claim (fills free slots, plus a short local buffer, in one statement),
flush (writes outcomes in one statement), heartbeat (renews every lease in one statement, writes progress, refreshes the
worker row), the lease watchdog, leader (stage, rescue, prune), and the listener. No
transaction is held open across a handler, and every database call has a client-side deadline
(:mod:`forklift._session`), so a server that stops answering stalls nothing for long.

Leases and fencing
    A claim takes a fresh fence; every later write for the attempt matches ``(id, fence,
    state='running')``. When a heartbeat or a progress write finds the lease gone (rescued,
    cancelled, requeued), or when no heartbeat has reached the database before the lease runs
    out, the worker logs it, sets the handler's ``ctx.cancelled`` (``cancel_reason ==
    'lease_lost'``), cancels an async handler, stops renewing the lease and writes nothing more
    for that attempt. An outcome written late is refused by the fence and logged.

The local buffer
    When jobs finish quickly, a claim takes more than the free slots: about ``prefetch_horizon``
    seconds of work at the recent completion rate, at most ``prefetch_max`` jobs. Buffered jobs
    are claimed (their leases held and renewed like running ones) and start, most urgent first,
    the moment a slot frees, with no round trip. Slow jobs get no buffer: at one job a second,
    50 ms of work is no job at all. A buffered job whose lease is lost is dropped; one whose
    cancel is requested is settled ``cancelled`` without running; a drain gives every buffered
    job back at once (``available``, attempt refunded, no error entry) so other workers can take
    it.

Timeouts
    A kind's ``timeout`` sets ``ctx.cancelled`` (reason ``timeout``) and cancels an async
    handler; the attempt fails with code ``timeout``. A sync handler runs in a thread, and
    Python cannot stop a thread from outside: it is only *told*, through ``ctx``. Its slot stays
    taken, and its lease renewed, until the thread returns, so a sync handler that ignores its
    context keeps a slot busy for as long as it runs. Write long sync handlers to check
    ``ctx.is_cancelled()`` between units of work.

Drain (SIGTERM, or :meth:`Worker.drain`)
    Claiming stops at once (a claim already sent completes and its jobs run like the others)
    and the worker row turns ``draining`` with its deadline. In-flight jobs get
    ``drain_timeout`` seconds to finish; a second signal skips that wait. Then the rest are told
    to stop (reason ``interrupted``; async handlers cancelled) and given ``drain_grace``
    seconds. Each is released: ``retryable``, run again at once, error entry ``interrupted``,
    and the attempt refunded (a drain is not the job's fault). A sync handler still running
    after the grace is abandoned with the process; its job is released the same way but held
    back for ``release_hold`` seconds, so no other worker starts it while the abandoned thread
    could still be alive. A handler that returns normally after being told to stop has
    completed. The final writes (outcomes, deregistering, resigning leadership) share a deadline
    of ``final_timeout`` seconds: if the database does not answer, the worker exits anyway and
    the jobs it could not release are rescued when their leases expire.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import heapq
import itertools
import json
import logging
import os
import secrets
import socket
import time
from collections.abc import Awaitable, Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

from forklift import _claim as claims
from forklift import _cron as cron
from forklift import _leader as leader
from forklift import _leases as leases
from forklift import _registry as registry
from forklift import _settle as settle
from forklift._app import Forklift, JobKind
from forklift._context import JobContext, Progress
from forklift._errors import ForkliftError
from forklift._execute import progress_json, run_attempt, stopped
from forklift._listener import Listener
from forklift._migrate import ensure_current
from forklift._scrub import error_entry
from forklift._session import DB_ERRORS, TRANSIENT, Session

log = logging.getLogger("forklift.worker")
T = TypeVar("T")

VERSION = "0.1.0"
CLAIM_GRACE = 2.0  # how long a drain waits for a claim already sent
PREFETCH_MAX = 1000  # most claimed-but-not-started jobs a worker keeps
PREFETCH_HORIZON = 0.05  # seconds of work (at the recent completion rate) to keep buffered
# Most outcomes in one settle statement, and most finished jobs whose outcome is not yet
# written before the worker stops claiming: a flush that falls behind (a slow or stalled
# server) holds the claims back instead of piling up work, leases and memory.
FLUSH_MAX = 1000


@dataclass
class WorkerStats:
    claimed: int = 0
    completed: int = 0
    failed: int = 0
    stale_writes: int = 0
    lease_lost: int = 0
    rescued: int = 0
    staged: int = 0


@dataclass
class _Running:
    job: claims.Claimed
    kind: JobKind[Any, Any] | None
    ctx: JobContext
    lease_deadline: float  # monotonic time the lease runs out unless renewed
    task: asyncio.Task[settle.Outcome | None] | None = None
    timer: asyncio.TimerHandle | None = None
    progress: str | None = None
    partial: str | None = None
    dirty: bool = False
    finished: bool = False
    lost: bool = False  # the lease is gone: nothing more may be written for this attempt
    released: bool = False  # the drain wrote its outcome; whatever the thread returns is moot


@dataclass
class _Waiting:
    """A claimed job in the local buffer: its lease is held, its handler not yet started."""

    job: claims.Claimed
    lease_deadline: float


class Worker:
    def __init__(
        self,
        app: Forklift,
        *,
        queues: Iterable[str] | None = None,
        concurrency: int = 10,
        lease: float = 30.0,
        poll_interval: float = 1.0,
        drain_timeout: float = 30.0,
        drain_grace: float = 5.0,
        final_timeout: float = 5.0,
        release_hold: float = 10.0,
        leader_interval: float = 1.0,
        flush_interval: float = 0.005,
        progress_interval: float = 0.25,
        listen_health: float = 5.0,
        prefetch_max: int = PREFETCH_MAX,
        prefetch_horizon: float = PREFETCH_HORIZON,
        retention: dict[str, float] | None = None,
        worker_id: str | None = None,
        lead: bool = True,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if lease < 1:
            raise ValueError("lease must be at least 1 second")
        self.app = app
        self.schema = app.schema
        self.queues = sorted(set(queues or {k.queue for k in app.kinds.values()} or {"default"}))
        self.concurrency = concurrency
        self.lease = lease
        self.poll_interval = poll_interval
        self.drain_timeout = drain_timeout
        self.drain_grace = drain_grace
        self.final_timeout = final_timeout
        self.release_hold = release_hold
        self.leader_interval = leader_interval
        self.flush_interval = flush_interval
        self.progress_interval = progress_interval
        self.listen_health = listen_health
        self.prefetch_max = max(0, prefetch_max)
        self.prefetch_horizon = prefetch_horizon
        self.retention = retention if retention is not None else {
            "completed": 86400.0, "cancelled": 7 * 86400.0, "dead": 30 * 86400.0,
        }
        self.lead = lead
        self.host = socket.gethostname()
        self.pid = os.getpid()
        self.id = worker_id or f"{self.host}:{self.pid}:{secrets.token_hex(2)}"
        self.stats = WorkerStats()
        self.is_leader = False

        # Attempts are keyed by fence, not job id: a job can be claimed again (after a rescue)
        # while an abandoned thread of its earlier attempt still runs here.
        self._running: dict[int, _Running] = {}
        self._outcomes: list[settle.Outcome] = []
        self._held: dict[int, int] = {}  # fence -> job id: every lease we still need
        # The local buffer: fence -> entry, and a heap in claim order (priority first). An
        # entry dropped from the dict stays in the heap and is skipped when it surfaces.
        self._waiting: dict[int, _Waiting] = {}
        self._waiting_heap: list[tuple[int, int, _Waiting]] = []
        self._seq = itertools.count()
        self._limited = False  # whether one of our queues has a concurrency limit (claim path)
        self._claiming = False  # a claim is in flight
        self._claims_sent = 0
        self._extra = 0  # buffer target of the last claim decision
        self._done = 0  # attempts finished, for the completion rate
        self._rate = 0.0
        self._rate_at = 0.0
        self._rate_done = 0
        self._executor = ThreadPoolExecutor(concurrency, thread_name_prefix="forklift-job")
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake = asyncio.Event()
        self._slot_free = asyncio.Event()
        self._outcome_ready = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._stop_claiming = asyncio.Event()
        self._skip_wait = asyncio.Event()
        self._drain_requests = 0
        self._closing = False
        self._started = asyncio.Event()
        self._dsn = ""

    # -- signals from outside -----------------------------------------------------------------
    def drain(self) -> None:
        """Begin a graceful drain; a second call skips the wait for in-flight jobs."""
        self._drain_requests += 1
        if self._drain_requests == 1:
            log.info("drain requested: no more claims")
        else:
            log.info("drain requested again: not waiting for in-flight jobs")
            self._skip_wait.set()
        self._stop_claiming.set()
        # The claimer waits on one event at a time: wake it whichever it waits on.
        self._wake.set()
        self._slot_free.set()
        if self._claiming and self._loop is not None:
            self._loop.call_later(CLAIM_GRACE, self._abort_stuck_claim, self._claims_sent)

    @property
    def in_flight(self) -> int:
        return len(self._running)

    # -- main ---------------------------------------------------------------------------------
    async def run(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._dsn = self.app.dsn
        await asyncio.to_thread(self._check_schema)
        op_timeout = 15.0  # above every server-side statement timeout of these sessions
        beat_timeout = max(1.0, min(5.0, self.lease / 3))
        self._claim_db = Session(self._dsn, "claim", self.id, timeout=op_timeout)
        self._settle_db = Session(self._dsn, "complete", self.id, timeout=op_timeout)
        self._beat_db = Session(self._dsn, "heartbeat", self.id, timeout=beat_timeout)
        self._leader_db = Session(self._dsn, "leader", self.id, timeout=op_timeout)
        self._sessions = (self._claim_db, self._settle_db, self._beat_db, self._leader_db)
        await self._beat_db.run(self._register, timeout=op_timeout)
        self.listener = Listener(
            self._dsn, self.schema, self.id,
            on_wake=self._on_wake, on_control=self._on_control, on_reconnect=self._wake.set,
            health_every=self.listen_health, health_timeout=max(1.0, self.listen_health / 2),
        )
        self._flush_task = asyncio.create_task(self._flush_loop(), name="flush")
        background = [
            asyncio.create_task(self.listener.run(), name="listener"),
            asyncio.create_task(self._heartbeat_loop(), name="heartbeat"),
            asyncio.create_task(self._watchdog_loop(), name="lease-watchdog"),
        ]
        if self.lead:
            background.append(asyncio.create_task(self._leader_loop(), name="leader"))
        log.info("worker %s started: queues=%s concurrency=%d lease=%.1fs", self.id,
                 self.queues, self.concurrency, self.lease)
        self._started.set()
        try:
            await self._claim_loop()
            await self._shutdown()
        finally:
            await self._teardown([*background, self._flush_task])
        log.info("worker %s stopped", self.id)

    async def _teardown(self, loops: list[asyncio.Task[Any]]) -> None:
        """Stop every loop without cancelling anything in the middle of a query: sessions are
        closed first (in-flight calls fail at once), then the now idle loops are cancelled."""
        self._closing = True
        self.listener.stop()
        await asyncio.gather(*(s.close() for s in self._sessions))
        tasks = [*loops, *(r.task for r in self._running.values() if r.task is not None)]
        for _ in range(5):  # a task may swallow one cancellation (asyncio.wait_for in 3.11)
            pending = [t for t in tasks if not t.done()]
            if not pending:
                break
            for task in pending:
                task.cancel()
            await asyncio.wait(pending, timeout=1.0)
        stuck = [t.get_name() for t in tasks if not t.done()]
        if stuck:
            log.warning("tasks still running at exit: %s", ", ".join(stuck))
        self._executor.shutdown(wait=False, cancel_futures=True)

    def _check_schema(self) -> None:
        from forklift._db import connection

        with connection(self._dsn, "migrate") as conn:
            ensure_current(conn, self.schema)

    async def _register(self, conn: Any) -> None:
        await registry.register(
            conn, self.schema, worker_id=self.id, host=self.host, pid=self.pid,
            queues=self.queues, slots=self.concurrency, version=VERSION,
        )

    # -- claiming -----------------------------------------------------------------------------
    def _on_wake(self, queue: str) -> None:
        if queue in self.queues:
            self._wake.set()

    def _on_control(self, message: dict[str, Any]) -> None:
        if message.get("op") == "cancel":
            job_id = message.get("job")
            for rec in list(self._running.values()):
                if rec.job.id == job_id:
                    self._interrupt(rec, "cancelled")
            for w in list(self._waiting.values()):
                if w.job.id == job_id:
                    self._cancel_waiting(w)

    async def _wait_any(self, *events: asyncio.Event, timeout: float | None) -> None:
        waiters = [asyncio.ensure_future(e.wait()) for e in events]
        try:
            await asyncio.wait(waiters, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waiters:
                w.cancel()

    async def _claim_loop(self) -> None:
        backoff = 0.05
        while not self._stop_claiming.is_set():
            self._fill()
            n = self._claim_size()
            if n <= 0:
                self._slot_free.clear()
                await self._slot_free.wait()
                continue
            self._wake.clear()
            sent = time.monotonic()  # the lease runs from the claim's transaction, not its reply
            try:
                got = await self._claim_once(n)
            except DB_ERRORS as exc:
                log.warning("claim failed (%s); retrying in %.2fs", _why(exc), backoff)
                await _until(self._wake, backoff)
                backoff = min(backoff * 2, 5.0)
                continue
            backoff = 0.05
            for job in got:
                self._hold(job, sent + self.lease)
            self._fill()
            if got and len(got) == n:
                continue  # there may be more: claim again when the buffer runs low
            await _until(self._wake, self.poll_interval)

    def _claim_size(self) -> int:
        """How many jobs to claim now (0: wait for a slot or for the buffer to run low)."""
        now = time.monotonic()
        if now - self._rate_at >= 0.05:
            rate = (self._done - self._rate_done) / (now - self._rate_at)
            self._rate = rate if rate > self._rate else 0.5 * (self._rate + rate)
            self._rate_at, self._rate_done = now, self._done
        self._extra = min(self.prefetch_max, int(self._rate * self.prefetch_horizon))
        waiting = len(self._waiting)
        if len(self._held) - len(self._running) - waiting >= FLUSH_MAX:
            return 0  # a flush wakes the claimer when it has caught up
        free = self.concurrency - len(self._running)
        if (free > 0 and not waiting) or (self._extra and waiting <= self._extra // 2):
            return self.concurrency + self._extra - len(self._running) - waiting
        return 0

    def _hold(self, job: claims.Claimed, lease_deadline: float) -> None:
        w = _Waiting(job, lease_deadline)
        self._waiting[job.fence] = w
        self._held[job.fence] = job.id
        heapq.heappush(self._waiting_heap, (job.priority, next(self._seq), w))

    def _fill(self) -> None:
        """Start buffered jobs in free slots, most urgent first; never while draining."""
        if self._stop_claiming.is_set():
            return
        heap = self._waiting_heap
        while heap and len(self._running) < self.concurrency:
            w = heapq.heappop(heap)[2]
            if self._waiting.pop(w.job.fence, None) is None:
                continue  # dropped while it waited
            if time.monotonic() >= w.lease_deadline:
                # No heartbeat has renewed it in time: another worker may hold it by now.
                self._held.pop(w.job.fence, None)
                self.stats.lease_lost += 1
                log.warning("job %s (fence %s): its lease ran out while it waited to start;"
                            " not starting it", w.job.id, w.job.fence)
                continue
            self._start(w.job, w.lease_deadline)

    def _nudge_claimer(self) -> None:
        if (not self._waiting and len(self._running) < self.concurrency) or (
            self._extra and len(self._waiting) <= self._extra // 2
        ):
            self._slot_free.set()

    def _drop_waiting(self, w: _Waiting, why: str) -> None:
        """A buffered job's lease is gone: forget it without writing anything."""
        if self._waiting.pop(w.job.fence, None) is None:
            return
        self._held.pop(w.job.fence, None)
        self.stats.lease_lost += 1
        log.warning("job %s (fence %s): lease lost before it started, %s; not starting it",
                    w.job.id, w.job.fence, why)

    def _cancel_waiting(self, w: _Waiting) -> None:
        """An operator cancelled a buffered job: settle it cancelled, without running it."""
        if self._waiting.pop(w.job.fence, None) is None:
            return
        entry = error_entry(
            None, code="cancelled", attempt=w.job.attempt, worker_id=self.id,
            message="cancelled by an operator before it started",
        )
        self._outcomes.append(settle.Outcome(
            w.job.id, w.job.fence, "cancelled", refund=1, error=entry, code="cancelled",
        ))
        self._outcome_ready.set()

    async def _claim_once(self, n: int) -> list[claims.Claimed]:
        """One claim. A drain does not wait long for a claim the server is not answering:
        it arms :meth:`_abort_stuck_claim` (no task or waiter per claim: pickup latency)."""
        self._claims_sent += 1
        self._claiming = True
        try:
            return await self._claim_db.run(functools.partial(self._claim, n=n))
        finally:
            self._claiming = False

    def _abort_stuck_claim(self, sent: int) -> None:
        if self._claiming and self._claims_sent == sent:
            # Jobs this claim may have taken are rescued when their leases expire.
            self._claim_db.abort()

    async def _claim(self, conn: Any, *, n: int) -> list[claims.Claimed]:
        # One statement while no queue of ours has a limit; the locked claim once one has.
        got, limited = await claims.claim_batch(
            conn, self.schema, worker_id=self.id, queues=self.queues, n=n, lease=self.lease,
            locked=self._limited,
        )
        if limited and not self._limited and len(got) < n:
            # The lock-free claim skipped a limited queue: take its share now, under the locks.
            more, limited = await claims.claim_batch(
                conn, self.schema, worker_id=self.id, queues=self.queues, n=n - len(got),
                lease=self.lease, locked=True,
            )
            got += more
        self._limited = limited
        return got

    def _start(self, job: claims.Claimed, lease_deadline: float) -> None:
        assert self._loop is not None
        self.stats.claimed += 1
        kind = self.app.kinds.get(job.kind)
        ctx = JobContext(
            job_id=job.id, kind=job.kind, queue=job.queue, attempt=job.attempt,
            max_attempts=job.max_attempts, fence=job.fence, worker_id=self.id, meta=job.meta,
            on_progress=functools.partial(self._note_progress, job.fence),
            on_publish=functools.partial(self._note_partial, job.fence),
        )
        rec = _Running(job, kind, ctx, lease_deadline)
        self._running[job.fence] = rec
        self._held[job.fence] = job.id
        self._idle.clear()
        rec.task = asyncio.create_task(
            run_attempt(job, kind, ctx, self._executor, self.app.payload_limit),
            name=f"job-{job.id}",
        )
        rec.task.add_done_callback(functools.partial(self._finished, rec))
        if kind is not None and kind.timeout:
            rec.timer = self._loop.call_later(kind.timeout, self._interrupt, rec, "timeout")

    def _interrupt(self, rec: _Running, reason: str) -> None:
        """Tell a handler to stop: its context first, then (async handlers) the task."""
        if rec.finished or rec.ctx.cancel_reason is not None:
            return
        rec.ctx._cancel(reason)
        if rec.kind is not None and rec.kind.is_async and rec.task is not None:
            rec.task.cancel()

    def _lose(self, rec: _Running, why: str) -> None:
        """The lease of a running attempt is gone: stop it, stop renewing, write nothing."""
        if rec.lost or rec.finished:
            return
        rec.lost = True
        self._held.pop(rec.job.fence, None)
        self.stats.lease_lost += 1
        log.warning(
            "job %s (fence %s): lease lost, %s; cancelling its handler, nothing will be written",
            rec.job.id, rec.job.fence, why,
        )
        self._interrupt(rec, "lease_lost")  # a no-op when it was already told to stop

    def _finished(self, rec: _Running, task: asyncio.Task[settle.Outcome | None]) -> None:
        """Bookkeeping when an attempt's task ends, however it ends."""
        rec.finished = True
        if rec.timer is not None:
            rec.timer.cancel()
        if self._running.get(rec.job.fence) is rec:
            del self._running[rec.job.fence]
        self._done += 1
        self._fill()
        self._nudge_claimer()
        if not self._running:
            self._idle.set()
        outcome: settle.Outcome | None = None
        if task.cancelled():
            # Cancelled before the handler ran (no chance to classify), or torn down.
            if rec.ctx.cancel_reason is not None and not self._closing:
                outcome = stopped(rec.job, rec.ctx, rec.kind)
        elif (exc := task.exception()) is not None:
            log.error("internal error running job %s", rec.job.id, exc_info=exc)
        else:
            outcome = task.result()
        if rec.released:
            return
        if rec.lost or outcome is None:
            self._held.pop(rec.job.fence, None)
            return
        if rec.dirty:
            outcome.progress = rec.progress
            outcome.partial = rec.partial if outcome.next != "completed" else None
        if outcome.next == "completed":
            self.stats.completed += 1
        else:
            self.stats.failed += 1
        self._outcomes.append(outcome)
        self._outcome_ready.set()

    # -- progress -----------------------------------------------------------------------------
    def _note_progress(self, fence: int, p: Progress) -> None:
        text = progress_json(p.to_json())
        self._call_in_loop(self._set_interim, fence, text, None)

    def _note_partial(self, fence: int, value: Any) -> None:
        text = progress_json(value)
        self._call_in_loop(self._set_interim, fence, None, text)

    def _call_in_loop(self, fn: Callable[..., None], *args: Any) -> None:
        assert self._loop is not None
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop:
            fn(*args)
        else:
            self._loop.call_soon_threadsafe(fn, *args)

    def _set_interim(self, fence: int, progress: str | None, partial: str | None) -> None:
        rec = self._running.get(fence)
        if rec is None or rec.lost:
            return
        if progress is not None:
            rec.progress = progress
        if partial is not None:
            rec.partial = partial
        rec.dirty = True

    # -- flushing outcomes --------------------------------------------------------------------
    async def _flush_loop(self) -> None:
        while not self._closing:
            await self._outcome_ready.wait()
            if self._running and not self._closing:
                # Gather more outcomes for a moment, unless nothing else is in flight.
                await self._wait_any(self._idle, timeout=self.flush_interval)
            await self._flush_once(deadline=None)

    async def _flush_once(self, *, deadline: float | None) -> bool:
        """Write every buffered outcome. Without a deadline, retries until it succeeds or the
        worker closes; with one, gives up when it passes (the jobs are rescued later)."""
        backoff = 0.05
        while self._outcomes:
            batch, self._outcomes = self._outcomes[:FLUSH_MAX], self._outcomes[FLUSH_MAX:]
            self._outcome_ready.clear()
            limit = None if deadline is None else max(0.5, deadline - time.monotonic())
            try:
                accepted = await self._write(batch, limit)
            except BaseException as exc:
                self._outcomes = batch + self._outcomes
                if not isinstance(exc, TRANSIENT):
                    raise
                if deadline is not None and time.monotonic() + backoff >= deadline:
                    log.warning("final outcome writes failed (%s); %d job(s) will be rescued"
                                " when their leases expire", _why(exc), len(self._outcomes))
                    return False
                if self._closing and deadline is None:
                    return False
                log.warning("writing outcomes failed (%s); retrying in %.2fs", _why(exc), backoff)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 5.0)
                continue
            for o in batch:
                self._held.pop(o.fence, None)
                if o.fence not in accepted:
                    self.stats.stale_writes += 1
                    log.warning(
                        "job %s: outcome %s refused (fence %s is stale: the lease was lost)",
                        o.job_id, o.next, o.fence,
                    )
            self._slot_free.set()  # the claimer may have been waiting for the flush
        return True

    async def _write(self, batch: list[settle.Outcome], limit: float | None) -> dict[int, str]:
        """One statement for the batch. A batch the server refuses for its content (not for a
        lost connection) is written outcome by outcome, so one bad outcome cannot hold back the
        rest: that one is recorded as an ``internal_error`` failure instead, and failing even
        that, left to be rescued when its lease expires. Raises only TRANSIENT errors."""
        def write(outcomes: list[settle.Outcome]) -> Awaitable[dict[int, str]]:
            return self._settle_db.run(
                functools.partial(settle.write, schema=self.schema, outcomes=outcomes),
                timeout=limit,
            )

        try:
            return await write(batch)
        except TRANSIENT:
            raise
        except Exception as exc:
            if len(batch) == 1:
                return await self._write_fallback(batch[0], exc, write)
            log.error("a batch of %d outcomes was refused (%s); writing them one by one",
                      len(batch), _why(exc))
        accepted: dict[int, str] = {}
        for i, o in enumerate(batch):
            try:
                accepted.update(await write([o]))
            except TRANSIENT:
                self._outcomes = batch[i:] + self._outcomes
                raise
            except Exception as exc:
                accepted.update(await self._write_fallback(o, exc, write))
        return accepted

    async def _write_fallback(
        self, o: settle.Outcome, exc: BaseException,
        write: Callable[[list[settle.Outcome]], Awaitable[dict[int, str]]],
    ) -> dict[int, str]:
        log.error("job %s: outcome %s could not be stored (%s); recording internal_error",
                  o.job_id, o.next, _why(exc))
        attempt = o.error.get("attempt", 0) if o.error else 0
        entry = error_entry(
            None, code="internal_error", attempt=int(attempt), worker_id=self.id,
            message=f"forklift could not store this attempt's outcome ({o.next}):"
                    f" {type(exc).__name__}",
        )
        plain = settle.Outcome(o.job_id, o.fence, "retryable", delay=1.0, error=entry,
                               code="internal_error")
        try:
            return await write([plain])
        except TRANSIENT:
            raise
        except Exception as again:
            log.error("job %s: not even that could be stored (%s); it will be rescued when its"
                      " lease expires", o.job_id, _why(again))
            return {}

    # -- heartbeats ---------------------------------------------------------------------------
    async def _heartbeat_loop(self) -> None:
        beat_every = self.lease / 3
        next_beat = time.monotonic() + beat_every
        while True:
            await asyncio.sleep(min(self.progress_interval, max(0.0, next_beat - time.monotonic())))
            await self._write_progress()
            if time.monotonic() >= next_beat:
                next_beat = time.monotonic() + beat_every
                await self._beat()

    async def _watchdog_loop(self) -> None:
        """Cancel attempts whose lease ran out unrenewed: a stuck heartbeat must not let a
        handler run on while another worker may already hold its job."""
        every = min(0.25, self.lease / 10)
        while True:
            await asyncio.sleep(every)
            now = time.monotonic()
            for rec in list(self._running.values()):
                if now >= rec.lease_deadline:
                    self._lose(rec, "no heartbeat reached the database before it expired")

    async def _write_progress(self) -> None:
        dirty = [r for r in self._running.values() if r.dirty and not r.lost]
        if not dirty:
            return
        for r in dirty:
            r.dirty = False
        rows = [(r.job.id, r.job.fence, r.progress, r.partial) for r in dirty]
        try:
            kept = await self._beat_db.run(lambda c: leases.write_progress(c, self.schema, rows))
        except DB_ERRORS as exc:
            log.warning("progress write failed (%s)", _why(exc))
            if isinstance(exc, TRANSIENT):
                for r in dirty:
                    r.dirty = True
            return  # refused for its content: that progress is dropped, not retried forever
        for r in dirty:
            if r.job.fence not in kept and not r.finished:
                self.stats.stale_writes += 1
                self._lose(r, "its progress write was refused")

    async def _beat(self) -> None:
        held = dict(self._held)
        started = time.monotonic()
        try:
            answer = await self._beat_db.run(
                lambda c: leases.renew(c, self.schema, held, self.lease)
            )
            present = await self._beat_db.run(
                lambda c: registry.beat(c, self.schema, self.id, len(self._running))
            )
            if not present:
                await self._beat_db.run(self._register)
        except DB_ERRORS as exc:
            if not self._closing:
                log.warning("heartbeat failed (%s)", _why(exc))
            return
        for fence in held:
            # An attempt missing from the running set has an outcome waiting to be written; if
            # its lease is gone, the fence will refuse that write.
            rec = self._running.get(fence)
            if rec is None:
                w = self._waiting.get(fence)
                if w is None:
                    continue
                if fence not in answer:
                    self._drop_waiting(w, "the job was rescued, cancelled or requeued")
                elif answer[fence]:
                    self._cancel_waiting(w)
                else:
                    w.lease_deadline = max(w.lease_deadline, started + self.lease)
                continue
            if fence not in answer:
                self._lose(rec, "the job was rescued, cancelled or requeued")
                continue
            rec.lease_deadline = max(rec.lease_deadline, started + self.lease)
            if answer[fence]:
                self._interrupt(rec, "cancelled")

    # -- leader -------------------------------------------------------------------------------
    async def _leader_loop(self) -> None:
        rescue_every = min(5.0, self.lease / 3)
        last_rescue = last_prune = float("-inf")
        while True:
            try:
                was_leader = self.is_leader
                self.is_leader = await self._leader_db.run(
                    lambda c: leader.elect(c, self.schema, self.id, self.lease)
                )
                if self.is_leader != was_leader:
                    log.info("worker %s %s the leader", self.id,
                             "is now" if self.is_leader else "is no longer")
                if self.is_leader:
                    self.stats.staged += await self._leader_db.run(
                        lambda c: leader.stage(c, self.schema)
                    )
                    try:  # a schedule's fault must never stop rescue, staging or retention
                        await self._leader_db.run(
                            functools.partial(cron.tick, app=self.app, schema=self.schema)
                        )
                    except Exception as exc:
                        log.warning("cron tick failed (%s)", exc)
                    now = time.monotonic()
                    if now - last_rescue >= rescue_every:
                        last_rescue = now
                        await self._rescue()
                    if now - last_prune >= 60.0:
                        last_prune = now
                        await self._leader_db.run(
                            lambda c: leader.prune_workers(c, self.schema, max(60.0, 3 * self.lease))
                        )
                        await self._leader_db.run(
                            lambda c: leader.retention(c, self.schema, self.retention)
                        )
            except DB_ERRORS as exc:
                self.is_leader = False
                if not self._closing:
                    log.warning("leader chores failed (%s)", _why(exc))
            # Renewed well inside its expiry (one lease), so a live leader never loses the role.
            await asyncio.sleep(min(self.leader_interval, self.lease / 3))

    async def _rescue(self) -> None:
        rescued = await self._leader_db.run(lambda c: leader.rescue(c, self.schema))
        if not rescued:
            return
        self.stats.rescued += len(rescued)
        log.warning("rescued %d job(s) whose lease expired: %s", len(rescued),
                    ", ".join(f"{i}->{s}" for i, s in rescued[:20]))
        self.stats.staged += await self._leader_db.run(lambda c: leader.stage(c, self.schema))

    # -- shutdown -----------------------------------------------------------------------------
    async def _bounded(self, what: str, session: Session,
                       op: Callable[[Any], Awaitable[Any]], timeout: float) -> None:
        try:
            await session.run(op, timeout=max(0.1, timeout))
        except DB_ERRORS as exc:
            log.warning("%s did not finish (%s); moving on", what, _why(exc))

    async def _release_waiting(self) -> None:
        """Give back every buffered job at once, so other workers can take it."""
        waiting = [(w.job.id, w.job.fence) for w in self._waiting.values()]
        self._waiting.clear()
        self._waiting_heap.clear()
        if not waiting:
            return
        for _, fence in waiting:
            # Released or not, these leases are no longer renewed: if the release fails they
            # expire and the jobs are rescued.
            self._held.pop(fence, None)
        await self._bounded(
            f"releasing {len(waiting)} claimed job(s) that had not started", self._claim_db,
            lambda c: claims.release(c, self.schema, waiting), min(2.0, self.final_timeout),
        )

    async def _shutdown(self) -> None:
        await self._release_waiting()
        in_flight = len(self._running)
        log.info("draining: %d job(s) in flight, cutoff in %.1fs", in_flight, self.drain_timeout)
        await self._bounded(
            "marking the worker draining", self._beat_db,
            lambda c: registry.draining(c, self.schema, self.id, self.drain_timeout),
            min(2.0, self.final_timeout),
        )
        if self._running and not self._skip_wait.is_set():
            await self._wait_any(self._idle, self._skip_wait, timeout=self.drain_timeout)
        if self._running:
            log.info("drain cutoff: interrupting %d job(s)", len(self._running))
            for rec in list(self._running.values()):
                self._interrupt(rec, "interrupted")
            tasks = [r.task for r in self._running.values() if r.task is not None]
            if tasks:
                await asyncio.wait(tasks, timeout=self.drain_grace)
        for rec in list(self._running.values()):
            # A sync handler that ignored the signal still holds a thread, which dies with the
            # process: release its job, held back until that thread is surely gone.
            if rec.lost:
                continue
            outcome = stopped(rec.job, rec.ctx, rec.kind, abandoned=True)
            rec.released = True
            if outcome is not None:
                log.warning("job %s: handler ignored the drain; abandoning it", rec.job.id)
                if outcome.next in ("retryable", "scheduled"):
                    outcome.delay = max(outcome.delay, self.release_hold)
                self._outcomes.append(outcome)
        deadline = time.monotonic() + self.final_timeout
        await self._stop_flushing(deadline)
        await self._flush_once(deadline=deadline)
        # Even past the deadline each of these gets a moment: on a healthy server it is plenty.
        await self._bounded(
            "deregistering", self._beat_db,
            lambda c: registry.deregister(c, self.schema, self.id),
            max(0.5, deadline - time.monotonic()),
        )
        if self.is_leader:
            await self._bounded(
                "resigning leadership", self._leader_db,
                lambda c: leader.resign(c, self.schema, self.id),
                max(0.5, deadline - time.monotonic()),
            )

    async def _stop_flushing(self, deadline: float) -> None:
        """Let the flush loop finish the write in hand (bounded), then stop it; whatever it
        had not written is back in ``_outcomes`` for the final flush."""
        self._closing = True
        self._outcome_ready.set()
        done, _ = await asyncio.wait({self._flush_task}, timeout=deadline - time.monotonic())
        if not done:
            self._settle_db.abort()
            done, _ = await asyncio.wait({self._flush_task}, timeout=1.0)
        if not done:
            self._flush_task.cancel()
            await asyncio.wait({self._flush_task}, timeout=1.0)


async def _until(event: asyncio.Event, timeout: float) -> None:
    """Wait for ``event`` or ``timeout`` seconds, whichever comes first (no waiter task)."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(timeout):
            await event.wait()


def _why(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def run_worker(worker: Worker) -> int:
    """Run a worker until SIGTERM/SIGINT (drain; a second signal skips the wait). Exit code."""
    import signal
    import threading

    async def main() -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, worker.drain)
        await worker.run()

    code = 0
    try:
        asyncio.run(main())
    except ForkliftError as exc:  # unreachable database, outdated schema: one line, exit 1
        log.error("%s", exc.message)
        code = 1
    if any(t.name.startswith("forklift-job") and t.is_alive() for t in threading.enumerate()):
        # A sync handler ignored its cancellation; its job was released. Python would wait for
        # the thread at exit, so leave without it.
        logging.shutdown()
        os._exit(code)
    return code


def cancel_message(job_id: int) -> str:
    return json.dumps({"op": "cancel", "job": job_id})
