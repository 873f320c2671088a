"""The worker: N slots over a set of queues, everything batched.

Loops (asyncio tasks): claim (fills free slots in one statement), flush (writes outcomes in one
statement), heartbeat (renews every lease in one statement, writes progress, refreshes the
worker row), leader (stage, rescue, prune), and the listener. No transaction is held open across
a handler.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
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

import psycopg

from forklift import claim as claims
from forklift import leader, leases, registry, settle
from forklift.app import Forklift, JobKind
from forklift.context import JobContext, Progress
from forklift.db import aconnect
from forklift.errors import DatabaseUnavailable
from forklift.execute import progress_json, run_attempt
from forklift.listener import Listener
from forklift.migrate import ensure_current

log = logging.getLogger("forklift.worker")
T = TypeVar("T")

FINAL_WRITE_TIMEOUT = 5.0
VERSION = "0.1.0"


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
    task: asyncio.Task[None] | None = None
    timer: asyncio.TimerHandle | None = None
    progress: str | None = None
    partial: str | None = None
    dirty: bool = False
    finished: bool = False


class _Conn:
    """One purpose-named connection, reopened after any failure."""

    def __init__(self, dsn: str, purpose: str, worker_id: str) -> None:
        self.dsn, self.purpose, self.worker_id = dsn, purpose, worker_id
        self._conn: psycopg.AsyncConnection[Any] | None = None

    async def get(self) -> psycopg.AsyncConnection[Any]:
        if self._conn is None or self._conn.closed:
            self._conn = await aconnect(self.dsn, self.purpose, self.worker_id)
        return self._conn

    async def reset(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(conn.close(), 1.0)

    async def run(self, op: Callable[[psycopg.AsyncConnection[Any]], Awaitable[T]]) -> T:
        try:
            return await op(await self.get())
        except (psycopg.Error, DatabaseUnavailable, OSError):
            await self.reset()
            raise


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
        leader_interval: float = 1.0,
        flush_interval: float = 0.005,
        progress_interval: float = 0.25,
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
        self.leader_interval = leader_interval
        self.flush_interval = flush_interval
        self.progress_interval = progress_interval
        self.retention = retention if retention is not None else {
            "completed": 86400.0, "cancelled": 7 * 86400.0, "dead": 30 * 86400.0,
        }
        self.lead = lead
        self.host = socket.gethostname()
        self.pid = os.getpid()
        self.id = worker_id or f"{self.host}:{self.pid}:{secrets.token_hex(2)}"
        self.stats = WorkerStats()
        self.is_leader = False

        self._running: dict[int, _Running] = {}
        self._outcomes: list[settle.Outcome] = []
        self._held: dict[int, int] = {}  # id -> fence: every job whose lease we still need
        self._executor = ThreadPoolExecutor(concurrency, thread_name_prefix="forklift-job")
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake = asyncio.Event()
        self._slot_free = asyncio.Event()
        self._outcome_ready = asyncio.Event()
        self._idle = asyncio.Event()
        self._stop_claiming = asyncio.Event()
        self._skip_wait = asyncio.Event()
        self._drain_requests = 0
        self._started = asyncio.Event()
        self._dsn = ""

    # -- signals from outside -----------------------------------------------------------------
    def drain(self) -> None:
        """Begin a graceful drain; a second call skips the wait for in-flight jobs."""
        self._drain_requests += 1
        self._stop_claiming.set()
        if self._drain_requests > 1:
            self._skip_wait.set()

    @property
    def in_flight(self) -> int:
        return len(self._running)

    # -- main ---------------------------------------------------------------------------------
    async def run(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._dsn = self.app.dsn
        await asyncio.to_thread(self._check_schema)
        self._claim_conn = _Conn(self._dsn, "claim", self.id)
        self._settle_conn = _Conn(self._dsn, "complete", self.id)
        self._beat_conn = _Conn(self._dsn, "heartbeat", self.id)
        self._leader_conn = _Conn(self._dsn, "leader", self.id)
        await self._beat_conn.run(
            lambda c: registry.register(
                c, self.schema, worker_id=self.id, host=self.host, pid=self.pid,
                queues=self.queues, slots=self.concurrency, version=VERSION,
            )
        )
        self.listener = Listener(
            self._dsn, self.schema, self.id,
            on_wake=self._on_wake, on_control=self._on_control, on_reconnect=self._wake.set,
        )
        background = [
            asyncio.create_task(self.listener.run(), name="listener"),
            asyncio.create_task(self._flush_loop(), name="flush"),
            asyncio.create_task(self._heartbeat_loop(), name="heartbeat"),
        ]
        if self.lead:
            background.append(asyncio.create_task(self._leader_loop(), name="leader"))
        log.info("worker %s started: queues=%s concurrency=%d", self.id, self.queues,
                 self.concurrency)
        self._started.set()
        try:
            await self._claim_loop()
            await self._shutdown()
        finally:
            for task in background:
                task.cancel()
            await asyncio.gather(*background, return_exceptions=True)
            for conn in (self._claim_conn, self._settle_conn, self._beat_conn, self._leader_conn):
                await conn.reset()
            self._executor.shutdown(wait=False, cancel_futures=True)
        log.info("worker %s stopped", self.id)

    def _check_schema(self) -> None:
        from forklift.db import connection

        with connection(self._dsn, "migrate") as conn:
            ensure_current(conn, self.schema)

    # -- claiming -----------------------------------------------------------------------------
    def _on_wake(self, queue: str) -> None:
        if queue in self.queues:
            self._wake.set()

    def _on_control(self, message: dict[str, Any]) -> None:
        if message.get("op") == "cancel":
            job_id = message.get("job")
            rec = self._running.get(job_id) if isinstance(job_id, int) else None
            if rec is not None:
                self._interrupt(rec, "cancelled")

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
            free = self.concurrency - len(self._running)
            if free <= 0:
                self._slot_free.clear()
                await self._wait_any(self._slot_free, self._stop_claiming, timeout=None)
                continue
            self._wake.clear()
            try:
                got = await self._claim_conn.run(functools.partial(self._claim, n=free))
            except (psycopg.Error, DatabaseUnavailable, OSError) as exc:
                log.warning("claim failed (%s); retrying in %.2fs", exc, backoff)
                await self._wait_any(self._stop_claiming, timeout=backoff)
                backoff = min(backoff * 2, 5.0)
                continue
            backoff = 0.05
            for job in got:
                self._start(job)
            if got and len(got) == free:
                continue  # there may be more: claim again as soon as a slot frees
            await self._wait_any(self._wake, self._stop_claiming, timeout=self.poll_interval)

    async def _claim(self, conn: psycopg.AsyncConnection[Any], *, n: int) -> list[claims.Claimed]:
        return await claims.claim(
            conn, self.schema, worker_id=self.id, queues=self.queues, n=n, lease=self.lease
        )

    def _start(self, job: claims.Claimed) -> None:
        assert self._loop is not None
        self.stats.claimed += 1
        kind = self.app.kinds.get(job.kind)
        ctx = JobContext(
            job_id=job.id, kind=job.kind, queue=job.queue, attempt=job.attempt,
            max_attempts=job.max_attempts, fence=job.fence, worker_id=self.id, meta=job.meta,
            on_progress=functools.partial(self._note_progress, job.id),
            on_publish=functools.partial(self._note_partial, job.id),
        )
        rec = _Running(job, kind, ctx, time.monotonic() + self.lease)
        self._running[job.id] = rec
        self._held[job.id] = job.fence
        self._idle.clear()
        rec.task = asyncio.create_task(self._run(rec), name=f"job-{job.id}")
        if kind is not None and kind.timeout:
            rec.timer = self._loop.call_later(kind.timeout, self._interrupt, rec, "timeout")

    def _interrupt(self, rec: _Running, reason: str) -> None:
        """Tell a handler to stop: its context first, then (async handlers) the task."""
        if rec.finished or rec.ctx.cancel_reason is not None:
            return
        rec.ctx._cancel(reason)
        if rec.kind is not None and rec.kind.is_async and rec.task is not None:
            rec.task.cancel()

    async def _run(self, rec: _Running) -> None:
        outcome: settle.Outcome | None = None
        try:
            outcome = await run_attempt(
                rec.job, rec.kind, rec.ctx, self._executor, self.app.payload_limit
            )
        except asyncio.CancelledError:
            # Only reachable when a reason was not set: the worker is being torn down.
            outcome = None
        except Exception:
            log.exception("internal error running job %s", rec.job.id)
            outcome = None
        finally:
            rec.finished = True
            if rec.timer is not None:
                rec.timer.cancel()
            self._running.pop(rec.job.id, None)
            self._slot_free.set()
            if not self._running:
                self._idle.set()
        if outcome is None:
            if rec.ctx.cancel_reason == "lease_lost":
                self.stats.lease_lost += 1
                log.warning("job %s lost its lease; nothing written", rec.job.id)
            self._held.pop(rec.job.id, None)
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
    def _note_progress(self, job_id: int, p: Progress) -> None:
        text = progress_json(p.to_json())
        self._call_in_loop(self._set_interim, job_id, text, None)

    def _note_partial(self, job_id: int, value: Any) -> None:
        text = progress_json(value)
        self._call_in_loop(self._set_interim, job_id, None, text)

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

    def _set_interim(self, job_id: int, progress: str | None, partial: str | None) -> None:
        rec = self._running.get(job_id)
        if rec is None:
            return
        if progress is not None:
            rec.progress = progress
        if partial is not None:
            rec.partial = partial
        rec.dirty = True

    # -- flushing outcomes --------------------------------------------------------------------
    async def _flush_loop(self) -> None:
        while True:
            await self._outcome_ready.wait()
            if self._running:
                # Gather more outcomes for a moment, unless nothing else is in flight.
                await self._wait_any(self._idle, timeout=self.flush_interval)
            await self._flush_once(retry_forever=True)

    async def _flush_once(self, *, retry_forever: bool) -> bool:
        backoff = 0.05
        while self._outcomes:
            batch, self._outcomes = self._outcomes, []
            self._outcome_ready.clear()
            try:
                accepted = await self._settle_conn.run(
                    functools.partial(settle.write, schema=self.schema, outcomes=batch)
                )
            except (psycopg.Error, DatabaseUnavailable, OSError) as exc:
                self._outcomes = batch + self._outcomes
                if not retry_forever:
                    log.warning("final write failed (%s); jobs will be rescued", exc)
                    return False
                log.warning("writing outcomes failed (%s); retrying in %.2fs", exc, backoff)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 5.0)
                continue
            for o in batch:
                self._held.pop(o.job_id, None)
                if o.job_id not in accepted:
                    self.stats.stale_writes += 1
                    log.warning(
                        "job %s: outcome %s refused (fence %s is stale: the lease was lost)",
                        o.job_id, o.next, o.fence,
                    )
        return True

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

    async def _write_progress(self) -> None:
        dirty = [r for r in self._running.values() if r.dirty]
        if not dirty:
            return
        for r in dirty:
            r.dirty = False
        rows = [(r.job.id, r.job.fence, r.progress, r.partial) for r in dirty]
        try:
            await self._beat_conn.run(lambda c: leases.write_progress(c, self.schema, rows))
        except (psycopg.Error, DatabaseUnavailable, OSError) as exc:
            log.warning("progress write failed (%s)", exc)
            for r in dirty:
                r.dirty = True

    async def _beat(self) -> None:
        held = dict(self._held)
        started = time.monotonic()
        try:
            answer = await self._beat_conn.run(
                lambda c: leases.renew(c, self.schema, held, self.lease)
            )
            present = await self._beat_conn.run(
                lambda c: registry.beat(c, self.schema, self.id, len(self._running))
            )
            if not present:
                await self._beat_conn.run(
                    lambda c: registry.register(
                        c, self.schema, worker_id=self.id, host=self.host, pid=self.pid,
                        queues=self.queues, slots=self.concurrency, version=VERSION,
                    )
                )
        except (psycopg.Error, DatabaseUnavailable, OSError) as exc:
            log.warning("heartbeat failed (%s)", exc)
            now = time.monotonic()
            for rec in list(self._running.values()):
                if now >= rec.lease_deadline:
                    self._interrupt(rec, "lease_lost")
            return
        for job_id in held:
            # A job missing from the running set has an outcome waiting to be written; if its
            # lease is gone, the fence will refuse that write.
            running = self._running.get(job_id)
            if running is None:
                continue
            if job_id not in answer:
                self._interrupt(running, "lease_lost")
                continue
            running.lease_deadline = started + self.lease
            if answer[job_id]:
                self._interrupt(running, "cancelled")

    # -- leader -------------------------------------------------------------------------------
    async def _leader_loop(self) -> None:
        last_rescue = last_prune = 0.0
        while True:
            try:
                self.is_leader = await self._leader_conn.run(
                    lambda c: leader.elect(c, self.schema, self.id, self.lease)
                )
                if self.is_leader:
                    self.stats.staged += await self._leader_conn.run(
                        lambda c: leader.stage(c, self.schema)
                    )
                    now = time.monotonic()
                    if now - last_rescue >= min(5.0, self.lease / 3):
                        last_rescue = now
                        rescued = await self._leader_conn.run(
                            lambda c: leader.rescue(c, self.schema)
                        )
                        if rescued:
                            self.stats.rescued += len(rescued)
                            log.warning("rescued %d job(s) whose lease expired", len(rescued))
                            self.stats.staged += await self._leader_conn.run(
                                lambda c: leader.stage(c, self.schema)
                            )
                    if now - last_prune >= 60.0:
                        last_prune = now
                        await self._leader_conn.run(
                            lambda c: leader.prune_workers(c, self.schema, max(60.0, 3 * self.lease))
                        )
                        await self._leader_conn.run(
                            lambda c: leader.retention(c, self.schema, self.retention)
                        )
            except (psycopg.Error, DatabaseUnavailable, OSError) as exc:
                self.is_leader = False
                log.warning("leader chores failed (%s)", exc)
            await asyncio.sleep(self.leader_interval)

    # -- shutdown -----------------------------------------------------------------------------
    async def _bounded(self, what: str, op: Awaitable[Any]) -> None:
        try:
            await asyncio.wait_for(op, FINAL_WRITE_TIMEOUT)
        except Exception as exc:
            log.warning("%s did not finish (%s); moving on", what, type(exc).__name__)

    async def _shutdown(self) -> None:
        if self._running:
            log.info("draining: %d job(s) in flight, cutoff in %.1fs", len(self._running),
                     self.drain_timeout)
            await self._bounded(
                "marking the worker draining",
                self._beat_conn.run(
                    lambda c: registry.draining(c, self.schema, self.id, self.drain_timeout)
                ),
            )
            idle_or_skip = [self._idle, self._skip_wait]
            await self._wait_any(*idle_or_skip, timeout=self.drain_timeout)
            for rec in list(self._running.values()):
                self._interrupt(rec, "interrupted")
            tasks = [r.task for r in self._running.values() if r.task is not None]
            if tasks:
                await asyncio.wait(tasks, timeout=self.drain_grace)
            # Sync handlers that ignored the signal still hold a thread: release their jobs.
            for rec in list(self._running.values()):
                self._outcomes.append(
                    settle.Outcome(
                        rec.job.id, rec.job.fence, "retryable", refund=1, code="interrupted",
                        error={"code": "interrupted", "type": "Interrupted",
                               "message": "the worker shut down before the job finished",
                               "attempt": rec.job.attempt, "worker": self.id},
                    )
                )
                self._running.pop(rec.job.id, None)
        await self._bounded("final outcome writes", self._flush_once(retry_forever=False))
        await self._bounded("deregistering", self._beat_conn.run(
            lambda c: registry.deregister(c, self.schema, self.id)))
        if self.is_leader:
            await self._bounded("resigning leadership", self._leader_conn.run(
                lambda c: leader.resign(c, self.schema, self.id)))


def run_worker(worker: Worker) -> int:
    """Run a worker until SIGTERM/SIGINT (drain; a second signal skips the wait). Exit code."""
    import signal

    async def main() -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, worker.drain)
        await worker.run()

    code = 0
    try:
        asyncio.run(main())
    except DatabaseUnavailable as exc:
        log.error("%s", exc.message)
        code = 1
    import threading

    if any(t.name.startswith("forklift-job") and t.is_alive() for t in threading.enumerate()):
        # A sync handler ignored its cancellation; its job was released. Python would wait for
        # the thread at exit, so leave without it.
        logging.shutdown()
        os._exit(code)
    return code


def cancel_message(job_id: int) -> str:
    return json.dumps({"op": "cancel", "job": job_id})
